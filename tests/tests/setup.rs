//! `evctl setup`: a git work tree made ready in one go (store, agent skill, session brief,
//! pre-commit gate), idempotent, honest about what it did and what is left, and writing nothing
//! with --dry-run.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use evd_e2e::{path_with_evctl, Repo, Run, World};

/// Every file and directory under `dir` (the repository's objects aside): path → (mode, bytes).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("ls").flatten() {
            let p = e.path();
            if p.ends_with(".git/objects") {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).expect("stat");
            let mode = m.permissions().mode();
            if m.is_dir() {
                out.insert(p.clone(), (mode, Vec::new()));
                stack.push(p);
            } else {
                out.insert(p.clone(), (mode, std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out
}

fn canon(p: &Path) -> PathBuf {
    p.canonicalize().expect("canonicalize")
}

#[test]
fn a_fresh_repository_is_set_up_and_a_second_run_changes_nothing() {
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    let top = canon(p);
    let r = w.evctl(p, &["setup"]).ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("evctl setup → {}", top.display()),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("1. store (co-located)\n   ✓ evctl init + staleness_ref=local-head\n"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("2. agent skill → .claude/skills/ev/SKILL.md\n   ✓ agent skill: written\n"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("   ✓ session-start brief wired (.claude/settings.json)\n"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("   ✓ pre-commit: installed evctl's hook in .git/hooks/pre-commit\n"),
        "{r:?}"
    );
    assert!(r.stdout.contains("\ndone: created the store"), "{r:?}");
    assert!(r.stdout.contains("\nstill to do by hand:\n"), "{r:?}");
    assert!(
        r.stdout.contains("add `.evolving/results/` to .gitignore"),
        "results/ is not ignored here: {r:?}"
    );

    // The store, its config tuned by exactly one line.
    let config = std::fs::read_to_string(p.join(".evolving/config")).expect("config");
    assert_eq!(
        config,
        evd::store::config::DEFAULT_CONFIG.replace("\"live-origin\"", "\"local-head\"")
    );
    // The agent files.
    let skill = std::fs::read_to_string(p.join(".claude/skills/ev/SKILL.md")).expect("skill");
    assert!(skill.starts_with("---\nname: "), "{skill}");
    assert!(skill.contains("evctl brief") && skill.contains("evctl propose"));
    let hook = p.join(".claude/hooks/ev-brief-sessionstart.sh");
    assert_eq!(
        std::fs::metadata(&hook).expect("stat").permissions().mode() & 0o111,
        0o111
    );
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(p.join(".claude/settings.json")).expect("settings"),
    )
    .expect("json");
    // By its path from the project directory: the same in every clone once committed.
    let command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
        .as_str()
        .expect("command")
        .to_string();
    assert_eq!(
        command,
        "sh \"$CLAUDE_PROJECT_DIR/.claude/hooks/ev-brief-sessionstart.sh\""
    );
    assert!(!command.contains(&top.display().to_string()), "{command}");
    // Run as the agent runs it: by a shell, from anywhere, with the project directory set.
    let elsewhere = tempfile::tempdir().expect("tmp");
    let r = Run::from(
        w.command("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(elsewhere.path())
            .env("CLAUDE_PROJECT_DIR", p)
            .env("PATH", path_with_evctl())
            .output()
            .expect("sh"),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let gate = std::fs::read_to_string(p.join(".git/hooks/pre-commit")).expect("gate");
    assert!(gate.contains("# evctl-hooks: "), "{gate}");

    // The session hook: silent with nothing settled, the brief once something is.
    let brief = |cwd: &Path| {
        Run::from(
            w.command("sh")
                .arg(&hook)
                .current_dir(cwd)
                .env("PATH", path_with_evctl())
                .output()
                .expect("sh"),
        )
    };
    let r = brief(p);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{r:?}");
    w.evctl(
        p,
        &[
            "decide",
            "keep sqlite",
            "--assume",
            "one user",
            "--reject",
            "postgres: too heavy for one user",
            "--authority",
            "user-ruled",
        ],
    )
    .ok();
    let r = brief(Path::new("/"));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("keep sqlite"), "{r:?}");
    assert!(r.stdout.contains("postgres"), "{r:?}");

    // Again: nothing changes, and it says so.
    let before = snapshot(p);
    let r = w.evctl(p, &["setup"]).ok();
    assert!(
        r.stdout.contains(
            "   .evolving/ present — kept (config untouched: staleness_ref = \"local-head\")"
        ),
        "{r:?}"
    );
    assert!(r.stdout.contains("pre-commit: already installed"), "{r:?}");
    assert!(
        r.stdout
            .contains("\ndone: nothing to change — everything was already in place\n"),
        "{r:?}"
    );
    assert_eq!(snapshot(p), before, "a second run writes nothing");
}

#[test]
fn an_existing_settings_file_is_never_edited_and_the_entry_to_add_is_printed() {
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    std::fs::create_dir_all(p.join(".claude")).expect("mkdir");
    let mine = "{\n  \"permissions\": {\"allow\": [\"Bash(ls)\"]}\n}\n";
    std::fs::write(p.join(".claude/settings.json"), mine).expect("write");
    let r = w.evctl(p, &["setup"]).ok();
    assert_eq!(
        std::fs::read_to_string(p.join(".claude/settings.json")).expect("read"),
        mine
    );
    assert!(
        r.stdout.contains(
            "   .claude/settings.json exists — evctl never edits it. Add this SessionStart entry by hand:\n     {\"hooks\":[{\"command\":\"sh \\\""
        ),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("  - add the SessionStart entry printed above to .claude/settings.json"),
        "{r:?}"
    );
}

#[test]
fn outside_a_work_tree_setup_refuses_with_exit_1() {
    let w = World::new();
    let d = tempfile::tempdir().expect("dir");
    let r = w.evctl(d.path(), &["setup"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        r.stderr,
        format!(
            "evctl setup: '{}' is not a git working tree — co-location needs one.\n",
            d.path().display()
        )
    );
    assert!(!d.path().join(".evolving").exists());
    let r = w.evctl(d.path(), &["setup", "--dry-run", "nowhere"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        r.stderr,
        "evctl setup: 'nowhere' is not a git working tree — co-location needs one.\n"
    );
}

#[test]
fn dry_run_prints_every_change_and_writes_nothing() {
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    let top = canon(p);
    let before = snapshot(p);
    let r = w.evctl(p, &["setup", "--dry-run"]).ok();
    assert_eq!(snapshot(p), before, "nothing written");
    for want in [
        "   [dry-run] evctl init + staleness_ref=local-head".to_string(),
        format!(
            "   [dry-run] write {}",
            top.join(".claude/skills/ev/SKILL.md").display()
        ),
        format!(
            "   [dry-run] write {}",
            top.join(".claude/hooks/ev-brief-sessionstart.sh").display()
        ),
        format!(
            "   [dry-run] write {} with a SessionStart hook",
            top.join(".claude/settings.json").display()
        ),
        "   [dry-run] write .git/hooks/pre-commit (mode 755)".to_string(),
        "(dry-run) — no changes made.".to_string(),
        "a real run would: create the store (staleness_ref = local-head); write the agent skill (.claude/skills/ev/SKILL.md); write the session-start brief (.claude/hooks/ev-brief-sessionstart.sh); wire the brief in .claude/settings.json; install the pre-commit gate".to_string(),
    ] {
        assert!(r.stdout.contains(&format!("{want}\n")), "{want}\n{r:?}");
    }
    // A foreign pre-commit would be chained, and the dry run says so without moving it.
    let hooks = p.join(".git/hooks");
    std::fs::create_dir_all(&hooks).expect("mkdir");
    std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\nexit 0\n").expect("write");
    let before = snapshot(p);
    let r = w.evctl(p, &["setup", "--dry-run"]).ok();
    assert!(
        r.stdout.contains("   [dry-run] move the existing .git/hooks/pre-commit aside to .git/hooks/pre-commit.evctl-chained (it keeps running, first)\n"),
        "{r:?}"
    );
    assert_eq!(snapshot(p), before, "nothing written");
}

#[test]
fn a_core_hooks_path_repository_gets_the_gate_where_git_runs_it() {
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    w.git(p, &["config", "core.hooksPath", ".githooks"]).ok();
    let r = w.evctl(p, &["setup"]).ok();
    assert!(
        r.stdout.contains("core.hooksPath, inside the work tree"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("   ✓ pre-commit: created .githooks/pre-commit holding evctl's one line\n"),
        "{r:?}"
    );
    assert!(!p.join(".git/hooks/pre-commit").exists());

    // The gate runs on a real commit: a decision guarding README, its check run, then a change.
    w.evctl(
        p,
        &[
            "decide",
            "keep the readme short",
            "--assume",
            "nobody reads long ones",
            "--assume-test",
            "true",
            "--counter-test",
            "false",
            "--on-platform",
            "local",
            "--triggered-by",
            "README",
            "--surface",
            "docs",
        ],
    )
    .ok();
    w.evctl(p, &["check", "--run"]).ok();
    std::fs::write(p.join("README"), "longer\n").expect("write");
    w.git(p, &["add", "README"]).ok();
    let r = w.git(p, &["commit", "-q", "-m", "readme"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("evctl: you are changing README, which decision "),
        "{r:?}"
    );
    // Idempotent here too.
    let r = w.evctl(p, &["setup"]).ok();
    assert!(
        r.stdout
            .contains("pre-commit: evctl's line is already in .githooks/pre-commit, unchanged"),
        "{r:?}"
    );
}

#[test]
fn only_the_top_of_a_work_tree_is_set_up_and_refusals_match_upstream() {
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    std::fs::create_dir_all(p.join("services/api")).expect("mkdir");
    let plain = tempfile::tempdir().expect("dir");
    let before = snapshot(p);
    for (cwd, args) in [
        (plain.path(), &["setup"][..]),
        (plain.path(), &["setup", "--dry-run"]),
        (&p.join("services/api"), &["setup"]),
        (&p.join("services/api"), &["setup", "--dry-run"]),
        (&p.join("services"), &["setup", "api"]),
        (p, &["setup", "services/api"]),
        (p, &["setup", "--dry-run", "services"]),
        (p, &["setup", "nowhere"]),
        (p, &["setup", "README"]),
        (p, &["--plain", "setup", "services"]),
    ] {
        let (ours, theirs) = (w.evctl(cwd, args), w.ev(cwd, args));
        assert_eq!(ours.code, 1, "{args:?}: {ours:?}");
        assert_eq!(
            (ours.code, &ours.stdout, &ours.stderr),
            (theirs.code, &theirs.stdout, &theirs.stderr),
            "{args:?} in {}",
            cwd.display()
        );
        assert!(
            ours.stderr
                .ends_with("' is not a git working tree — co-location needs one.\n"),
            "{ours:?}"
        );
    }
    let r = w.evctl(&p.join("services/api"), &["setup"]);
    assert_eq!(
        r.stderr,
        format!(
            "evctl setup: '{}' is not a git working tree — co-location needs one.\n",
            p.join("services/api").display()
        )
    );
    assert_eq!(snapshot(p), before, "nothing written");
    assert!(!plain.path().join(".evolving").exists());
}

#[test]
fn a_linked_work_tree_whose_git_is_a_file_is_set_up() {
    let w = World::new();
    let repo = Repo::new();
    let linked = tempfile::tempdir().expect("dir");
    let tree = linked.path().join("wt");
    w.git(
        repo.path(),
        &[
            "worktree",
            "add",
            "-q",
            tree.to_str().expect("utf8"),
            "-b",
            "wt",
        ],
    )
    .ok();
    assert!(tree.join(".git").is_file());
    let r = w.evctl(&tree, &["setup"]).ok();
    assert!(
        r.stdout
            .starts_with(&format!("evctl setup → {}\n", canon(&tree).display())),
        "{r:?}"
    );
    assert!(tree.join(".evolving/config").is_file());
    assert!(tree.join(".claude/skills/ev/SKILL.md").is_file());
}

#[test]
fn a_differing_skill_is_backed_up_whoever_wrote_it_and_colour_flags_are_accepted() {
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    let skill = p.join(".claude/skills/ev/SKILL.md");
    let bak = p.join(".claude/skills/ev/SKILL.md.bak");
    // --color and --plain are accepted (and change nothing: setup prints no colour).
    let a = w
        .evctl(p, &["setup", "--dry-run", "--color", "always"])
        .ok();
    let b = w.evctl(p, &["--plain", "setup", "--dry-run"]).ok();
    assert_eq!(a.stdout, b.stdout);
    assert!(!a.stdout.contains('\x1b'), "{a:?}");
    assert!(!skill.exists(), "dry runs write nothing");

    w.evctl(p, &["setup"]).ok();
    let ours = std::fs::read_to_string(&skill).expect("skill");
    assert!(!bak.exists(), "nothing to back up the first time");

    // An older (or hand-edited) copy of evctl's own skill differs: backed up, then rewritten.
    let edited = ours.replace("# Decision memory with evctl", "# My notes\n\nkeep these");
    assert_ne!(edited, ours);
    std::fs::write(&skill, &edited).expect("write");
    let dry = w.evctl(p, &["setup", "--dry-run"]).ok();
    assert!(
        dry.stdout.contains(&format!(
            "   [dry-run] move the existing file (it differs from evctl's) to {}\n",
            canon(p).join(".claude/skills/ev/SKILL.md.bak").display()
        )),
        "{dry:?}"
    );
    assert!(!bak.exists(), "the dry run moves nothing");
    let r = w.evctl(p, &["setup"]).ok();
    assert!(
        r.stdout.contains(&format!(
            "   (the existing file differed from evctl's: moved to {})\n",
            canon(p).join(".claude/skills/ev/SKILL.md.bak").display()
        )),
        "{r:?}"
    );
    assert_eq!(std::fs::read_to_string(&bak).expect("bak"), edited);
    assert_eq!(std::fs::read_to_string(&skill).expect("skill"), ours);

    // Identical now: a rerun makes no backup.
    let r = w.evctl(p, &["setup"]).ok();
    assert!(
        r.stdout.contains("   ✓ agent skill: already up to date\n"),
        "{r:?}"
    );
    assert!(!p.join(".claude/skills/ev/SKILL.md.bak.2").exists());

    // A foreign skill is backed up too, next to (never over) the older backup.
    std::fs::write(&skill, "---\nname: someone-elses\n---\n").expect("write");
    w.evctl(p, &["setup"]).ok();
    assert_eq!(std::fs::read_to_string(&bak).expect("bak"), edited);
    assert_eq!(
        std::fs::read_to_string(p.join(".claude/skills/ev/SKILL.md.bak.2")).expect("bak.2"),
        "---\nname: someone-elses\n---\n"
    );
    assert_eq!(std::fs::read_to_string(&skill).expect("skill"), ours);
}

#[test]
fn the_session_hook_is_refreshed_when_it_is_evctls_and_kept_when_it_is_not() {
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    let hook = p.join(".claude/hooks/ev-brief-sessionstart.sh");
    w.evctl(p, &["setup"]).ok();
    let ours = std::fs::read_to_string(&hook).expect("hook");
    // An older evctl's hook (it carries the marker): rewritten in place, no backup.
    std::fs::write(&hook, format!("{ours}# an older line\n")).expect("write");
    let r = w.evctl(p, &["setup"]).ok();
    assert!(
        r.stdout.contains("   ✓ session-start brief: written\n"),
        "{r:?}"
    );
    assert_eq!(std::fs::read_to_string(&hook).expect("hook"), ours);
    assert!(!p
        .join(".claude/hooks/ev-brief-sessionstart.sh.bak")
        .exists());
    // Someone else's: left alone, and said so.
    let foreign = "#!/bin/sh\necho mine\n";
    std::fs::write(&hook, foreign).expect("write");
    let r = w.evctl(p, &["setup"]).ok();
    assert!(
        r.stdout.contains("exists and is not evctl's — kept"),
        "{r:?}"
    );
    assert_eq!(std::fs::read_to_string(&hook).expect("hook"), foreign);
}
