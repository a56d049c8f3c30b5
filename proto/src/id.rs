//! Content-addressed identity: the 12-hex id of a tick's canonical payload (whose shape
//! [`crate::model`] owns), the decision identity of the current view, and receipt keys. It
//! hashes; it never decides what is hashed.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::model::Ground;
pub use crate::model::{canonical_payload, ground_value, hashed_value};

/// The whole SHA-256 of `bytes`, 64 lowercase hex characters.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// First 12 lowercase hex characters of SHA-256 over `bytes`.
pub fn hex12(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(12);
    for b in digest.iter().take(6) {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    s
}

/// The tick id of a payload.
pub fn tick_id(decision: &str, observe: &str, grounds: &[Ground], parent_id: &str) -> String {
    hex12(canonical_payload(decision, observe, grounds, parent_id).as_bytes())
}

/// The decision identity used by the current-view collapse: the hashed payload without
/// `parent_id`, compact.
pub fn decision_identity(decision: &str, observe: &str, grounds: &[Ground]) -> String {
    let mut v = hashed_value(decision, observe, grounds, "");
    if let Value::Object(o) = &mut v {
        o.remove("parent_id");
    }
    crate::json::compact(&v)
}

/// The receipt file key of a test selector: 12 hex of SHA-256 over its bytes.
pub fn receipt_key(selector: &str) -> String {
    hex12(selector.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipt_keys_match_the_store_format_examples() {
        assert_eq!(receipt_key("true"), "b5bea41b6c62");
        assert_eq!(receipt_key("false"), "fcbcf165908d");
        assert_eq!(
            receipt_key("! grep -q redis pyproject.toml"),
            "d0d38295cf0d"
        );
    }
}
