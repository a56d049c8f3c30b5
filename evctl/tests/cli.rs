//! evctl's own command line (this also makes `cargo test` build the binary that the end-to-end
//! tests in tests/ drive).

use std::process::Command;

fn evctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_evctl"))
        .args(args)
        .env("EVD_NO_DAEMON", "1")
        .output()
        .expect("run evctl")
}

#[test]
fn self_test_reproduces_the_four_frozen_ids_without_a_store() {
    let out = evctl(&["verify", "--self-test"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "✓ genesis: e2b337f53a1f (want e2b337f53a1f)\n\
         ✓ case1: 638c47b0c9dd (want 638c47b0c9dd)\n\
         ✓ harvested: 0cf784b51331 (want 0cf784b51331)\n\
         ✓ rejected_tripwire: 9c5feb4582ac (want 9c5feb4582ac)\n"
    );
}

#[test]
fn usage_errors_exit_2_and_help_teaches_the_verbs() {
    let out = evctl(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    let out = evctl(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for verb in [
        "init", "decide", "show", "list", "log", "verify", "migrate", "status", "shutdown",
    ] {
        assert!(help.contains(verb), "help lists {verb}");
    }
    let out = evctl(&["decide", "--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--counter-test"));
    let out = evctl(&["--color", "sometimes", "list"]);
    assert_eq!(out.status.code(), Some(2));
}
