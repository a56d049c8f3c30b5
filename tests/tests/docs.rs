//! The worked examples in docs/*.md are run, so the docs cannot drift from the tools. The
//! example format is described in [`evd_e2e::console`].

use std::path::PathBuf;

use evd_e2e::console::run_page;
use evd_e2e::workspace_root;

/// Pages whose examples a test of their own runs (next to the checks that page needs).
const RUN_ELSEWHERE: &[&str] = &[
    "protocol.md", // tests/tests/protocol.rs
];

#[test]
fn every_console_example_in_the_docs_runs_as_written() {
    let dir = workspace_root().join("docs");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| RUN_ELSEWHERE.iter().any(|e| n == *e))
        })
        .collect();
    pages.sort();
    let ran: usize = pages.iter().map(|p| run_page(p)).sum();
    assert!(ran > 0, "the docs hold runnable examples");
}
