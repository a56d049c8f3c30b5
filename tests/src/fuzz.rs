//! The standing fault campaign's property tests: every parser at a door of evd or evctl fed
//! generated input, asserting no panic and either a clear refusal or an exact round trip.
//! `tests/tests/fuzz_doors.rs` runs each target a few hundred cases in the suite; `evbench fuzz
//! --cases N` runs them long. Each target is a function of the number of cases, so both use the
//! same code.
//!
//! In-process targets (the parsers themselves): `tick`, `ledger`, `evidence`, `receipt`,
//! `config`. Through the real programs (what evctl and evd read from outside): `lsp` (frames
//! on `evctl lsp`'s stdin), `grammar` (`evctl decide`/`propose` argument lists) and
//! `request_id` (`ev.decide` over the socket with any request id).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value};

/// Every target, by name.
pub const TARGETS: [&str; 8] = [
    "tick",
    "ledger",
    "evidence",
    "receipt",
    "config",
    "lsp",
    "grammar",
    "request_id",
];

/// Run `target` for `cases` generated inputs; the first failing input (shrunk) is the error.
pub fn run(target: &str, cases: u32) -> Result<(), String> {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let out = match target {
        "tick" => runner
            .run(&tick_text(), tick_case)
            .map_err(|e| e.to_string()),
        "ledger" => runner
            .run(&json_value(), ledger_case)
            .map_err(|e| e.to_string()),
        "evidence" => runner
            .run(&(text(), citation()), evidence_case)
            .map_err(|e| e.to_string()),
        "receipt" => runner
            .run(&(text(), receipt()), receipt_case)
            .map_err(|e| e.to_string()),
        "config" => runner
            .run(&text(), |t| {
                let _ = evd::api::shared::config::Config::parse(Some(&t));
                Ok(())
            })
            .map_err(|e| e.to_string()),
        "lsp" => return processes(target, &mut runner),
        "grammar" => return processes(target, &mut runner),
        "request_id" => return processes(target, &mut runner),
        other => return Err(format!("no fuzz target {other:?} (targets: {TARGETS:?})")),
    };
    out.map_err(|e| format!("{target}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Generators

/// Any text, with a bias towards the characters parsers split on.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        proptest::collection::vec(
            prop_oneof![
                Just('{'),
                Just('}'),
                Just('['),
                Just(']'),
                Just(':'),
                Just('"'),
                Just('\n'),
                Just('='),
                Just('-'),
                Just('/'),
                any::<char>(),
                proptest::char::range('a', 'z'),
            ],
            0..200
        )
        .prop_map(|v| v.into_iter().collect()),
    ]
}

/// Any JSON value, objects keyed by the names the doors look for (and others).
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("schema_version".to_string()),
        Just("event_type".to_string()),
        Just("run_id".to_string()),
        Just("agent_id".to_string()),
        Just("payload".to_string()),
        Just("intent_id".to_string()),
        Just("plan_id".to_string()),
        Just("predicted".to_string()),
        Just("actual".to_string()),
        Just("p_success".to_string()),
        Just("entropy".to_string()),
        Just("lambda".to_string()),
        Just("artifacts".to_string()),
        Just("path".to_string()),
        Just("sha256".to_string()),
        Just("seq".to_string()),
        Just("decision".to_string()),
        Just("grounds".to_string()),
        Just("claim".to_string()),
        Just("supports".to_string()),
        Just("check".to_string()),
        "[a-z_]{1,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("1.1".to_string()),
            Just("intent_created".to_string()),
            Just("execution_completed".to_string()),
            Just("tool_call".to_string()),
            Just("evd".to_string()),
            Just("chosen".to_string()),
            "runs/R-[a-z0-9]{1,4}/[a-z.]{1,8}",
            any::<String>(),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A tick file's text: a JSON value (often object-shaped like a tick), or any text.
fn tick_text() -> impl Strategy<Value = String> {
    prop_oneof![
        json_value().prop_map(|v| v.to_string()),
        (
            "[ -~]{1,40}",
            "[ -~]{1,20}",
            proptest::collection::vec(("[ -~]{1,30}", "(chosen|rejected:[a-z]{1,8})"), 0..4),
        )
            .prop_map(|(decision, blame, grounds)| {
                let grounds: Vec<Value> = grounds
                    .into_iter()
                    .map(|(claim, supports)| serde_json::json!({"claim": claim, "supports": supports}))
                    .collect();
                serde_json::json!({"decision": decision, "blame": blame, "grounds": grounds,
                    "status": "live", "parent_id": "", "held_since": "2026-01-01T00:00:00Z",
                    "observe": ""})
                .to_string()
            }),
        text(),
    ]
}

fn citation() -> impl Strategy<Value = proto::evidence::Citation> {
    (
        "[a-z]{1,6}(/[a-z0-9_-]{1,8}(\\.[a-z]{1,3})?){0,3}",
        0u64..1 << 20,
        1u64..4096,
        "[0-9a-f]{64}",
    )
        .prop_map(|(path, start, len, sha256)| proto::evidence::Citation {
            path,
            start,
            end: start + len,
            sha256,
        })
}

fn receipt() -> impl Strategy<Value = evd::engine::receipts::Receipt> {
    use evd::engine::receipts::{Receipt, RunResult};
    (
        "[ -~]{1,40}",
        "[a-z0-9-]{1,12}",
        "[0-9a-f]{40}",
        prop_oneof![Just(RunResult::Green), Just(RunResult::Red)],
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(test, platform, commit, result, falsifiable)| Receipt {
            test,
            platform,
            commit,
            ran_at: "2026-01-01T00:00:00Z".into(),
            result,
            falsifiable,
        })
}

// ---------------------------------------------------------------------------------------------
// Properties

fn fail(why: String) -> TestCaseError {
    TestCaseError::fail(why)
}

/// A tick that parses comes back the same from its own file bytes, and those bytes are stable.
fn tick_case(text: String) -> Result<(), TestCaseError> {
    let Ok(t) = proto::Tick::parse(&text) else {
        return Ok(());
    };
    let bytes = t.file_bytes();
    let again = proto::Tick::parse(&bytes).map_err(|e| {
        fail(format!(
            "a tick's own file bytes do not parse: {e}\n{bytes}"
        ))
    })?;
    if again != t {
        return Err(fail(format!(
            "the round trip changed the tick:\n{text}\n{bytes}"
        )));
    }
    if again.file_bytes() != bytes {
        return Err(fail(format!("file bytes are not stable:\n{bytes}")));
    }
    Ok(())
}

/// An event is refused with a rule, or taken; a taken event's line reads back as itself.
fn ledger_case(v: Value) -> Result<(), TestCaseError> {
    let host = serde_json::json!({"hostname": "h", "platform": "linux", "repo_root": "/r"});
    let git = serde_json::json!({"branch": "main", "head_sha": "", "dirty": false});
    let Ok(ev) = evd::ledger::from_client(v, &host, &git) else {
        return Ok(());
    };
    let rules = evd::ledger::rules::Rules::default();
    let _ = rules.admit(&ev);
    let _ = evd::ledger::rules::artifacts(&ev);
    let line = proto::json::compact(&Value::Object(ev.clone()));
    let back: Value = serde_json::from_str(&line).map_err(|e| fail(format!("{e}: {line}")))?;
    if back != Value::Object(ev) {
        return Err(fail(format!(
            "the line does not read back as the event: {line}"
        )));
    }
    Ok(())
}

/// Any claim reads as citations or a refusal; a citation's marker in a claim reads back whole.
fn evidence_case((text, c): (String, proto::evidence::Citation)) -> Result<(), TestCaseError> {
    let _ = proto::evidence::citations(&text);
    let claim = format!("p99 holds {} today", c.marker());
    match proto::evidence::citations(&claim) {
        Ok(found) if found == vec![c.clone()] => Ok(()),
        other => Err(fail(format!("{claim}: {other:?}"))),
    }
}

/// Any line reads as a receipt or a refusal; a receipt's line reads back as itself.
fn receipt_case((text, r): (String, evd::engine::receipts::Receipt)) -> Result<(), TestCaseError> {
    let _ = evd::engine::receipts::parse_line(&text);
    let _ = evd::engine::receipts::parse_file(&text);
    let line = r.line();
    match evd::engine::receipts::parse_line(line.trim_end()) {
        Ok(back) if back == r => Ok(()),
        other => Err(fail(format!("{line}: {other:?}"))),
    }
}

// ---------------------------------------------------------------------------------------------
// Through the programs

/// How long one program may take on one input before it counts as hung.
const PROCESS_LIMIT: Duration = Duration::from_secs(10);

/// Run `cmd` with `input` on its stdin, bounded; its exit code and stderr.
fn bounded(mut cmd: Command, input: &[u8]) -> Result<(Option<i32>, String), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let err = dir.path().join("err");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input);
    }
    let t = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st.code();
        }
        if t.elapsed() > PROCESS_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("hung (killed after {PROCESS_LIMIT:?})"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Ok((code, std::fs::read_to_string(&err).unwrap_or_default()))
}

fn no_panic(what: &str, stderr: &str) -> Result<(), TestCaseError> {
    if stderr.contains("panicked") {
        return Err(fail(format!("{what} panicked:\n{stderr}")));
    }
    Ok(())
}

/// An LSP input: frames, some well-formed, some not, and raw noise.
fn lsp_input() -> impl Strategy<Value = Vec<u8>> {
    let frame = prop_oneof![
        json_value().prop_map(|v| {
            let body = v.to_string();
            format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
        }),
        (any::<i64>(), text())
            .prop_map(|(n, body)| { format!("Content-Length: {n}\r\n\r\n{body}").into_bytes() }),
        proptest::collection::vec(any::<u8>(), 0..64),
    ];
    proptest::collection::vec(frame, 0..6).prop_map(|frames| {
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}"#;
        let mut out = format!("Content-Length: {}\r\n\r\n{init}", init.len()).into_bytes();
        for f in frames {
            out.extend(f);
        }
        out
    })
}

fn grammar_args() -> impl Strategy<Value = Vec<String>> {
    let word = prop_oneof![
        Just("--assume".to_string()),
        Just("--assume-test".to_string()),
        Just("--counter-test".to_string()),
        Just("--on-platform".to_string()),
        Just("--triggered-by".to_string()),
        Just("--surface".to_string()),
        Just("--reject".to_string()),
        Just("--blame".to_string()),
        Just("--dry-run".to_string()),
        Just("--json".to_string()),
        Just("--".to_string()),
        "[ -~]{0,24}",
    ];
    (
        prop_oneof![Just("decide".to_string()), Just("propose".to_string())],
        proptest::collection::vec(word, 0..12),
    )
        .prop_map(|(verb, mut rest)| {
            rest.insert(0, verb);
            rest.push("--dry-run".into());
            rest
        })
}

fn processes(target: &str, runner: &mut TestRunner) -> Result<(), String> {
    let w = crate::World::new();
    let repo = crate::Repo::new();
    let init = w.evctl(repo.path(), &["init"]);
    if init.code != 0 {
        return Err(format!("init: {init:?}"));
    }
    let root = repo.path().to_path_buf();
    let out = match target {
        "lsp" => runner
            .run(&lsp_input(), |input| {
                let mut cmd = w.command(crate::bin("evctl"));
                cmd.arg("lsp").current_dir(&root);
                let (_, err) = bounded(cmd, &input).map_err(|e| fail(format!("evctl lsp {e}")))?;
                no_panic("evctl lsp", &err)
            })
            .map_err(|e| e.to_string()),
        "grammar" => runner
            .run(&grammar_args(), |args| {
                let mut cmd = w.command(crate::bin("evctl"));
                cmd.args(&args).current_dir(&root).env("EVD_NO_DAEMON", "1");
                let (code, err) =
                    bounded(cmd, b"").map_err(|e| fail(format!("evctl {args:?} {e}")))?;
                no_panic(&format!("evctl {args:?}"), &err)?;
                match code {
                    Some(0..=2) => Ok(()),
                    other => Err(fail(format!("evctl {args:?} exited {other:?}: {err}"))),
                }
            })
            .map_err(|e| e.to_string()),
        "request_id" => {
            // A daemon to talk to.
            w.evctl(&root, &["list"]);
            let sock = w.socket();
            runner
                .run(&prop_oneof![any::<String>(), "[ -~]{0,300}"], |id| {
                    request_id_case(&sock, &root, &id)
                })
                .map_err(|e| e.to_string())
        }
        _ => return Err(format!("no process target {target}")),
    };
    w.stop_daemon();
    out.map_err(|e| format!("{target}: {e}"))
}

/// Any request id gets an answer (a result or an error), and the daemon keeps answering.
fn request_id_case(sock: &Path, root: &Path, id: &str) -> Result<(), TestCaseError> {
    let root = root.display().to_string();
    let params = serde_json::json!([{
        "context": {"store": root, "cwd": root, "request_id": id, "wait_ms": 60000},
        "decision": "fuzzed", "blame": "b", "grounds": [], "dry_run": true,
    }]);
    let v = crate::rpc_post(sock, "ev.decide", params);
    if v.get("result").is_none() && v.get("error").is_none() {
        return Err(fail(format!("no answer for request id {id:?}: {v}")));
    }
    let l = crate::rpc_post(
        sock,
        "ev.list",
        serde_json::json!([{"context": {"store": root, "cwd": root}}]),
    );
    if l.get("result").is_none() {
        return Err(fail(format!(
            "the daemon stopped answering after {id:?}: {l}"
        )));
    }
    Ok(())
}
