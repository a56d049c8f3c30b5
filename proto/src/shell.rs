//! How a path or an argument is spelled as one `sh` word in a command evd or evctl tells the
//! user to run (`git stash push -- <paths> && evctl reverify <id> …`), so that copying it runs
//! exactly that. Pure text: it runs nothing.

/// `s` as one `sh` word: as it is when nothing in it is special to the shell, else in single
/// quotes (a quote inside written `'\''`).
pub fn word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-:+,=@%".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::word;

    #[test]
    fn plain_words_stay_and_the_rest_is_quoted_as_sh_reads_it() {
        assert_eq!(word(":/db/schema.sql"), ":/db/schema.sql");
        assert_eq!(word("a b.sql"), "'a b.sql'");
        assert_eq!(word("it's"), r"'it'\''s'");
        assert_eq!(word("$HOME"), "'$HOME'");
        assert_eq!(word(""), "''");
        assert_eq!(word("src/*.rs"), "'src/*.rs'");
    }
}
