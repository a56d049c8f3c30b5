//! Every vector of the spec's golden-vectors.json (a copy lives in tests/data) is pinned: the
//! payload parses through our ground reader, its canonical bytes equal the recorded ones, and its
//! id equals the frozen id.

use proto::id::{canonical_payload, tick_id};
use proto::model::ground_from_value;
use serde_json::Value;

#[test]
fn every_golden_vector_reproduces_its_canonical_bytes_and_id() {
    let text = include_str!("data/golden-vectors.json");
    let vectors: Vec<Value> = serde_json::from_str(text).expect("vector file is JSON");
    assert!(vectors.len() >= 8, "expected the full vector set");
    for v in &vectors {
        let name = v["name"].as_str().expect("name");
        let p = &v["payload"];
        let grounds = p["grounds"]
            .as_array()
            .expect("grounds")
            .iter()
            .map(|g| ground_from_value(g).expect("ground parses"))
            .collect::<Vec<_>>();
        let s = |k: &str| p[k].as_str().expect("string field").to_string();
        let canonical = canonical_payload(&s("decision"), &s("observe"), &grounds, &s("parent_id"));
        assert_eq!(
            canonical,
            v["canonical"].as_str().expect("canonical"),
            "{name}: canonical bytes"
        );
        let id = tick_id(&s("decision"), &s("observe"), &grounds, &s("parent_id"));
        assert_eq!(id, v["id"].as_str().expect("id"), "{name}: id");
    }
}

#[test]
fn liveness_order_and_duplicates_do_not_move_an_id() {
    let text = include_str!("data/golden-vectors.json");
    let vectors: Vec<Value> = serde_json::from_str(text).expect("vector file is JSON");
    let v = vectors
        .iter()
        .find(|v| v["name"] == "derived_liveness_sorted_deduped")
        .expect("vector present");
    let mut payload = v["payload"].clone();
    payload["grounds"][0]["check"]["liveness"]["platforms"] =
        serde_json::json!(["mac", "linux-ci", "Zeta", "mac"]);
    let grounds = payload["grounds"]
        .as_array()
        .expect("grounds")
        .iter()
        .map(|g| ground_from_value(g).expect("ground parses"))
        .collect::<Vec<_>>();
    let id = tick_id(
        payload["decision"].as_str().unwrap_or_default(),
        "",
        &grounds,
        payload["parent_id"].as_str().unwrap_or_default(),
    );
    assert_eq!(id, "5b5cd622438a");
}
