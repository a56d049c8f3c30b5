//! The decide stream: `evctl decide "<decision>" <flag> <value> …`, walked strictly left to
//! right as upstream does (commands.md §3.1–3.2). Every flag eats the next token as its value,
//! whatever it looks like; the first walk-time error wins.

use proto::json::q;
use proto::rpc::{DraftGround, DraftKind};
use proto::vocab;

/// What the walk produced.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Walk {
    pub decision: Option<String>,
    pub observe: Option<String>,
    pub blame: Option<String>,
    pub verified_at_sha: Option<String>,
    pub authority: Option<String>,
    pub jurisdiction: Option<String>,
    pub source_ref: Option<String>,
    pub from_git: Option<String>,
    pub grounds: Vec<DraftGround>,
}

/// The global flags, which a stream verb also accepts in any flag position of its stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Globals {
    pub color: Option<String>,
    pub plain: bool,
    pub json: bool,
    pub store: Option<String>,
}

/// Consume global flags at the front of `tokens`. Returns how many tokens were consumed, or a
/// usage error.
pub fn take_globals(tokens: &[String], g: &mut Globals) -> Result<usize, String> {
    let mut i = 0;
    while let Some(t) = tokens.get(i) {
        match t.as_str() {
            "--plain" | "-p" => {
                g.plain = true;
                i += 1;
            }
            "--json" => {
                g.json = true;
                i += 1;
            }
            "--color" | "--store" => {
                set_valued_global(g, t, tokens.get(i + 1))?;
                i += 2;
            }
            _ => break,
        }
    }
    Ok(i)
}

/// Set `--color WHEN` or `--store DIR` from the token after it, in clap's words when it is
/// missing or not a colour choice.
fn set_valued_global(g: &mut Globals, flag: &str, value: Option<&String>) -> Result<(), String> {
    let v = value
        .ok_or_else(|| format!("a value is required for '{flag} <VALUE>' but none was supplied"))?;
    if flag == "--color" {
        if !["auto", "always", "never"].contains(&v.as_str()) {
            return Err(format!(
                "invalid value '{v}' for '--color <WHEN>' [possible values: auto, always, never]"
            ));
        }
        g.color = Some(v.clone());
    } else {
        g.store = Some(v.clone());
    }
    Ok(())
}

/// Take the global flags (`--json`, `--plain`/`-p`, `--color WHEN`, `--store DIR`) and, when
/// `dry_run_ok`, decide's `--dry-run` out of a stream wherever they stand in flag position, and
/// return whether `--dry-run` was there plus the stream left for the walk.
///
/// Flag positions are counted as the walk counts them: any other token opens a pair and the
/// token after it is its value, whatever it looks like. So `--observe --store` observes the
/// text "--store", and a stream without these flags comes back unchanged.
pub fn lift_globals(
    stream: &[String],
    dry_run_ok: bool,
    g: &mut Globals,
) -> Result<(bool, Vec<String>), String> {
    let mut dry_run = false;
    let mut rest = Vec::with_capacity(stream.len());
    let mut i = 0;
    while let Some(t) = stream.get(i) {
        match t.as_str() {
            "--dry-run" if dry_run_ok => dry_run = true,
            "--json" => g.json = true,
            "--plain" | "-p" => g.plain = true,
            "--color" | "--store" => {
                set_valued_global(g, t, stream.get(i + 1))?;
                i += 2;
                continue;
            }
            _ => {
                rest.extend(stream[i..].iter().take(2).cloned());
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    Ok((dry_run, rest))
}

/// Split off the positional decision and the leading global flags; the rest is the stream.
pub fn split_positional(
    tokens: &[String],
    g: &mut Globals,
) -> Result<(Option<String>, Vec<String>), String> {
    let mut i = take_globals(tokens, g)?;
    if tokens.get(i).map(String::as_str) == Some("--") {
        i += 1;
    }
    let mut positional = None;
    if let Some(t) = tokens.get(i) {
        if !t.starts_with('-') {
            positional = Some(t.clone());
            i += 1;
            i += take_globals(&tokens[i..], g)?;
        }
    }
    Ok((positional, tokens[i..].to_vec()))
}

const GROUND_FLAGS: [&str; 6] = [
    "--revisit",
    "--assume-test",
    "--counter-test",
    "--on-platform",
    "--triggered-by",
    "--surface",
];

/// Walk a decide stream (after the positional, with [`lift_globals`] applied).
pub fn walk(decision: Option<String>, rest: &[String]) -> Result<Walk, String> {
    let mut w = Walk {
        decision,
        ..Walk::default()
    };
    let mut i = 0;
    while i < rest.len() {
        let flag = rest[i].as_str();
        let known = matches!(
            flag,
            "--observe"
                | "--blame"
                | "--verified-at-sha"
                | "--authority"
                | "--jurisdiction"
                | "--source-ref"
                | "--from-git"
                | "--assume"
                | "--reject"
        ) || GROUND_FLAGS.contains(&flag);
        if !known {
            return Err(format!("decide: unknown flag {flag}"));
        }
        let value = rest
            .get(i + 1)
            .cloned()
            .ok_or_else(|| format!("{flag} requires a value"))?;
        i += 2;
        match flag {
            "--observe" => w.observe = Some(value),
            "--blame" => w.blame = Some(value),
            "--verified-at-sha" => w.verified_at_sha = Some(value),
            "--authority" => {
                vocab::check_authority(&value)?;
                w.authority = Some(value);
            }
            "--jurisdiction" => {
                vocab::check_jurisdiction(&value)?;
                w.jurisdiction = Some(value);
            }
            "--source-ref" => {
                if value.is_empty() {
                    return Err("--source-ref needs a non-empty value".into());
                }
                w.source_ref = Some(value);
            }
            "--from-git" => {
                if value.starts_with('-') {
                    return Err(format!(
                        "--from-git takes a commit-ish, not a flag (got {})",
                        q(&value)
                    ));
                }
                w.from_git = Some(value);
            }
            "--assume" => w.grounds.push(DraftGround {
                kind: DraftKind::Chosen,
                claim: Some(value),
                ..DraftGround::default()
            }),
            "--reject" => {
                let (option, why) = value
                    .split_once(':')
                    .ok_or_else(|| "--reject expects \"<option>: <why>\"".to_string())?;
                let (option, why) = (option.trim(), why.trim());
                if option.is_empty() || why.is_empty() {
                    return Err("--reject needs non-empty <option> and <why>".into());
                }
                w.grounds.push(DraftGround {
                    kind: DraftKind::Rejected,
                    option: Some(option.into()),
                    why: Some(why.into()),
                    ..DraftGround::default()
                });
            }
            ground_flag => {
                let g = w.grounds.last_mut().ok_or_else(|| {
                    format!("{ground_flag} has no preceding --assume/--reject ground")
                })?;
                match ground_flag {
                    "--revisit" => g.revisit = Some(value),
                    "--assume-test" => g.test_ref = Some(value),
                    "--counter-test" => g.counter_test = Some(value),
                    "--on-platform" => g.platforms.push(value),
                    "--triggered-by" => g.triggered_by.push(value),
                    "--surface" => g.surfaces.push(value),
                    other => return Err(format!("decide: unknown flag {other}")),
                }
            }
        }
    }
    Ok(w)
}

/// The re-tag stream of `supersede <id>`: flat `<flag> <value>` pairs of `--authority`,
/// `--jurisdiction`, `--provenance` and `--blame` (a repeat wins). Vocabulary is checked by evd,
/// after the store and target, as upstream orders it.
pub fn retag_stream(stream: &[String]) -> Result<(proto::rpc::RetagTags, Option<String>), String> {
    let mut tags = proto::rpc::RetagTags::default();
    let mut blame = None;
    let mut i = 0;
    while i < stream.len() {
        let flag = stream[i].as_str();
        let slot = match flag {
            "--authority" => &mut tags.authority,
            "--jurisdiction" => &mut tags.jurisdiction,
            "--provenance" => &mut tags.provenance,
            "--blame" => &mut blame,
            _ => {
                return Err(format!(
                    "evctl supersede: unexpected argument {} — re-tag accepts --authority / --jurisdiction / --provenance / --blame; pass a new ruling text to overturn",
                    q(flag)
                ))
            }
        };
        let value = stream
            .get(i + 1)
            .ok_or_else(|| format!("{flag} needs a value"))?;
        *slot = Some(value.clone());
        i += 2;
    }
    Ok((tags, blame))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// Lift as decide does, then walk.
    fn decide_walk(v: &[&str]) -> Result<(bool, Walk), String> {
        let mut g = Globals::default();
        let (dry_run, rest) = lift_globals(&s(v), true, &mut g)?;
        Ok((dry_run, walk(Some("d".into()), &rest)?))
    }

    #[test]
    fn every_flag_eats_the_next_token_and_dry_run_lifting_is_pair_aware() {
        let (dry_run, w) = decide_walk(&[
            "--observe",
            "--dry-run",
            "--assume",
            "--color",
            "--on-platform",
            "p",
        ])
        .expect("walks");
        assert!(!dry_run);
        assert_eq!(w.observe.as_deref(), Some("--dry-run"));
        assert_eq!(w.grounds[0].claim.as_deref(), Some("--color"));
        assert_eq!(w.grounds[0].platforms, vec!["p"]);
        let (dry_run, _) = decide_walk(&["--dry-run", "--assume", "a"]).expect("walks");
        assert!(dry_run);
    }

    #[test]
    fn globals_are_lifted_from_any_flag_position_and_never_from_a_value() {
        let mut g = Globals::default();
        let stream = s(&[
            "--assume",
            "a",
            "--store",
            "/s",
            "--counter-test",
            "--json",
            "-p",
            "--color",
            "never",
            "--observe",
            "--store",
            "--json",
        ]);
        let (dry_run, rest) = lift_globals(&stream, false, &mut g).expect("lifts");
        assert!(!dry_run);
        assert_eq!(g.store.as_deref(), Some("/s"));
        assert_eq!(g.color.as_deref(), Some("never"));
        assert!(g.plain && g.json);
        assert_eq!(
            rest,
            s(&[
                "--assume",
                "a",
                "--counter-test",
                "--json",
                "--observe",
                "--store"
            ])
        );
        // Without --dry-run allowed, it is one more flag opening a pair.
        let (dry_run, rest) =
            lift_globals(&s(&["--dry-run", "--json"]), false, &mut g).expect("lifts");
        assert!(!dry_run);
        assert_eq!(rest, s(&["--dry-run", "--json"]));
        // A stream without globals comes back as it was.
        let plain = s(&["--observe", "o", "--reject", "r: w", "--surface", "s"]);
        assert_eq!(
            lift_globals(&plain, true, &mut Globals::default()).expect("lifts"),
            (false, plain.clone())
        );
    }

    #[test]
    fn a_lifted_global_is_checked_as_clap_checks_it() {
        let mut g = Globals::default();
        assert_eq!(
            lift_globals(&s(&["--assume", "a", "--store"]), true, &mut g),
            Err("a value is required for '--store <VALUE>' but none was supplied".into())
        );
        assert_eq!(
            lift_globals(&s(&["--color", "blue"]), true, &mut g),
            Err(
                "invalid value 'blue' for '--color <WHEN>' [possible values: auto, always, never]"
                    .into()
            )
        );
    }

    #[test]
    fn walk_errors_use_upstream_wording() {
        let e = |v: &[&str]| decide_walk(v).expect_err("refused");
        assert_eq!(e(&["--revisit"]), "--revisit requires a value");
        assert_eq!(e(&["--bogus", "x"]), "decide: unknown flag --bogus");
        assert_eq!(
            e(&["--provenance", "x"]),
            "decide: unknown flag --provenance"
        );
        assert_eq!(
            e(&["--surface", "x"]),
            "--surface has no preceding --assume/--reject ground"
        );
        assert_eq!(
            e(&["--reject", "nocolon"]),
            "--reject expects \"<option>: <why>\""
        );
        assert_eq!(
            e(&["--reject", " : y"]),
            "--reject needs non-empty <option> and <why>"
        );
        assert_eq!(
            e(&["--jurisdiction", "E"]),
            "jurisdiction must be one of A, B, C, D (got \"E\")"
        );
        assert_eq!(
            e(&["--source-ref", ""]),
            "--source-ref needs a non-empty value"
        );
        assert_eq!(
            e(&["--from-git", "-x"]),
            "--from-git takes a commit-ish, not a flag (got \"-x\")"
        );
    }

    #[test]
    fn globals_are_read_before_and_right_after_the_positional() {
        let mut g = Globals::default();
        let (pos, stream) = split_positional(
            &s(&["--plain", "x", "--json", "--assume", "--plain"]),
            &mut g,
        )
        .expect("splits");
        assert_eq!(pos.as_deref(), Some("x"));
        assert!(g.plain && g.json);
        assert_eq!(stream, s(&["--assume", "--plain"]));
        let mut g = Globals::default();
        let (pos, stream) =
            split_positional(&s(&["--", "-x", "--assume", "a"]), &mut g).expect("splits");
        assert_eq!(pos, None);
        assert_eq!(stream, s(&["-x", "--assume", "a"]));
    }
}
