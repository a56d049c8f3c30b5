//! Run receipts: `results/receipts/<key>.jsonl`, one compact JSON object per line, appended by
//! `check --run`, CI, hooks or upstream ev. Parsing is pure; the store does the reading.
//!
//! Reading follows upstream (store-format §6.3): the key set is closed, `test`, `platform`,
//! `commit`, `ran_at` and `result` must be strings, `result` one of green/red/gray, and a
//! non-boolean `falsifiable` reads as absent. One bad line poisons the whole file (the selector
//! then has no receipts). The one tolerance added here: a last line with no newline that does not
//! parse is a write still in progress, and is skipped rather than poisoning the file.

use serde_json::{Map, Value};

/// The result a receipt records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunResult {
    Green,
    Red,
    Gray,
}

impl RunResult {
    pub fn as_str(self) -> &'static str {
        match self {
            RunResult::Green => "green",
            RunResult::Red => "red",
            RunResult::Gray => "gray",
        }
    }
}

/// One line of a receipts file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub test: String,
    pub platform: String,
    pub commit: String,
    pub ran_at: String,
    pub result: RunResult,
    pub falsifiable: Option<bool>,
}

impl Receipt {
    /// The line as written: compact, keys sorted, `falsifiable` only when known, then `\n`.
    pub fn line(&self) -> String {
        let mut o = Map::new();
        o.insert("commit".into(), self.commit.as_str().into());
        if let Some(f) = self.falsifiable {
            o.insert("falsifiable".into(), f.into());
        }
        o.insert("platform".into(), self.platform.as_str().into());
        o.insert("ran_at".into(), self.ran_at.as_str().into());
        o.insert("result".into(), self.result.as_str().into());
        o.insert("test".into(), self.test.as_str().into());
        let mut s = proto::json::compact(&Value::Object(o));
        s.push('\n');
        s
    }
}

const KEYS: [&str; 6] = [
    "commit",
    "falsifiable",
    "platform",
    "ran_at",
    "result",
    "test",
];

/// Parse one line strictly.
pub fn parse_line(line: &str) -> Result<Receipt, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    from_object(v.as_object().ok_or("receipt is not an object")?)
}

/// A receipt from a line's object, by the same rules as [`parse_line`].
pub fn from_object(o: &Map<String, Value>) -> Result<Receipt, String> {
    if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("receipt: field outside closed schema: {k}"));
    }
    let s = |k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("receipt: missing or non-string field: {k}"))
    };
    let result = match s("result")?.as_str() {
        "green" => RunResult::Green,
        "red" => RunResult::Red,
        "gray" => RunResult::Gray,
        other => return Err(format!("receipt: invalid result: {other}")),
    };
    Ok(Receipt {
        test: s("test")?,
        platform: s("platform")?,
        commit: s("commit")?,
        ran_at: s("ran_at")?,
        result,
        falsifiable: o.get("falsifiable").and_then(Value::as_bool),
    })
}

/// Parse a whole file. `Err` (a poisoned file) means the selector has no receipts at all.
pub fn parse_file(text: &str) -> Result<Vec<Receipt>, String> {
    let mut out = Vec::new();
    let complete_len = text.rfind('\n').map_or(0, |i| i + 1);
    let (complete, tail) = text.split_at(complete_len);
    for line in complete.lines() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(line)?);
    }
    if !tail.trim().is_empty() {
        // A torn write in progress is skipped; a finished last line without its newline counts.
        if let Ok(r) = parse_line(tail) {
            out.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"commit":"f041cf57a9bab49e0091acb39a661c669447d54a","falsifiable":true,"platform":"linux-ci","ran_at":"2026-11-21T22:44:29.101736568Z","result":"green","test":"! grep -q redis pyproject.toml"}"#;

    #[test]
    fn a_line_round_trips_byte_for_byte() {
        let r = parse_line(LINE).expect("parses");
        assert_eq!(r.line(), format!("{LINE}\n"));
        let mut h = r.clone();
        h.falsifiable = None;
        assert!(!h.line().contains("falsifiable"));
    }

    #[test]
    fn one_bad_line_poisons_the_file_but_a_torn_tail_is_skipped() {
        let good = format!("{LINE}\n\n{LINE}\n");
        assert_eq!(parse_file(&good).expect("ok").len(), 2);
        let torn = format!("{LINE}\n{{\"commit\":\"f0");
        assert_eq!(parse_file(&torn).expect("torn tail skipped").len(), 1);
        let unterminated = format!("{LINE}\n{LINE}");
        assert_eq!(parse_file(&unterminated).expect("ok").len(), 2);
        let bad = format!("{LINE}\n{{\"commit\":\"x\"}}\n{LINE}\n");
        assert!(parse_file(&bad).is_err());
        let extra = LINE.replace("\"test\"", "\"zzz\":1,\"test\"");
        assert!(parse_line(&extra).is_err());
        let nonbool = LINE.replace("true", "\"yes\"");
        assert_eq!(parse_line(&nonbool).expect("ok").falsifiable, None);
        assert!(parse_line(&LINE.replace("green", "blue")).is_err());
    }
}
