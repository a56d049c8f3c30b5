//! Content-addressed identity: the canonical JSON of the hashed payload and its 12-hex id.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::model::{Check, Ground};

fn check_value(c: &Check) -> Value {
    let mut o = Map::new();
    match c {
        Check::Person { reference } => {
            o.insert("by".into(), "person".into());
            o.insert("ref".into(), reference.as_str().into());
        }
        Check::Test {
            reference,
            verified_at_sha,
            counter_test,
            liveness,
        } => {
            let l = liveness.canonical();
            let mut lv = Map::new();
            lv.insert("platforms".into(), l.platforms.into());
            lv.insert("triggered_by".into(), l.triggered_by.into());
            lv.insert("surfaces".into(), l.surfaces.into());
            o.insert("by".into(), "test".into());
            o.insert("ref".into(), reference.as_str().into());
            o.insert("verified_at_sha".into(), verified_at_sha.as_str().into());
            // An absent counter-test omits the key: a harvested id stays byte-stable.
            if let Some(ct) = counter_test {
                o.insert("counter_test".into(), ct.as_str().into());
            }
            o.insert("liveness".into(), Value::Object(lv));
        }
    }
    Value::Object(o)
}

/// One ground as it enters the hash (and the tick file).
pub fn ground_value(g: &Ground) -> Value {
    let mut o = Map::new();
    o.insert("claim".into(), g.claim.as_str().into());
    o.insert("supports".into(), g.supports.as_str().into());
    if let Some(c) = &g.check {
        o.insert("check".into(), check_value(c));
    }
    Value::Object(o)
}

/// The hashed payload `{decision, grounds, observe, parent_id}` and nothing else.
pub fn hashed_value(decision: &str, observe: &str, grounds: &[Ground], parent_id: &str) -> Value {
    let mut o = Map::new();
    o.insert("decision".into(), decision.into());
    o.insert("observe".into(), observe.into());
    o.insert(
        "grounds".into(),
        Value::Array(grounds.iter().map(ground_value).collect()),
    );
    o.insert("parent_id".into(), parent_id.into());
    Value::Object(o)
}

/// The exact bytes that are hashed.
pub fn canonical_payload(
    decision: &str,
    observe: &str,
    grounds: &[Ground],
    parent_id: &str,
) -> String {
    crate::json::compact(&hashed_value(decision, observe, grounds, parent_id))
}

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
