//! A check's event lines (each part's `harvested` events and its `check` event), written as a
//! template: every line but its `ts` value, kept while no line's `age` bucket moves, so that a
//! repeated check only writes the time anew. The lines are byte for byte what the event
//! writer ([`crate::engine::events::tick_event_fields`], serialised as compact JSON with sorted
//! keys) would say.
//!
//! Pure: it must not read the clock (the time is handed in), a disk or git, nor append to the
//! event log itself; its caller hands the lines on.

use std::sync::Arc;

use crate::engine::rows::TickPart;

/// A store's event template, for the renderings it was made from: one at a time (at 100,000
/// ticks it is megabytes, and only the current evaluation's is of use).
#[derive(Debug, Default)]
pub struct EventTemplates(Option<(u64, Arc<EventTemplate>)>);

/// A check's event lines but for their `ts` value (the same in every line of one check): what
/// comes between one `ts` and the next, as written while no line's `age` bucket moves.
#[derive(Debug)]
pub struct EventTemplate {
    text: String,
    /// Where each `ts` value goes in `text`, ascending.
    holes: Vec<usize>,
    /// The span of time (nanoseconds since the epoch) in which every `age` bucket reads as
    /// written: from when it was made until the first bucket moves.
    from_ns: i128,
    until_ns: i128,
}

/// Event lines are handed to the writer in pieces of about this size.
const EVENT_CHUNK: usize = 64 << 10;

impl EventTemplates {
    /// The event template of `parts` for a check at `now_ns`: the one kept here when it was
    /// made from the same renderings (`renderings`, the keeper's number for them) and no `age`
    /// bucket moved since, else a new one (kept here).
    pub fn get(
        &mut self,
        renderings: u64,
        parts: &[Arc<TickPart>],
        now_ns: i128,
    ) -> Arc<EventTemplate> {
        if let Some((id, t)) = self.0.as_ref() {
            if *id == renderings && t.from_ns <= now_ns && now_ns < t.until_ns {
                return Arc::clone(t);
            }
        }
        // The old one goes before the new one is made.
        self.0 = None;
        let mut text = String::new();
        let mut holes = Vec::new();
        let mut until_ns = i128::MAX;
        for p in parts {
            p.write_events(&mut text, &mut holes, now_ns, &mut until_ns);
        }
        let t = Arc::new(EventTemplate {
            text,
            holes,
            from_ns: now_ns,
            until_ns,
        });
        self.0 = Some((renderings, Arc::clone(&t)));
        t
    }
}

impl EventTemplate {
    /// Its lines with `ts` put in every hole, newline-terminated, handed to `sink` in pieces
    /// that end at a line's end.
    pub fn write(&self, ts: &str, sink: &mut dyn FnMut(&str)) {
        let mut out = String::with_capacity(EVENT_CHUNK + 1024);
        let mut at = 0usize;
        for &hole in &self.holes {
            out.push_str(self.text.get(at..hole).unwrap_or_default());
            out.push_str(ts);
            at = hole;
            // A hole is inside a line: its end is the next newline after it.
            if out.len() >= EVENT_CHUNK {
                if let Some(nl) = self.text.get(at..).and_then(|rest| rest.find('\n')) {
                    out.push_str(self.text.get(at..=at + nl).unwrap_or_default());
                    at += nl + 1;
                    sink(&out);
                    out.clear();
                }
            }
        }
        out.push_str(self.text.get(at..).unwrap_or_default());
        if !out.is_empty() {
            sink(&out);
        }
    }
}

impl TickPart {
    /// Its event lines for a check at `now_ns` (its `harvested` events, then its `check`
    /// event), each with an empty `ts` value whose place is pushed to `holes`. `until_ns` is
    /// lowered to when an `age` written here would read differently.
    fn write_events(
        &self,
        out: &mut String,
        holes: &mut Vec<usize>,
        now_ns: i128,
        until_ns: &mut i128,
    ) {
        let Some(check) = self.tests.as_ref().and_then(|t| t.check_event.as_ref()) else {
            return;
        };
        let held =
            crate::engine::clock::parse(self.tick.held_since()).map(|t| t.unix_timestamp_nanos());
        if let Some(then) = held {
            *until_ns = (*until_ns).min(crate::engine::events::age_bucket_ends(then, now_ns));
        }
        let line =
            TickEventLine::of(
                &self.tick,
                held.map(|then| {
                    // Whole seconds, truncated toward zero, as `Duration::whole_seconds`.
                    let secs = (now_ns - then) / 1_000_000_000;
                    crate::engine::events::age_bucket_of(
                        i64::try_from(secs).unwrap_or(if secs < 0 { i64::MIN } else { i64::MAX }),
                    )
                }),
            );
        for r in self.kept_rows().iter().filter(|r| r.harvested) {
            line.write(out, holes, "harvested", &[("verdict", &r.event_label)]);
        }
        let mut extra = [("verdict", &*check.verdict), ("", ""), ("", "")];
        let mut n = 1;
        for (key, value) in [
            ("masked_stale", &check.masked_stale),
            ("suppressed_from", &check.suppressed_from),
        ] {
            if let Some(v) = value {
                extra[n] = (key, v);
                n += 1;
            }
        }
        line.write(out, holes, "check", extra.get(..n).unwrap_or_default());
    }
}

/// The fields a tick gives each of its event lines (what [`crate::engine::events::tick_event_fields`]
/// takes from a tick), read from the packed tick, to write lines in sorted-key order without
/// building a JSON map.
struct TickEventLine<'t> {
    fields: [(&'static str, &'t str); 6],
    len: usize,
    /// The rare `source_ref` key, made once for all the tick's lines.
    source_ref: Option<String>,
}

impl<'t> TickEventLine<'t> {
    fn of(tick: &'t crate::engine::packed::PackedTick, age: Option<&'static str>) -> Self {
        let mut line = TickEventLine {
            fields: [("", ""); 6],
            len: 0,
            source_ref: tick.source_ref_key(),
        };
        let mut put = |k: &'static str, v: &'t str| {
            line.fields[line.len] = (k, v);
            line.len += 1;
        };
        put("tick_id", tick.id());
        if !tick.parent_id().is_empty() {
            put("parent_id", tick.parent_id());
        }
        if let Some(a) = age {
            put("age", a);
        }
        if let Some(s) = tick.supersedes() {
            put("supersedes", s);
        }
        if let Some(r) = tick.ratifies() {
            put("ratifies", r);
        }
        line
    }

    /// One line: these fields, `op`, `extra` and an empty `ts` (its place pushed to `holes`),
    /// as compact JSON with sorted keys, newline-terminated.
    fn write(&self, out: &mut String, holes: &mut Vec<usize>, op: &str, extra: &[(&str, &str)]) {
        let mut all: [(&str, &str); 12] = [("", ""); 12];
        let mut n = 0;
        let fixed = self.fields.get(..self.len).unwrap_or_default();
        let rare = self.source_ref.as_deref().map(|k| ("source_ref", k));
        for (k, v) in fixed
            .iter()
            .copied()
            .chain(rare)
            .chain([("op", op), ("ts", "")])
            .chain(extra.iter().copied())
        {
            if let Some(slot) = all.get_mut(n) {
                *slot = (k, v);
                n += 1;
            }
        }
        let all = all.get_mut(..n).unwrap_or_default();
        all.sort_unstable_by_key(|(k, _)| *k);
        out.push('{');
        for (i, (k, v)) in all.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_str(out, k);
            out.push(':');
            if *k == "ts" {
                out.push('"');
                holes.push(out.len());
                out.push('"');
            } else {
                push_json_str(out, v);
            }
        }
        out.push_str("}\n");
    }
}

/// `s` as a JSON string, exactly as serde_json writes it.
fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rows::testing::{part_of, tick, written_by_the_event_writer};
    use crate::engine::rows::CheckEvent;
    use time::OffsetDateTime;

    /// `part`'s lines as the template writes them, with `now`'s `ts` put in each hole.
    fn written_by_the_template(part: &TickPart, now: OffsetDateTime) -> String {
        let (mut text, mut holes, mut until) = (String::new(), Vec::new(), i128::MAX);
        part.write_events(
            &mut text,
            &mut holes,
            now.unix_timestamp_nanos(),
            &mut until,
        );
        let ts = crate::engine::clock::format(now);
        let mut out = String::new();
        let mut at = 0;
        for h in holes {
            out.push_str(&text[at..h]);
            out.push_str(&ts);
            at = h;
        }
        out.push_str(&text[at..]);
        out
    }

    #[test]
    fn an_event_template_writes_the_same_lines_as_the_event_writer() {
        let now = crate::engine::clock::parse("2026-03-01T12:00:00.5Z").expect("now");
        let mut t = tick();
        let check = CheckEvent::new("red", Some("stale:age"), Some("red"));
        let part = part_of(
            &t,
            &[(true, "green"), (false, "red"), (true, "stale:sha")],
            Some(check),
        );
        let want = written_by_the_event_writer(&part, &t, now);
        assert_eq!(want.lines().count(), 3, "two harvested lines and a check");
        assert_eq!(written_by_the_template(&part, now), want);

        // Without a parent, with every optional key, a held_since that does not parse, and
        // texts JSON must escape.
        t.parent_id = String::new();
        t.held_since = "whenever".into();
        t.supersedes = Some("cccccccccccc".into());
        t.ratifies = Some("dddddddddddd".into());
        t.source_ref = Some(proto::model::SourceRef::Text("R\"42\u{1}".into()));
        let part = part_of(
            &t,
            &[(true, "gr\"een")],
            Some(CheckEvent::new("green", None, None)),
        );
        let want = written_by_the_event_writer(&part, &t, now);
        assert!(want.contains("source_ref") && !want.contains("\"age\""));
        assert_eq!(written_by_the_template(&part, now), want);

        // A part without test grounds writes nothing.
        let part = part_of(&t, &[], None);
        assert_eq!(written_by_the_template(&part, now), "");
    }
}
