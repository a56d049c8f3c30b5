//! The two JSON layouts ev writes, and the debug quoting its messages use.
//!
//! Every document ev writes comes from a sorted map, so keys appear in byte order at every level.
//! `serde_json::Value` keeps object keys in a `BTreeMap` (this workspace never enables
//! `preserve_order`), and serde_json escapes exactly the characters upstream escapes (`"`, `\`,
//! the C0 controls, with lowercase `\u00XX`), so its compact and pretty writers give the bytes the
//! store format asks for. The tests below pin both facts.

use serde_json::Value;

/// Compact layout: no whitespace at all. Used for the hash input, receipts, events and the
/// one-line JSON answers.
pub fn compact(v: &Value) -> String {
    // Serializing a Value into a String cannot fail: every key is a string and there are no
    // non-finite floats in a Value.
    serde_json::to_string(v).unwrap_or_default()
}

/// Pretty layout: two-space indent, `": "` separators, no trailing newline. Used for tick files
/// and state files.
pub fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Q(s): the debug quoting upstream uses in messages (`"a\tb\"c"`), i.e. Rust's `{:?}` of a str.
pub fn q(s: &str) -> String {
    format!("{s:?}")
}

/// O(v): `None` when absent, `Some(Q(v))` when present.
pub fn o(v: Option<&str>) -> String {
    match v {
        None => "None".to_string(),
        Some(s) => format!("Some({})", q(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_come_out_in_byte_order_at_every_level() {
        let v = json!({"z": 1, "a": {"y": true, "b": null}, "M": []});
        assert_eq!(compact(&v), r#"{"M":[],"a":{"b":null,"y":true},"z":1}"#);
    }

    #[test]
    fn escaping_matches_the_store_format_table() {
        let s = "q\" b\\ s/ t\t n\n r\r b\u{8} f\u{c} one\u{1} us\u{1f} del\u{7f} \u{2028} é 😀";
        assert_eq!(
            compact(&Value::String(s.into())),
            "\"q\\\" b\\\\ s/ t\\t n\\n r\\r b\\b f\\f one\\u0001 us\\u001f del\u{7f} \u{2028} é 😀\""
        );
    }

    #[test]
    fn pretty_layout_has_two_space_indent_and_bare_empty_containers() {
        let v = json!({"a": [], "b": {}, "c": ["x"]});
        assert_eq!(
            pretty(&v),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    \"x\"\n  ]\n}"
        );
    }

    #[test]
    fn debug_quoting_matches_the_spec_example() {
        assert_eq!(q("a\tb\"c\u{1b}"), "\"a\\tb\\\"c\\u{1b}\"");
        assert_eq!(o(None), "None");
        assert_eq!(o(Some("notes")), "Some(\"notes\")");
    }
}
