//! The closed vocabularies of the ev model and their refusal texts.

pub const USER_RULED: &str = "user-ruled";
pub const AGENT_DISPOSABLE: &str = "agent-disposable";
pub const IMPORTED: &str = "imported";
pub const AGENT_PROPOSED: &str = "agent-proposed";
pub const HUMAN_NOW: &str = "human-now";

pub const AUTHORITIES: [&str; 2] = [USER_RULED, AGENT_DISPOSABLE];
pub const JURISDICTIONS: [&str; 4] = ["A", "B", "C", "D"];
pub const PROVENANCES: [&str; 3] = [IMPORTED, AGENT_PROPOSED, HUMAN_NOW];

pub fn check_authority(v: &str) -> Result<(), String> {
    if AUTHORITIES.contains(&v) {
        Ok(())
    } else {
        Err("authority must be user-ruled or agent-disposable".into())
    }
}

pub fn check_jurisdiction(v: &str) -> Result<(), String> {
    if JURISDICTIONS.contains(&v) {
        Ok(())
    } else {
        Err(format!(
            "jurisdiction must be one of A, B, C, D (got {})",
            crate::json::q(v)
        ))
    }
}

pub fn check_provenance(v: &str) -> Result<(), String> {
    if PROVENANCES.contains(&v) {
        Ok(())
    } else {
        Err(format!(
            "provenance must be one of imported, agent-proposed, human-now (got {})",
            crate::json::q(v)
        ))
    }
}

/// `C` and `D` are detect-only: they may surface but never gate.
pub fn is_detect_only(jurisdiction: Option<&str>) -> bool {
    matches!(jurisdiction, Some("C") | Some("D"))
}

/// Exactly 12 characters of `0-9a-f`. Anything else is "not an id" and is never joined to a path.
pub fn is_tick_id(s: &str) -> bool {
    s.len() == 12
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub fn check_edge_id(field: &str, v: &str) -> Result<(), String> {
    if is_tick_id(v) {
        Ok(())
    } else {
        Err(format!(
            "{field} must be a 12-char lowercase-hex tick id (got {})",
            crate::json::q(v)
        ))
    }
}

/// A round/issue token: `#<digits>`, `R<digits>` or `r<digits>`, at least one digit, whole token.
pub fn is_round_or_issue_token(tok: &str) -> bool {
    let rest = tok
        .strip_prefix('#')
        .or_else(|| tok.strip_prefix('R'))
        .or_else(|| tok.strip_prefix('r'));
    rest.is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_exactly_twelve_lowercase_hex() {
        assert!(is_tick_id("e2b337f53a1f"));
        assert!(!is_tick_id("E2B337F53A1F"));
        assert!(!is_tick_id("../../etc/pa"));
        assert!(!is_tick_id("e2b337f53a1"));
        assert!(!is_tick_id("../../etc/passwd"));
    }

    #[test]
    fn round_tokens() {
        assert!(is_round_or_issue_token("#1194"));
        assert!(is_round_or_issue_token("R2289"));
        assert!(is_round_or_issue_token("r7"));
        assert!(!is_round_or_issue_token("#1194,"));
        assert!(!is_round_or_issue_token("R"));
        assert!(!is_round_or_issue_token("X12"));
    }
}
