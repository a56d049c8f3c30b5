//! The standing fault campaign, in the suite: every door's parser fed a few hundred generated
//! inputs (`evd_e2e::fuzz`). `evbench fuzz --cases N` runs the same targets long.

use evd_e2e::fuzz;

/// Cases per in-process target in the suite (the parsers are fast).
const CASES: u32 = 512;
/// Cases per target that runs a program per input.
const PROCESS_CASES: u32 = 64;

#[test]
fn ticks_ledger_events_citations_receipts_and_config_never_panic_and_round_trip() {
    for t in ["tick", "ledger", "evidence", "receipt", "config"] {
        fuzz::run(t, CASES).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn evctl_lsp_frames_never_panic_or_hang_it() {
    fuzz::run("lsp", PROCESS_CASES).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn decide_and_propose_arguments_never_panic_evctl() {
    fuzz::run("grammar", PROCESS_CASES).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn any_request_id_gets_an_answer_and_the_daemon_keeps_answering() {
    fuzz::run("request_id", PROCESS_CASES).unwrap_or_else(|e| panic!("{e}"));
}
