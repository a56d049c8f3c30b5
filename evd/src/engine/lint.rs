//! The best-effort lexical lints over fixed word lists (R3 self-evolve subject, R5 forbidden
//! machine op). Lowercased plain substring search; a re-wording evades them.

pub const R3_WORDS: [&str; 6] = [
    "self-evolve",
    "self-improve",
    "self-grade",
    "self-optimize",
    "self-tune",
    "self-evaluate",
];

pub const R5_WORDS: [&str; 4] = ["auto-close", "auto-prune", "self-stop", "auto-inherit"];

fn hits(text: &str, words: &'static [&'static str]) -> Vec<&'static str> {
    let lower = text.to_lowercase();
    words
        .iter()
        .copied()
        .filter(|w| lower.contains(w))
        .collect()
}

pub fn r3_hits(text: &str) -> Vec<&'static str> {
    hits(text, &R3_WORDS)
}

pub fn r5_hits(text: &str) -> Vec<&'static str> {
    hits(text, &R5_WORDS)
}

/// The write-time R3 warning line.
pub fn r3_warning(word: &str) -> String {
    format!("warning: \"{word}\" should take a human subject, not the system (best-effort lint; a re-wording evades it)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_is_case_insensitive_substring() {
        assert_eq!(r3_hits("We Self-Improve daily"), vec!["self-improve"]);
        assert_eq!(
            r5_hits("auto-closed and self-stopped"),
            vec!["auto-close", "self-stop"]
        );
        assert!(r3_hits("improve ourselves").is_empty());
    }
}
