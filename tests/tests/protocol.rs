//! docs/protocol.md is the contract for clients other than evctl. It must give every method evd
//! really serves a heading of its own and name every error code, it must not describe methods
//! that are gone, and its examples (curl, Python over HTTP and over WebSocket) must run as
//! written against a real evd.

use std::collections::BTreeSet;
use std::path::PathBuf;

use evd_e2e::console::run_page;
use evd_e2e::workspace_root;
use proto::rpc::codes;

fn page_path() -> PathBuf {
    workspace_root().join("docs/protocol.md")
}

fn page() -> String {
    std::fs::read_to_string(page_path()).expect("docs/protocol.md")
}

/// The code spans (`…`) of `line`.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Every code span in a heading of the page (outside fenced blocks, where `#` starts a comment).
fn heading_spans(page: &str) -> BTreeSet<String> {
    let mut fenced = false;
    page.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            !fenced && l.starts_with('#')
        })
        .flat_map(code_spans)
        .map(str::to_string)
        .collect()
}

/// The source of the RPC contract, where the trait and the error codes are defined.
fn rpc_source() -> String {
    // One file per family of methods under proto/src/rpc/: read as one text.
    let dir = workspace_root().join("proto/src/rpc");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("proto/src/rpc/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("a file of proto/src/rpc/"))
        .collect()
}

/// Every `pub const NAME: i32 = VALUE;` of `pub mod codes`, read from its source so that a code
/// added there is checked without anyone listing it here.
fn error_codes(source: &str) -> Vec<(String, i32)> {
    let body = source
        .split_once("pub mod codes {")
        .map(|(_, rest)| rest)
        .and_then(|rest| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .expect("proto/src/rpc/ has `pub mod codes { … }`");
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .map(|decl| {
            let (name, rest) = decl.split_once(':').expect("NAME: i32 = VALUE;");
            let value = rest
                .split_once('=')
                .map(|(_, v)| v.trim().trim_end_matches(';').trim())
                .and_then(|v| v.parse::<i32>().ok())
                .unwrap_or_else(|| panic!("cannot read the value of {decl}"));
            (name.trim().to_string(), value)
        })
        .collect()
}

/// The notification names of the trait's subscriptions (`"watch" => "watch.event"`), as
/// clients see them: evd pushes them, so they are not methods of its module.
fn notification_names(source: &str) -> BTreeSet<String> {
    source
        .lines()
        .filter(|l| l.trim_start().starts_with("#[subscription("))
        .filter_map(|l| l.split_once("=>"))
        .filter_map(|(_, rest)| rest.split('"').nth(1))
        .map(|n| format!("ev.{n}"))
        .collect()
}

#[test]
fn every_method_evd_serves_has_a_heading_on_the_page() {
    let served = evd::daemon::server::method_names();
    // The list comes from the module evd serves: plain methods, subscribe and unsubscribe calls.
    for known in ["ev.hello", "ev.check.plan", "ev.watch", "ev.unwatch"] {
        assert!(served.contains(&known), "{known} not in {served:?}");
    }
    let headings = heading_spans(&page());
    let missing: Vec<&str> = served
        .iter()
        .copied()
        .filter(|m| !headings.contains(*m))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/protocol.md has no heading for {missing:?}: give each method evd serves a heading \
         that names it in a code span (#### `ev.name`), with its params, result and errors"
    );
}

#[test]
fn the_page_describes_no_method_evd_does_not_serve() {
    let served: BTreeSet<String> = evd::daemon::server::method_names()
        .into_iter()
        .map(str::to_string)
        .collect();
    let pushed = notification_names(&rpc_source());
    assert!(pushed.contains("ev.watch.event"), "{pushed:?}");
    let stale: Vec<String> = heading_spans(&page())
        .into_iter()
        .filter(|s| s.starts_with("ev."))
        .filter(|s| !served.contains(s) && !pushed.contains(s))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/protocol.md has headings for {stale:?}, which evd neither serves nor pushes"
    );
}

#[test]
fn every_error_code_is_on_the_page() {
    let all = error_codes(&rpc_source());
    // The codes are read from the real module.
    assert!(all.contains(&("NO_STORE".to_string(), codes::NO_STORE)));
    assert!(all.contains(&("ALREADY_APPLIED".to_string(), codes::ALREADY_APPLIED)));
    assert!(all.contains(&("INTERNAL".to_string(), codes::INTERNAL)));
    let page = page();
    let missing: Vec<String> = all
        .iter()
        .filter(|(name, value)| {
            let (name, value) = (name.as_str(), value.to_string());
            !page.lines().any(|l| {
                let spans = code_spans(l);
                spans.contains(&name) && spans.contains(&value.as_str())
            })
        })
        .map(|(name, value)| format!("{name} ({value})"))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/protocol.md does not explain {missing:?}: add a row to its table of errors naming \
         the constant and its value, each in a code span"
    );
}

#[test]
fn every_example_on_the_page_runs_as_written() {
    let ran = run_page(&page_path());
    assert!(ran >= 10, "only {ran} examples ran");
}

#[test]
fn the_contract_is_read_as_it_is_written() {
    let source = "pub mod codes {\n    pub const A: i32 = -1;\n    /// doc\n    pub const B: i32 = -32048;\n}\n";
    assert_eq!(
        error_codes(source),
        vec![("A".to_string(), -1), ("B".to_string(), -32048)]
    );
    let source =
        "    #[subscription(name = \"watch\" => \"watch.event\", unsubscribe = \"unwatch\")]";
    assert_eq!(
        notification_names(source),
        BTreeSet::from(["ev.watch.event".to_string()])
    );
    assert_eq!(
        heading_spans("## `ev.a`, `ev.b`\ntext `ev.c`\n```console\n# `ev.d`\n```\n"),
        BTreeSet::from(["ev.a".to_string(), "ev.b".to_string()])
    );
}
