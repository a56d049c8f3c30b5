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

/// The command that re-verifies decision `id` with the uncommitted changes under `pathspecs`
/// set aside (its tests must run against HEAD, not those changes) and put back staged as they
/// were. The stash is marked with the id and popped only when it is the one on top, so that
/// when there was nothing to set aside no other stash is taken.
pub fn reverify_set_aside(id: &str, pathspecs: &[impl AsRef<str>]) -> String {
    let specs: Vec<String> = pathspecs.iter().map(|p| word(p.as_ref())).collect();
    let mark = format!("evctl-reverify-{id}");
    format!(
        "git stash push -m {mark} -- {} && evctl reverify {id} && git stash list -1 --format=%s | grep -q {mark} && git stash pop --index",
        specs.join(" ")
    )
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

    #[test]
    fn the_set_aside_command_marks_its_stash_and_pops_only_that() {
        let c = super::reverify_set_aside("0123456789ab", &[":/db/a b.sql", ":/x"]);
        assert_eq!(
            c,
            "git stash push -m evctl-reverify-0123456789ab -- ':/db/a b.sql' :/x && evctl reverify 0123456789ab && git stash list -1 --format=%s | grep -q evctl-reverify-0123456789ab && git stash pop --index"
        );
    }
}
