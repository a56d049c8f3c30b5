//! Evidence citations inside a ground's text (seed 003, rule 2): `[evidence:<path>:<b0>-<b1>:<sha256>]`
//! names a file of the repository (relative to the directory holding `.evolving/`), a byte span
//! `b0..b1` of it, and the sha256 of exactly those bytes. The marker is part of the claim, so it
//! is inside the decision's content-addressed id; upstream ev reads it as plain text.
//!
//! A legacy or partial marker (`[evidence:X]`, a missing part, a bad hash) is not a citation:
//! [`citations`] refuses it, naming what is wrong. Pure: the files are read elsewhere.

/// Where every marker starts.
pub const OPEN: &str = "[evidence:";

/// One citation: a span of a file and the hash its bytes had when cited.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Citation {
    pub path: String,
    pub start: u64,
    pub end: u64,
    pub sha256: String,
}

impl Citation {
    /// The marker as it is written in a claim.
    pub fn marker(&self) -> String {
        format!(
            "{OPEN}{}:{}-{}:{}]",
            self.path, self.start, self.end, self.sha256
        )
    }
}

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The citation of `bytes[start..end]` of `path` (the caller read the file).
pub fn cite(path: &str, start: u64, end: u64, span: &[u8]) -> Citation {
    Citation {
        path: path.to_string(),
        start,
        end,
        sha256: sha256_hex(span),
    }
}

/// Whether `path` may be cited: relative, `/`-separated, inside the repository.
pub fn citable_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    if path.starts_with('/') {
        return Err(format!(
            "{path:?} is absolute; cite a path relative to the repository"
        ));
    }
    if path.contains('\0') || path.contains('\\') {
        return Err(format!("{path:?} holds a character a path here may not"));
    }
    if path
        .split('/')
        .any(|c| c == ".." || c == "." || c.is_empty())
    {
        return Err(format!(
            "{path:?} must name a file inside the repository (no ., .. or empty parts)"
        ));
    }
    Ok(())
}

fn one(inner: &str) -> Result<Citation, String> {
    let bad = |why: &str| {
        Err(format!(
            "{OPEN}{inner}] is not a citation ({why}); a citation reads [evidence:<path>:<b0>-<b1>:<sha256>] — `evctl cite` writes one"
        ))
    };
    let Some((rest, sha)) = inner.rsplit_once(':') else {
        return bad("no span and no hash: a legacy or partial marker");
    };
    let Some((path, span)) = rest.rsplit_once(':') else {
        return bad("no span");
    };
    if sha.len() != 64
        || !sha
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return bad("the hash is not 64 lowercase hex digits");
    }
    let Some((a, b)) = span.split_once('-') else {
        return bad("the span is not <b0>-<b1>");
    };
    let num = |s: &str| {
        (!s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let (Some(start), Some(end)) = (num(a), num(b)) else {
        return bad("the span is not <b0>-<b1> in bytes");
    };
    if start >= end {
        return bad("the span is empty or backwards");
    }
    if let Err(e) = citable_path(path) {
        return bad(&e);
    }
    Ok(Citation {
        path: path.to_string(),
        start,
        end,
        sha256: sha.to_string(),
    })
}

/// Every citation in `text`, in order; an error names the first marker that is not one.
pub fn citations(text: &str) -> Result<Vec<Citation>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let Some(close) = after.find(']') else {
            let shown: String = after.chars().take(40).collect();
            return Err(format!(
                "{OPEN}{shown}… is a partial citation marker (no closing `]`); a citation reads [evidence:<path>:<b0>-<b1>:<sha256>]"
            ));
        };
        out.push(one(&after[..close])?);
        rest = &after[close + 1..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_reads_back_and_partial_or_legacy_ones_are_refused() {
        let c = cite("docs/design.md", 10, 42, b"span bytes");
        let text = format!("queues stay shallow {} and {}", c.marker(), c.marker());
        assert_eq!(citations(&text), Ok(vec![c.clone(), c.clone()]));
        assert_eq!(citations("no markers at all"), Ok(vec![]));
        let sha = &c.sha256;
        for bad in [
            "see [evidence:X]".to_string(),
            "see [evidence:docs/a.md]".to_string(),
            format!("[evidence:docs/a.md:1-2:{}]", &sha[..63]),
            format!("[evidence:docs/a.md:1-2:{}]", sha.to_uppercase()),
            format!("[evidence:docs/a.md:2-2:{sha}]"),
            format!("[evidence:docs/a.md:3-2:{sha}]"),
            format!("[evidence:docs/a.md:x-2:{sha}]"),
            format!("[evidence:/etc/passwd:1-2:{sha}]"),
            format!("[evidence:../outside:1-2:{sha}]"),
            format!("[evidence:a//b:1-2:{sha}]"),
            format!("[evidence::1-2:{sha}]"),
            "unclosed [evidence:docs/a.md:1-2".to_string(),
        ] {
            assert!(citations(&bad).is_err(), "refused: {bad}");
        }
        // A path may hold a colon: the span and hash are read from the right.
        let odd = cite("a:b.txt", 0, 1, b"x");
        assert_eq!(citations(&odd.marker()), Ok(vec![odd]));
    }
}
