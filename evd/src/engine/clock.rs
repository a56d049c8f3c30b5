//! The daemon's clock, in the one timestamp shape ev writes: RFC 3339, UTC, `Z`, the fraction
//! trimmed of trailing zeros (and omitted when zero).

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

pub fn format(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

pub fn now_rfc3339() -> String {
    format(now())
}

/// Parse any RFC 3339 timestamp; `None` when it does not parse (never an error upstream).
pub fn parse(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_trimmed_and_zero_is_omitted() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_767_225_600_000_000_000).expect("ts");
        assert_eq!(format(t), "2026-01-01T00:00:00Z");
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_767_225_600_093_791_860).expect("ts");
        assert_eq!(format(t), "2026-01-01T00:00:00.09379186Z");
    }
}
