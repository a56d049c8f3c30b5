//! What `.evolving/HEAD` may hold, and the one rule by which two HEADs merge: the rule evctl's
//! git merge driver applies mid-merge and `evctl doctor` applies to a HEAD a merge left
//! conflicted. Pure text in, ids out; it must not read a store (callers say which ticks exist).

/// The merged HEAD of two sides that each name one tick, given their common ancestor's (when
/// known). Deterministic, and the same in either merge order:
///
/// - both sides name the same tick, or one side did not move from the base: the other side;
/// - both moved: the greater of the two ids (byte order). The other tip stays a live decision
///   (a fork, which `log` shows and `verify` accepts).
pub fn merged<'a>(base: Option<&str>, ours: &'a str, theirs: &'a str) -> &'a str {
    if ours == theirs || base == Some(theirs) {
        return ours;
    }
    if base == Some(ours) {
        return theirs;
    }
    ours.max(theirs)
}

/// The sides of a HEAD that git left with conflict markers: what each side's lines named
/// (trimmed, empty lines dropped), and the base's when the conflict style shows it (`diff3`,
/// `zdiff3`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Conflict {
    pub ours: Vec<String>,
    pub base: Option<Vec<String>>,
    pub theirs: Vec<String>,
}

impl Conflict {
    /// The one id a side names, when it names exactly one tick id.
    pub fn one(side: &[String]) -> Option<&str> {
        match side {
            [only] if crate::vocab::is_tick_id(only) => Some(only),
            _ => None,
        }
    }
}

fn marker(line: &str, c: char) -> bool {
    line.len() >= 7 && line.chars().take(7).all(|x| x == c) && !line[7..].starts_with(c)
}

/// Whether `text` carries git's conflict markers (a line opening with seven `<`, or seven `>`).
pub fn has_conflict_markers(text: &str) -> bool {
    text.lines().any(|l| marker(l, '<') || marker(l, '>'))
}

/// The sides of a conflicted HEAD, or `None` when `text` holds no complete conflict (no
/// markers, or markers out of order). Lines outside the conflict count for both sides.
pub fn conflict(text: &str) -> Option<Conflict> {
    #[derive(PartialEq)]
    enum In {
        Outside,
        Ours,
        Base,
        Theirs,
    }
    let mut at = In::Outside;
    let mut c = Conflict::default();
    let mut seen = false;
    for line in text.lines() {
        let t = line.trim();
        if marker(line, '<') {
            if at != In::Outside {
                return None;
            }
            at = In::Ours;
            seen = true;
        } else if marker(line, '|') && at == In::Ours {
            at = In::Base;
            c.base = Some(Vec::new());
        } else if line.trim_end() == "=======" && matches!(at, In::Ours | In::Base) {
            at = In::Theirs;
        } else if marker(line, '>') {
            if at != In::Theirs {
                return None;
            }
            at = In::Outside;
        } else if !t.is_empty() {
            match at {
                In::Outside => {
                    c.ours.push(t.to_string());
                    c.theirs.push(t.to_string());
                }
                In::Ours => c.ours.push(t.to_string()),
                In::Base => c.base.get_or_insert_with(Vec::new).push(t.to_string()),
                In::Theirs => c.theirs.push(t.to_string()),
            }
        }
    }
    (seen && at == In::Outside).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0a1b2c3d4e5f";
    const B: &str = "9f8e7d6c5b4a";
    const O: &str = "111111111111";

    #[test]
    fn the_rule_is_the_same_in_either_order() {
        assert_eq!(merged(Some(O), A, B), B);
        assert_eq!(merged(Some(O), B, A), B);
        assert_eq!(merged(Some(O), O, A), A);
        assert_eq!(merged(Some(O), A, O), A);
        assert_eq!(merged(None, A, A), A);
        assert_eq!(merged(None, A, B), merged(None, B, A));
    }

    #[test]
    fn a_merge_conflict_reads_as_its_sides() {
        let plain = format!("<<<<<<< HEAD\n{A}\n=======\n{B}\n>>>>>>> topic\n");
        assert!(has_conflict_markers(&plain));
        let c = conflict(&plain).expect("conflict");
        assert_eq!(Conflict::one(&c.ours), Some(A));
        assert_eq!(Conflict::one(&c.theirs), Some(B));
        assert_eq!(c.base, None);
        let diff3 = format!("<<<<<<< ours\n{A}\n||||||| base\n{O}\n=======\n{B}\n>>>>>>> theirs\n");
        let c = conflict(&diff3).expect("conflict");
        assert_eq!(c.base.as_deref().and_then(Conflict::one), Some(O));
        // A rebase names the commit after the markers; an empty side is a store's first tick.
        let rebase = format!("<<<<<<< HEAD\n=======\n{B}\n>>>>>>> 3f2a9c1 (decide)\n");
        let c = conflict(&rebase).expect("conflict");
        assert!(c.ours.is_empty());
        assert_eq!(Conflict::one(&c.theirs), Some(B));
    }

    #[test]
    fn an_id_or_garbage_is_no_conflict() {
        assert!(!has_conflict_markers(A));
        assert_eq!(conflict(A), None);
        assert_eq!(conflict("<<<<<<< HEAD\nx\n"), None);
        assert!(!has_conflict_markers("<<<<<<<< eight\n"));
        assert_eq!(conflict(&format!("=======\n{A}\n>>>>>>> x\n")), None);
    }
}
