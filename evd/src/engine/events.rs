//! Lines of `results/events.jsonl`, the best-effort metrics log (compact JSON, sorted keys).

use serde_json::{Map, Value};
use time::OffsetDateTime;

use proto::Tick;

/// The age bucket of `held_since` at `now`; `None` when it does not parse.
pub fn age_bucket(held_since: &str, now: OffsetDateTime) -> Option<&'static str> {
    crate::engine::clock::parse(held_since).map(|then| age_bucket_since(then, now))
}

/// The age bucket of something that began at `then`.
pub fn age_bucket_since(then: OffsetDateTime, now: OffsetDateTime) -> &'static str {
    age_bucket_of((now - then).whole_seconds())
}

/// The age bucket of an age in whole seconds.
pub fn age_bucket_of(secs: i64) -> &'static str {
    let days = secs.div_euclid(86_400);
    if secs < 300 {
        "fresh"
    } else if secs < 3_600 {
        "minutes"
    } else if secs < 86_400 {
        "hours"
    } else if days < 7 {
        "days"
    } else if days < 30 {
        "weeks"
    } else if days < 365 {
        "months"
    } else {
        "year+"
    }
}

/// The first instant (nanoseconds since the epoch) at which the age bucket of something held
/// since `then_ns` reads differently than at `now_ns` ([`age_bucket_of`] of the whole seconds
/// between them, truncated toward zero); `i128::MAX` once it is `year+` for good.
pub fn age_bucket_ends(then_ns: i128, now_ns: i128) -> i128 {
    const BOUNDS: [i128; 6] = [300, 3_600, 86_400, 7 * 86_400, 30 * 86_400, 365 * 86_400];
    let secs = (now_ns - then_ns) / 1_000_000_000;
    BOUNDS
        .iter()
        .find(|&&b| secs < b)
        .map_or(i128::MAX, |b| then_ns + b * 1_000_000_000)
}

/// A tick-scoped event line: `op`, `ts`, `tick_id`, and each optional field when it applies.
pub fn tick_event(op: &str, tick: &Tick, now: OffsetDateTime) -> String {
    proto::json::compact(&Value::Object(tick_event_fields(op, tick, now)))
}

/// The fields of a tick-scoped event, for callers that add their own before writing.
pub fn tick_event_fields(op: &str, tick: &Tick, now: OffsetDateTime) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("op".into(), op.into());
    o.insert("ts".into(), crate::engine::clock::format(now).into());
    o.insert("tick_id".into(), tick.id.as_str().into());
    if !tick.parent_id.is_empty() {
        o.insert("parent_id".into(), tick.parent_id.as_str().into());
    }
    if let Some(k) = tick.source_ref_key() {
        o.insert("source_ref".into(), k.into());
    }
    if let Some(age) = age_bucket(&tick.held_since, now) {
        o.insert("age".into(), age.into());
    }
    if let Some(s) = &tick.supersedes {
        o.insert("supersedes".into(), s.as_str().into());
    }
    if let Some(r) = &tick.ratifies {
        o.insert("ratifies".into(), r.as_str().into());
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_the_thresholds() {
        let now = crate::engine::clock::parse("2026-02-01T00:00:00Z").expect("parses");
        assert_eq!(age_bucket("2026-02-01T00:00:00Z", now), Some("fresh"));
        assert_eq!(age_bucket("2026-03-01T00:00:00Z", now), Some("fresh"));
        assert_eq!(age_bucket("2026-01-31T23:30:00Z", now), Some("minutes"));
        assert_eq!(age_bucket("2026-01-31T01:00:00Z", now), Some("hours"));
        assert_eq!(age_bucket("2026-01-28T00:00:00Z", now), Some("days"));
        assert_eq!(age_bucket("2026-01-10T00:00:00Z", now), Some("weeks"));
        assert_eq!(age_bucket("2025-06-01T00:00:00Z", now), Some("months"));
        assert_eq!(age_bucket("2024-01-01T00:00:00Z", now), Some("year+"));
        assert_eq!(age_bucket("yesterday", now), None);
    }
}
