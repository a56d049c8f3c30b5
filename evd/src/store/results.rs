//! What `results/` holds for the verdicts besides the state files: a selector's receipts, the
//! selected-list and the cached origin sha. Reading only, forgiving (what cannot be read reads
//! as absent); the verdict engine that weighs them stays pure ([`crate::engine::verdict`]).

use std::path::Path;

use serde_json::Value;

use crate::engine::receipts::{self, Receipt};
use crate::engine::verdict::Selected;
use crate::sys::fsio;

/// The receipts of one selector; a missing, unreadable or poisoned file reads as none.
pub fn read_receipts(results: &Path, selector: &str) -> Vec<Receipt> {
    let path = results
        .join("receipts")
        .join(format!("{}.jsonl", proto::id::receipt_key(selector)));
    match fsio::read_text_opt(&path) {
        Ok(Some(text)) => receipts::parse_file(&text).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// `results/selected.json`: `None` when missing or invalid (closed key set, string arrays).
pub fn read_selected(results: &Path) -> Option<Selected> {
    parse_selected(&fsio::read_text(&results.join("selected.json")).ok()?)
}

/// An object with keys only from {commit, changed, selected}, the two lists arrays of strings.
/// Anything else is invalid, which reads as absent.
pub fn parse_selected(text: &str) -> Option<Selected> {
    let v: Value = serde_json::from_str(text).ok()?;
    let o = v.as_object()?;
    if o.keys()
        .any(|k| !matches!(k.as_str(), "commit" | "changed" | "selected"))
    {
        return None;
    }
    let list = |k: &str| -> Option<Vec<String>> {
        match o.get(k) {
            None => Some(Vec::new()),
            Some(Value::Array(a)) => a.iter().map(|x| x.as_str().map(str::to_string)).collect(),
            Some(_) => None,
        }
    };
    Some(Selected {
        changed: list("changed")?,
        selected: list("selected")?,
    })
}

/// The cached staleness reference `results/origin-sha`, trimmed; empty reads as absent.
pub fn cached_origin(results: &Path) -> Option<String> {
    fsio::read_text(&results.join("origin-sha"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_json_is_closed_and_typed() {
        let s = parse_selected(r#"{"commit":1,"changed":["a"],"selected":["t"]}"#).expect("ok");
        assert_eq!(s.changed, vec!["a".to_string()]);
        assert_eq!(s.selected, vec!["t".to_string()]);
        assert_eq!(parse_selected("{}"), Some(Selected::default()));
        assert_eq!(parse_selected(r#"{"changed":["a"],"x":1}"#), None);
        assert!(parse_selected(r#"{"extra":[]}"#).is_none());
        assert!(parse_selected(r#"{"changed":"a"}"#).is_none());
        assert!(parse_selected(r#"{"selected":[1]}"#).is_none());
        assert!(parse_selected("[]").is_none());
        assert!(parse_selected("not json").is_none());
    }
}
