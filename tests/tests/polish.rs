//! Everyday polish, through the real evctl: shell completions and man pages generated from the
//! grammar (decide's hand-read stream included), messages that name `evctl`, global flags
//! anywhere on a stream verb's line, and help whose usage lines show the real forms.

use std::path::PathBuf;
use std::process::Command;

use evd_e2e::{as_said_by_evctl, bin, target_dir, Repo, Run, World};

const SHA: &str = "d308afac1b2c3d4e5f60718293a4b5c6d7e8f901";

/// The flags decide, propose and supersede read by hand (issue 9's list), with the verbs that
/// take each: a spec written out here, independently of evctl's own table.
const STREAM_FLAGS: [(&str, &[&str]); 17] = [
    ("--observe", &["decide", "propose", "supersede"]),
    ("--assume", &["decide", "propose", "supersede"]),
    ("--reject", &["decide", "propose", "supersede"]),
    ("--revisit", &["decide", "supersede"]),
    ("--assume-test", &["decide", "supersede"]),
    ("--counter-test", &["decide", "supersede"]),
    ("--on-platform", &["decide", "supersede"]),
    ("--triggered-by", &["decide", "supersede"]),
    ("--surface", &["decide", "supersede"]),
    ("--blame", &["decide", "propose", "supersede"]),
    ("--authority", &["decide", "supersede"]),
    ("--jurisdiction", &["decide", "propose", "supersede"]),
    ("--source-ref", &["decide", "propose", "supersede"]),
    ("--verified-at-sha", &["decide", "supersede"]),
    ("--from-git", &["decide", "propose", "supersede"]),
    ("--dry-run", &["decide"]),
    ("--provenance", &["supersede"]),
];

const GLOBALS: [&str; 4] = ["--color", "--plain", "--json", "--store"];

/// evctl for what needs no store and no daemon: help, completions, man pages.
fn evctl(args: &[&str]) -> Run {
    let out = Command::new(bin("evctl"))
        .args(args)
        .env("EVD_NO_DAEMON", "1")
        .current_dir("/")
        .output()
        .expect("run evctl");
    Run::from(out)
}

/// Every verb `evctl --help` lists (clap's own `help` aside).
fn verbs() -> Vec<String> {
    let help = evctl(&["--help"]).ok().stdout;
    let list: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| *v != "help")
        .map(str::to_string)
        .collect();
    for v in [
        "init",
        "decide",
        "propose",
        "supersede",
        "completions",
        "man",
    ] {
        assert!(list.iter().any(|x| x == v), "{v} in {list:?}");
    }
    list
}

/// The flags `evctl <verb> --help` defines: its option lines, which clap indents, not its
/// prose, which starts at the margin.
fn flags_of(verb: &str) -> Vec<String> {
    let help = evctl(&[verb, "--help"]).ok().stdout;
    help.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("  ")?.trim_start();
            let l = match l.strip_prefix('-') {
                Some(rest) if rest.len() > 2 && rest.as_bytes()[1] == b',' => rest[2..].trim(),
                _ => l,
            };
            let name = l.strip_prefix("--")?;
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            (!name.is_empty()).then(|| format!("--{name}"))
        })
        .collect()
}

/// The stream flags the spec gives `verb`.
fn stream_flags_of(verb: &str) -> Vec<&'static str> {
    STREAM_FLAGS
        .iter()
        .filter(|(_, verbs)| verbs.contains(&verb))
        .map(|(f, _)| *f)
        .collect()
}

/// `PATH` with the built binaries first.
fn path_with_bins() -> String {
    format!(
        "{}:{}",
        target_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn bash(script: &str) -> Run {
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("PATH", path_with_bins())
        .env("EVD_NO_DAEMON", "1")
        .output()
        .expect("bash");
    Run::from(out)
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

#[test]
fn bash_completion_offers_every_verb_and_every_flag_and_loads() {
    let script = evctl(&["completions", "bash"]).ok().stdout;
    for verb in verbs() {
        let section = format!("evctl__subcmd__{})", verb.replace('-', "__"));
        let at = script
            .find(&section)
            .unwrap_or_else(|| panic!("no completion section for {verb}"));
        let opts = script[at..]
            .lines()
            .find_map(|l| l.trim().strip_prefix("opts=\""))
            .expect("the section's opts");
        let offered: Vec<&str> = opts.trim_end_matches('"').split_whitespace().collect();
        let mut want = flags_of(&verb);
        want.extend(stream_flags_of(&verb).iter().map(|f| f.to_string()));
        want.extend(GLOBALS.iter().map(|f| f.to_string()));
        for flag in &want {
            assert!(offered.contains(&flag.as_str()), "{verb}: {flag} in {opts}");
        }
    }
    let top = script
        .lines()
        .skip_while(|l| !l.contains("evctl)"))
        .find_map(|l| l.trim().strip_prefix("opts=\""))
        .expect("top-level opts");
    for verb in verbs() {
        assert!(top.split_whitespace().any(|w| w == verb), "{verb} in {top}");
    }

    // It loads, and it completes what clap never parses: decide's stream and its values.
    let r = bash("source <(evctl completions bash) && complete -p evctl");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("-F _evctl evctl"), "{r:?}");
    let complete = |words: &[&str]| -> Vec<String> {
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let cword = words.len() - 1;
        let cur = words[cword];
        let prev = words[cword - 1];
        let r = bash(&format!(
            "source <(evctl completions bash)\nCOMP_WORDS=({})\nCOMP_CWORD={cword}\n\
             _evctl evctl '{cur}' '{prev}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
            quoted.join(" ")
        ));
        assert_eq!(r.code, 0, "{r:?}");
        r.stdout.lines().map(str::to_string).collect()
    };
    assert_eq!(complete(&["evctl", "dec"]), ["decide"]);
    assert_eq!(
        complete(&["evctl", "decide", "x", "--assume", "a", "--coun"]),
        ["--counter-test"]
    );
    assert_eq!(
        complete(&["evctl", "decide", "x", "--authority", ""]),
        ["user-ruled", "agent-disposable"]
    );
    assert_eq!(
        complete(&["evctl", "supersede", "0123456789ab", "--prov"]),
        ["--provenance"]
    );
    assert_eq!(complete(&["evctl", "completions", "fi"]), ["fish"]);
}

#[test]
fn zsh_and_fish_completions_name_every_verb_and_stream_flag() {
    let verbs = verbs();
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = evctl(&["completions", shell]).ok().stdout;
        assert!(!script.trim().is_empty(), "{shell}");
        for verb in &verbs {
            assert!(script.contains(verb.as_str()), "{shell}: {verb}");
        }
        for (flag, _) in STREAM_FLAGS {
            let bare = flag.trim_start_matches('-');
            assert!(script.contains(bare), "{shell}: {flag}");
        }
    }
    // Syntax, where the shell is here to check it.
    for (shell, check) in [("fish", "fish -n"), ("zsh", "zsh -n")] {
        if !on_path(shell) {
            continue;
        }
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join(format!("evctl.{shell}"));
        std::fs::write(&file, evctl(&["completions", shell]).ok().stdout).expect("write");
        let r = bash(&format!("{check} {}", file.display()));
        assert_eq!(r.code, 0, "{shell}: {r:?}");
    }
    let r = evctl(&["completions", "tcsh"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("possible values"), "{r:?}");
}

#[test]
fn man_prints_evctl_1_and_writes_one_page_per_verb() {
    let page = evctl(&["man"]).ok().stdout;
    assert!(page.lines().any(|l| l.starts_with(".TH evctl 1")), "{page}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH DESCRIPTION", ".SH OPTIONS"] {
        assert!(page.contains(section), "{section}");
    }
    for verb in verbs() {
        assert!(
            page.contains(&format!("evctl\\-{verb}(1)")),
            "evctl(1) lists {verb}"
        );
    }

    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("share/man/man1");
    let r = evctl(&["man", "--dir", out.to_str().expect("utf-8 path")]).ok();
    let verbs = verbs();
    let mut want = vec![out.join("evctl.1")];
    want.extend(verbs.iter().map(|v| out.join(format!("evctl-{v}.1"))));
    let mut listed: Vec<PathBuf> = r.stdout.lines().map(PathBuf::from).collect();
    let mut written: Vec<PathBuf> = std::fs::read_dir(&out)
        .expect("the directory was made")
        .flatten()
        .map(|e| e.path())
        .collect();
    listed.sort();
    written.sort();
    assert_eq!(listed, written, "each page written is named");
    for page in &want {
        assert!(written.contains(page), "{} was written", page.display());
    }

    for verb in &verbs {
        let path = out.join(format!("evctl-{verb}.1"));
        let roff = std::fs::read_to_string(&path).expect("page");
        assert!(
            roff.lines()
                .any(|l| l.starts_with(&format!(".TH evctl-{verb} 1"))),
            "{verb}: {roff}"
        );
        assert!(roff.contains(".SH SYNOPSIS"), "{verb}");
        for flag in stream_flags_of(verb) {
            assert!(roff.contains(&flag.replace('-', "\\-")), "{verb}: {flag}");
        }
        if !on_path("man") {
            continue;
        }
        let shown = Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANWIDTH", "120")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("LC_ALL", "C")
            .output()
            .expect("man");
        assert!(shown.status.success(), "man -l {verb}: {shown:?}");
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(text.contains(&format!("evctl-{verb}")), "{verb}: {text}");
        for flag in stream_flags_of(verb) {
            assert!(text.contains(flag), "{verb} renders {flag}: {text}");
        }
    }
}

#[test]
fn stream_verbs_show_their_real_usage_and_list_their_stream() {
    for verb in ["decide", "propose", "supersede"] {
        for args in [vec![verb, "--help"], vec![verb, "-h"], vec!["help", verb]] {
            let help = evctl(&args).ok().stdout;
            let usage: Vec<&str> = help
                .lines()
                .skip_while(|l| !l.starts_with("Usage: "))
                .take_while(|l| !l.trim().is_empty())
                .collect();
            assert!(
                usage
                    .first()
                    .is_some_and(|l| l.starts_with(&format!("Usage: evctl {verb} "))),
                "{args:?}: {help}"
            );
            for noise in GLOBALS.iter().chain(&["[OPTIONS]"]) {
                assert!(
                    !usage.iter().any(|l| l.contains(noise)),
                    "{args:?} usage shows {noise}: {usage:?}"
                );
            }
            let defined = flags_of(verb);
            for flag in stream_flags_of(verb) {
                assert!(defined.iter().any(|f| f == flag), "{verb} --help: {flag}");
            }
            for (flag, takers) in STREAM_FLAGS {
                if !takers.contains(&verb) {
                    assert!(!defined.iter().any(|f| f == flag), "{verb}: {flag}");
                }
            }
        }
    }
    let propose = evctl(&["propose", "--help"]).ok().stdout;
    let prose = propose.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        prose.contains(
            "A human raises the proposal to user-ruled with `evctl ratify <id> --blame <who>`"
        ),
        "{propose}"
    );
    assert!(
        prose.contains("a check binds later with `evctl guard`"),
        "{propose}"
    );
    // The usage error of a stream verb shows the same usage.
    let r = evctl(&["supersede"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("Usage: evctl supersede <ID> "), "{r:?}");
}

/// Nothing in `text` names upstream's program where evctl's is meant.
fn names_evctl(text: &str) -> bool {
    as_said_by_evctl(text) == text
}

#[test]
fn hints_and_refusals_name_evctl() {
    let w = World::new();
    let repo = Repo::new();
    let nowhere = tempfile::tempdir().expect("tmp");
    for env in [&[][..], &[("EVD_NO_DAEMON", "1")]] {
        let r = w.evctl_env(nowhere.path(), env, &["list"]);
        assert_eq!(
            (r.code, r.stderr.as_str()),
            (
                1,
                "error: no .evolving/ store here — run `evctl init` first\n"
            ),
            "{env:?}"
        );
    }
    w.evctl(repo.path(), &["init"]).ok();
    let genesis = w
        .evctl(
            repo.path(),
            &[
                "decide",
                "freeze the schema",
                "--assume",
                "a frozen schema is cheaper",
                "--assume-test",
                "true",
                "--counter-test",
                "false",
                "--on-platform",
                "linux-ci",
                "--triggered-by",
                "schema.sql",
                "--surface",
                "schema",
                "--authority",
                "user-ruled",
                "--verified-at-sha",
                SHA,
                "--blame",
                "Wang Yu",
            ],
        )
        .ok();
    let id = genesis
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("id")
        .to_string();
    w.evctl(
        repo.path(),
        &[
            "decide",
            "keep one region",
            "--authority",
            "user-ruled",
            "--blame",
            "Wang Yu",
        ],
    )
    .ok();
    w.evctl(
        repo.path(),
        &["propose", "shard the queue", "--assume", "load doubled"],
    )
    .ok();

    let refused = |args: &[&str], want: &str| {
        let r = w.evctl(repo.path(), args);
        assert_eq!(r.code, 1, "{args:?}: {r:?}");
        assert_eq!(r.stderr, format!("error: {want}\n"), "{args:?}");
    };
    refused(
        &["ratify", &id, "--blame", "Wang Yu"],
        &format!("evctl ratify only ratifies an agent proposal; tick {id} is human-now (nothing to ratify)"),
    );
    refused(
        &["supersede", &id, "--blame", "b"],
        "evctl supersede (re-tag) needs at least one of --authority / --jurisdiction / --provenance — or pass a new ruling text to overturn",
    );
    refused(
        &["supersede", &id, "thaw it", "--observe", "o"],
        "evctl supersede <id> <new ruling> needs at least one --assume <why the prior ruling no longer holds>",
    );
    refused(
        &["supersede", &id, "--bogus", "x"],
        "evctl supersede: unexpected argument \"--bogus\" — re-tag accepts --authority / --jurisdiction / --provenance / --blame; pass a new ruling text to overturn",
    );
    refused(
        &["propose", "x", "--assume", "a", "--assume-test", "t"],
        "evctl propose records an UNBOUND proposal — --assume-test is not allowed here; a check + authority attach when a human runs `evctl ratify`",
    );
    refused(
        &["migrate"],
        "evctl migrate needs at least one --source <kind>:<path> (or --reconcile / --bind-check)",
    );

    // Hints on answers that succeed, plain and rich.
    let check = w.evctl(repo.path(), &["check"]);
    assert!(
        check
            .stdout
            .contains("note: run `evctl check --run` to re-run"),
        "{check:?}"
    );
    let brief = w.evctl(repo.path(), &["brief", "--limit", "1"]).ok();
    assert!(brief.stdout.contains("— `evctl list` for all"), "{brief:?}");
    let pending = w.evctl(repo.path(), &["--color", "always", "pending"]).ok();
    assert!(
        pending.stdout.contains("evctl ratify <id> --blame <you>"),
        "{pending:?}"
    );
    let rich = w.evctl(repo.path(), &["--color", "always", "check"]);
    assert!(
        rich.stdout
            .contains("tip: evctl why <selector> · evctl reopen <id>"),
        "{rich:?}"
    );
    for r in [&check, &brief, &pending, &rich] {
        assert!(names_evctl(&r.stdout) && names_evctl(&r.stderr), "{r:?}");
    }

    // The in-process engine says the same.
    let solo = Repo::new();
    let env = [("EVD_NO_DAEMON", "1")];
    w.evctl_env(solo.path(), &env, &["init"]).ok();
    w.evctl_env(
        solo.path(),
        &env,
        &["decide", "x", "--assume", "a", "--blame", "b"],
    )
    .ok();
    let head = solo.head_file();
    let r = w.evctl_env(solo.path(), &env, &["ratify", &head, "--blame", "b"]);
    assert_eq!(
        r.stderr,
        format!("error: evctl ratify only ratifies an agent proposal; tick {head} is human-now (nothing to ratify)\n")
    );
}

#[test]
fn global_flags_stand_anywhere_a_stream_flag_may() {
    let w = World::new();
    let repo = Repo::new();
    let store = repo.path().to_str().expect("utf-8 path");
    let elsewhere = tempfile::tempdir().expect("tmp");
    w.evctl(repo.path(), &["init"]).ok();

    // Run from outside the store: only a --store that was read can find it.
    let r = w.evctl(
        elsewhere.path(),
        &[
            "decide",
            "x",
            "--assume",
            "a",
            "--assume-test",
            "t",
            "--counter-test",
            "u",
            "--store",
            store,
            "--on-platform",
            "linux-ci",
            "--triggered-by",
            "f",
            "--surface",
            "s",
            "--blame",
            "b",
            "--verified-at-sha",
            SHA,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("recorded "), "{r:?}");
    assert_eq!(repo.tick_files().len(), 1);

    let r = w.evctl(
        elsewhere.path(),
        &[
            "decide",
            "y",
            "--assume",
            "a",
            "--json",
            "--blame",
            "b",
            "-p",
            "--store",
            store,
            "--color",
            "never",
            "--dry-run",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("--json was read");
    assert_eq!(v["dry_run"], true, "{v}");
    assert_eq!(repo.tick_files().len(), 1, "a dry run writes nothing");

    let r = w.evctl(
        elsewhere.path(),
        &["propose", "z", "--assume", "a", "--store", store, "--json"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let proposal: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("json");
    assert_eq!(proposal["kind"], "ev-proposed");
    let head = repo.head_file();
    let r = w.evctl(
        elsewhere.path(),
        &[
            "supersede",
            &head,
            "--jurisdiction",
            "C",
            "--store",
            store,
            "--blame",
            "b",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let head = repo.head_file();
    let r = w.evctl(
        elsewhere.path(),
        &[
            "supersede",
            &head,
            "a new ruling",
            "--assume",
            "why",
            "--store",
            store,
            "--json",
            "--blame",
            "b",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.trim_start().starts_with('{'), "{r:?}");
    assert_eq!(repo.tick_files().len(), 4);

    // A global's name in value position is a value, as upstream reads it: twin stores with the
    // same first tick give the same answers.
    let first = [
        "decide",
        "x",
        "--assume",
        "a",
        "--blame",
        "b",
        "--verified-at-sha",
        SHA,
    ];
    let (ours, theirs) = (Repo::new(), Repo::new());
    w.evctl(ours.path(), &["init"]).ok();
    w.ev(theirs.path(), &["init"]).ok();
    w.evctl(ours.path(), &first).ok();
    w.ev(theirs.path(), &first).ok();
    let id = ours.head_file();
    assert_eq!(theirs.head_file(), id);
    for args in [
        &[
            "decide",
            "x",
            "--observe",
            "--store",
            "--assume",
            "--json",
            "--blame",
            "b",
            "--dry-run",
        ][..],
        &["decide", "x", "--assume", "a", "--surface", "--store"],
        &["decide", "x", "--bogus", "--store", "--blame", "b"],
        &["decide", "x", "--reject", "--plain", "--blame", "b"],
        &[
            "propose",
            "x",
            "--observe",
            "-p",
            "--assume",
            "--color",
            "--dry-run",
        ],
        &["supersede", &id, "--blame", "--json", "--frob", "x"],
        &[
            "supersede",
            &id,
            "--authority",
            "user-ruled",
            "--blame",
            "--store",
        ],
    ] {
        let a = w.evctl(ours.path(), args);
        let b = w.ev(theirs.path(), args);
        assert_eq!(
            (a.code, &a.stdout, &a.stderr),
            (b.code, &b.stdout, &b.stderr),
            "{args:?}"
        );
    }

    // In flag position they are checked as clap checks them before the verb.
    let r = w.evctl(repo.path(), &["decide", "x", "--assume", "a", "--store"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("a value is required for '--store"),
        "{r:?}"
    );
    let r = w.evctl(repo.path(), &["propose", "x", "--color", "blue"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("invalid value 'blue' for '--color"),
        "{r:?}"
    );
    assert_eq!(repo.tick_files().len(), 4, "nothing was written");
    // The walk's own refusal answers in JSON when --json stands later in the stream.
    let r = w.evctl(repo.path(), &["decide", "x", "--surface", "s", "--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("json refusal");
    assert_eq!(
        v["error"]["message"],
        "--surface has no preceding --assume/--reject ground"
    );
}

/// `check` and `hook` are parsed by their own flags alone (the hot path of hooks and editors):
/// the global flags still stand before or after the verb, and whatever does not parse there is
/// said by the whole grammar, as for every other verb.
#[test]
fn check_and_hook_read_globals_on_either_side_and_refuse_like_every_verb() {
    let w = World::new();
    let repo = Repo::new();
    let store = repo.path().to_str().expect("utf-8 path");
    let elsewhere = tempfile::tempdir().expect("tmp");
    w.evctl(repo.path(), &["init"]).ok();
    w.evctl(
        repo.path(),
        &["decide", "x", "--assume", "a", "--blame", "b"],
    )
    .ok();

    // The no-upstream warning is said once per store: said here, before the comparisons.
    w.evctl(repo.path(), &["check"]).ok();
    let before = w.evctl(elsewhere.path(), &["--json", "--store", store, "check"]);
    let after = w.evctl(
        elsewhere.path(),
        &["check", "--store", store, "--offline", "--json"],
    );
    let mixed = w.evctl(elsewhere.path(), &["--store", store, "check", "--json"]);
    for r in [&before, &after, &mixed] {
        assert_eq!(r.code, 0, "{r:?}");
        let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("--json was read");
        assert!(v.is_object(), "{v}");
    }
    assert_eq!(before.stdout, mixed.stdout);
    let plain = w.evctl(elsewhere.path(), &["check", "--plain", "--store", store]);
    assert_eq!(plain.code, 0, "{plain:?}");
    assert!(!plain.stdout.trim_start().starts_with('{'), "{plain:?}");

    let r = w.evctl(repo.path(), &["check", "--bogus"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("'--bogus'"), "{r:?}");
    assert!(r.stderr.contains("Usage: evctl check"), "{r:?}");
    let r = w.evctl(repo.path(), &["check", "--help"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Usage: evctl check"), "{r:?}");
    assert!(r.stdout.contains("--exit-on-red"), "{r:?}");
    // Every verdict check can print is named in its help.
    for label in [
        "green",
        "red, gray->red",
        "not-run",
        "stale",
        "unproven",
        "silently-unbound",
        "dirty",
        "exempt, memo",
        "drifted",
    ] {
        assert!(
            r.stdout.contains(label),
            "{label} missing from check --help"
        );
    }
    let r = w.evctl(repo.path(), &["hook", "no-such-hook"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("invalid value 'no-such-hook'"), "{r:?}");
    assert!(r.stderr.contains("pre-commit, pre-push"), "{r:?}");
    let r = w.evctl(repo.path(), &["hook", "pre-commit", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.trim_start().starts_with('{'), "{r:?}");
}

/// `man --dir` into a fresh home: `man` does not look there, so evctl prints the MANPATH line
/// that makes it, and with that line `man` finds the page.
#[test]
fn man_pages_written_under_a_fresh_home_say_how_man_finds_them() {
    let home = tempfile::tempdir().expect("home");
    let dir = home.path().join(".local/share/man/man1");
    let out = Command::new(bin("evctl"))
        .args(["man", "--dir"])
        .arg(&dir)
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .env_remove("MANPATH")
        .env("EVD_NO_DAEMON", "1")
        .output()
        .expect("evctl man");
    let r = Run::from(out);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(dir.join("evctl.1").is_file());
    let base = std::fs::canonicalize(home.path().join(".local/share/man")).expect("canon");
    let line = format!("export MANPATH=\"{}:$(manpath -q)\"", base.display());
    assert!(r.stderr.contains(&line), "{r:?}");
    if on_path("man") && on_path("manpath") {
        let script = format!("{line}; man -w evctl");
        let out = Command::new("sh")
            .args(["-c", &script])
            .env("HOME", home.path())
            .env("PATH", "/usr/bin:/bin")
            .env_remove("MANPATH")
            .output()
            .expect("man");
        let found = Run::from(out);
        assert_eq!(found.code, 0, "{found:?}");
        assert!(found.stdout.trim().ends_with("/man1/evctl.1"), "{found:?}");
    }
}
