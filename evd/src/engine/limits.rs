//! Size limits at every write door. Upstream sets none; a daemon that serves every store of its
//! user for months must, or one oversized write makes every later `list`, `log` and `check` of
//! that store slow and large. Each limit is refused with a message naming it.
//!
//! | what | limit |
//! |---|---|
//! | one text field of a tick (decision, observe, a claim, a selector, a path…) | [`MAX_FIELD_BYTES`] |
//! | grounds in one tick | [`MAX_GROUNDS`] |
//! | one tick file | [`MAX_TICK_BYTES`] |
//! | one receipt line | [`MAX_RECEIPT_BYTES`] |
//! | receipts in one append | [`MAX_RECEIPTS_PER_APPEND`] |
//! | one request | [`crate::daemon::server::MAX_REQUEST_BYTES`] |

use proto::rpc::Refusal;
use proto::Tick;
use serde_json::Value;

pub const MAX_FIELD_BYTES: usize = 64 * 1024;
pub const MAX_GROUNDS: usize = 256;
pub const MAX_TICK_BYTES: usize = 256 * 1024;
pub const MAX_RECEIPT_BYTES: usize = 16 * 1024;
pub const MAX_RECEIPTS_PER_APPEND: usize = 10_000;

fn too_large(what: &str, size: usize, limit: usize, unit: &str) -> Refusal {
    Refusal::refused(
        "too_large",
        format!(
            "{what} is {size} {unit}; the limit is {limit} {unit} (evd refuses larger writes so \
             that every store stays quick to read, list and check)"
        ),
    )
}

/// Refuse a tick that is too large: any text field, the number of grounds, the whole file.
pub fn check_tick(tick: &Tick) -> Result<(), Refusal> {
    if tick.grounds.len() > MAX_GROUNDS {
        return Err(too_large(
            "the number of grounds",
            tick.grounds.len(),
            MAX_GROUNDS,
            "grounds",
        ));
    }
    let bytes = tick.file_bytes();
    if let Some((path, len)) = longest_string(&tick.to_value(), String::new()) {
        if len > MAX_FIELD_BYTES {
            return Err(too_large(
                &format!("field `{path}`"),
                len,
                MAX_FIELD_BYTES,
                "bytes",
            ));
        }
    }
    if bytes.len() > MAX_TICK_BYTES {
        return Err(too_large("the tick", bytes.len(), MAX_TICK_BYTES, "bytes"));
    }
    Ok(())
}

/// The longest string anywhere in `v`, with its path (`grounds[2].claim`).
fn longest_string(v: &Value, at: String) -> Option<(String, usize)> {
    match v {
        Value::String(s) => Some((at, s.len())),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .filter_map(|(i, x)| longest_string(x, format!("{at}[{i}]")))
            .max_by_key(|(_, n)| *n),
        Value::Object(o) => o
            .iter()
            .filter_map(|(k, x)| {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                longest_string(x, path)
            })
            .max_by_key(|(_, n)| *n),
        _ => None,
    }
}

/// Refuse a receipt append that is too large.
pub fn check_receipts<'a>(lines: impl ExactSizeIterator<Item = &'a str>) -> Result<(), Refusal> {
    if lines.len() > MAX_RECEIPTS_PER_APPEND {
        return Err(too_large(
            "the append",
            lines.len(),
            MAX_RECEIPTS_PER_APPEND,
            "receipts",
        ));
    }
    let mut lines = lines;
    if let Some(l) = lines.find(|l| l.len() > MAX_RECEIPT_BYTES) {
        return Err(too_large(
            "a receipt line",
            l.len(),
            MAX_RECEIPT_BYTES,
            "bytes",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_field_is_named_by_its_path() {
        let v = serde_json::json!({"decision": "d", "grounds": [{"claim": "c"}, {"claim": "long claim"}]});
        assert_eq!(
            longest_string(&v, String::new()),
            Some(("grounds[1].claim".to_string(), 10))
        );
    }
}
