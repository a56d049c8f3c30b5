//! `evctl lsp` driven by hand over stdio: what it publishes and when, hover, lenses, actions,
//! commands (the draft flow included), malformed input, no daemon, a restarted daemon.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use evd_e2e::lsp_client::{diagnostics_for, file_uri, LspClient};
use evd_e2e::{bin, code_repo, git, Repo, World};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

/// Two decisions: the schema (a literal trigger) and `api/` (a directory trigger), both green.
fn setup(w: &World, env: &[(&str, &str)]) -> Repo {
    let repo = code_repo(w, env);
    let p = repo.path();
    let config = repo.ev_dir().join("config");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, text.replace("\"live-origin\"", "\"none\"")).expect("config");
    for (decision, claim, test, trigger) in [
        (
            "freeze the schema",
            "the schema is stable",
            "test ! -e broken",
            "db/schema.sql",
        ),
        (
            "keep the api small",
            "few routes",
            "test ! -e api/extra",
            "api",
        ),
    ] {
        w.evctl_env(
            p,
            env,
            &[
                "decide",
                decision,
                "--assume",
                claim,
                "--assume-test",
                test,
                "--counter-test",
                &test.replace("! ", ""),
                "--on-platform",
                "local",
                "--triggered-by",
                trigger,
                "--surface",
                "s",
                "--reject",
                "pgvector: it locks the schema",
                "--blame",
                "Wang Yu",
            ],
        )
        .ok();
    }
    w.evctl_env(p, env, &["check", "--run"]).ok();
    repo
}

fn start(w: &World, repo: &Repo, env: &[(&str, &str)]) -> LspClient {
    let mut cmd = w.command(bin("evctl"));
    cmd.arg("lsp")
        .current_dir(repo.path())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut c = LspClient::spawn(cmd).expect("spawn evctl lsp");
    let caps = json!({"window": {"showDocument": {"support": true}}});
    let init = c
        .initialize(repo.path(), caps, json!({}))
        .expect("initialize answered");
    let commands = &init["result"]["capabilities"]["executeCommandProvider"]["commands"];
    assert_eq!(
        commands,
        &json!([
            "ev.check",
            "ev.checkRun",
            "ev.verify",
            "ev.decide",
            "ev.cite",
            "ev.reverify"
        ]),
        "{init}"
    );
    c
}

/// The next diagnostics published for `uri` whose first severity is `severity`.
fn diagnostics(c: &mut LspClient, uri: &str, severity: u64) -> Vec<Value> {
    let v = c
        .wait_for(WAIT, |v| {
            diagnostics_for(v, uri)
                .is_some_and(|d| d.first().and_then(|d| d["severity"].as_u64()) == Some(severity))
        })
        .unwrap_or_else(|| panic!("no diagnostics of severity {severity} for {uri}"));
    diagnostics_for(&v, uri).cloned().unwrap_or_default()
}

fn log_saying(c: &mut LspClient, what: &str) -> String {
    let v = c
        .wait_for(WAIT, |v| {
            v["method"] == "window/logMessage"
                && v["params"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(what))
        })
        .unwrap_or_else(|| panic!("no log message saying {what:?}"));
    v["params"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A `showMessage` saying `what`, received after `mark`.
fn shown_saying(c: &mut LspClient, mark: usize, what: &str) -> String {
    let v = c
        .since_or_wait(mark, Duration::from_secs(60), |v| {
            v["method"] == "window/showMessage"
                && v["params"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(what))
        })
        .unwrap_or_else(|| panic!("no message saying {what:?}"));
    v["params"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn tick_of(w: &World, repo: &Repo, decision: &str) -> String {
    let r = w.evctl(repo.path(), &["--json", "guards"]).ok();
    let v: Value = serde_json::from_str(r.stdout.trim()).expect("json");
    v["decisions"]
        .as_array()
        .and_then(|ds| ds.iter().find(|d| d["decision"] == decision))
        .and_then(|d| d["tick_id"].as_str())
        .expect("tick")
        .to_string()
}

#[test]
fn diagnostics_hover_actions_and_commands_through_the_daemon() {
    let w = World::new();
    let repo = setup(&w, &[]);
    let p = repo.path();
    let schema = file_uri(&p.join("db/schema.sql"));
    let routes = file_uri(&p.join("api/routes.rs"));
    let readme = file_uri(&p.join("README"));
    let mut c = start(&w, &repo, &[]);
    log_saying(&mut c, "evd pushes this store's verdict changes");

    // A literally named file gets its diagnostic unopened.
    let d = diagnostics(&mut c, &schema, 4);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["source"], "ev");
    assert_eq!(d[0]["code"], tick_of(&w, &repo, "freeze the schema"));
    assert!(d[0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("reads green — on the hook: Wang Yu — last run just now")));

    // A file under a directory trigger, once opened.
    c.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": routes, "languageId": "rust", "version": 1, "text": "fn main() {}\n"}}),
    );
    let d = diagnostics(&mut c, &routes, 4);
    assert!(d[0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("\"keep the api small\"")));

    // Hover and lenses on a guarded file; nothing on an unguarded one, but the action to record
    // a decision about it.
    let pos =
        |uri: &str| json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}});
    let h = c
        .call("textDocument/hover", pos(&routes), WAIT)
        .expect("hover");
    let md = h["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(
        md.contains("keep the api small") && md.contains("not taken: pgvector"),
        "{md}"
    );
    let h = c
        .call("textDocument/hover", pos(&readme), WAIT)
        .expect("hover");
    assert_eq!(h["result"], Value::Null, "{h}");
    let lenses = c
        .call(
            "textDocument/codeLens",
            json!({"textDocument": {"uri": schema}}),
            WAIT,
        )
        .expect("lenses");
    assert_eq!(
        lenses["result"].as_array().map(Vec::len),
        Some(3),
        "{lenses}"
    );
    let actions = c
        .call(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": readme},
                   "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                   "context": {"diagnostics": []}}),
            WAIT,
        )
        .expect("actions");
    // The cursor's line can be cited first, then a decision recorded about the file.
    let readme_text = std::fs::read(repo.path().join("README")).expect("README");
    let line_end = readme_text
        .iter()
        .position(|&b| b == b'\n')
        .map_or(readme_text.len(), |i| i + 1);
    assert_eq!(
        actions["result"][0]["title"],
        format!("ev: cite bytes 0-{line_end} of README as evidence").as_str(),
        "{actions}"
    );
    assert_eq!(
        actions["result"][1]["title"],
        "ev: record a decision about README…"
    );
    assert_eq!(
        actions["result"][1]["arguments"][0]["triggered_by"],
        json!(["README"])
    );

    // Malformed input is answered, never fatal.
    let bad = r#"{"jsonrpc":"2.0","id":99,"method":5}"#;
    c.send_raw(format!("Content-Length: {}\r\n\r\n{bad}", bad.len()).as_bytes());
    let r = c
        .response(99, WAIT)
        .expect("an answer to the malformed request");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    c.send_raw(b"Content-Length: 9\r\n\r\n{not json");
    log_saying(&mut c, "a malformed message was ignored");
    let r = c
        .call("textDocument/definition", pos(&schema), WAIT)
        .expect("answer");
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = c
        .call("textDocument/hover", json!({"textDocument": 5}), WAIT)
        .expect("answer");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = c
        .call(
            "workspace/executeCommand",
            json!({"command": "ev.nothing"}),
            WAIT,
        )
        .expect("answer");
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // Saving an edit to the guarded file reads `dirty` (0.1.32) as soon as it is on disk:
    // pushed, no request.
    std::fs::write(p.join("db/schema.sql"), "create table t(x int, y int);\n").expect("write");
    let t = Instant::now();
    let d = diagnostics(&mut c, &schema, 2);
    eprintln!("dirty after the save in {:?}", t.elapsed());
    assert!(
        d[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("reads dirty")),
        "{d:?}"
    );
    assert_eq!(d[0]["severity"], 2, "a warning: {d:?}");

    // A commit touching the trigger makes the schema's run stale: pushed, no request.
    git(p, &["commit", "-q", "-am", "touch the schema"]);
    let t = Instant::now();
    let d = diagnostics(&mut c, &schema, 2);
    eprintln!("stale after the commit in {:?}", t.elapsed());
    assert!(
        d[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("reads stale")),
        "{d:?}"
    );

    // Run that decision's tests from the editor: a fresh green receipt, here.
    let tick = tick_of(&w, &repo, "freeze the schema");
    let mark = c.mark();
    let r = c
        .call(
            "workspace/executeCommand",
            json!({"command": "ev.checkRun", "arguments": [{"tick": tick}]}),
            Duration::from_secs(60),
        )
        .expect("checkRun answered");
    assert_eq!(r["result"]["ran"], 1, "{r}");
    shown_saying(&mut c, mark, "ev: ran 1 test(s) here on platform local");
    c.since_or_wait(mark, WAIT, |v| {
        diagnostics_for(v, &schema).is_some_and(|d| d.first().is_some_and(|d| d["severity"] == 4))
    })
    .expect("green again");

    // Closing the directory-covered file clears it.
    c.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": routes}}),
    );
    c.wait_for(WAIT, |v| {
        diagnostics_for(v, &routes).is_some_and(Vec::is_empty)
    })
    .expect("cleared on close");

    // "Record a decision about this file": a draft the editor opens; saving it records.
    let mark = c.mark();
    let r = c
        .call(
            "workspace/executeCommand",
            json!({"command": "ev.decide", "arguments": [{"triggered_by": ["api/routes.rs"]}]}),
            WAIT,
        )
        .expect("decide answered");
    let draft = r["result"]["draft"]
        .as_str()
        .expect("a draft path")
        .to_string();
    let shown = c
        .since_or_wait(mark, WAIT, |v| v["method"] == "window/showDocument")
        .expect("asked to show the draft");
    assert_eq!(shown["params"]["uri"], file_uri(Path::new(&draft)));
    let text = std::fs::read_to_string(&draft).expect("draft");
    assert!(text.contains("--triggered-by api/routes.rs\n"), "{text}");
    let filled = text
        .replace(
            "<the decision, in one line>",
            "no new routes without review",
        )
        .replace("--assume \n", "--assume reviews catch route sprawl\n")
        .replace("--assume-test \n", "--assume-test true\n")
        .replace("--counter-test \n", "--counter-test false\n")
        .replace("--surface \n", "--surface routes\n");
    std::fs::write(&draft, filled).expect("save the draft");
    let said = shown_saying(&mut c, mark, "ev decide: recorded ");
    assert!(said.ends_with("(from the draft)"), "{said}");
    let list = w.evctl(p, &["list"]).ok().stdout;
    assert!(list.contains("\"no new routes without review\""), "{list}");
    assert!(!Path::new(&draft).exists(), "a recorded draft is removed");

    // shutdown, exit: a clean end.
    let r = c
        .call("shutdown", Value::Null, WAIT)
        .expect("shutdown answered");
    assert_eq!(r["result"], Value::Null);
    c.notify("exit", Value::Null);
    assert_eq!(c.exited(WAIT), Some(0));
}

#[test]
fn without_a_daemon_it_answers_in_process_and_polls() {
    let env = [("EVD_NO_DAEMON", "1")];
    let w = World::new();
    let repo = setup(&w, &env);
    let p = repo.path();
    let schema = file_uri(&p.join("db/schema.sql"));
    let mut c = start(&w, &repo, &env);
    log_saying(
        &mut c,
        "answering in-process and polling the store every second",
    );
    diagnostics(&mut c, &schema, 4);
    // Another process records a red receipt.
    std::fs::write(p.join("broken"), "").expect("write");
    w.evctl_env(p, &env, &["check", "--run"]).ok();
    let d = diagnostics(&mut c, &schema, 1);
    assert!(d[0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("reads red (gating)")));
    assert!(w.daemon_pid().is_none(), "no daemon was started");
    assert_eq!(c.finish(WAIT), Some(1), "no shutdown was asked for");
}

#[test]
fn a_restarted_daemon_is_followed() {
    let w = World::new();
    let repo = setup(&w, &[]);
    let p = repo.path();
    let schema = file_uri(&p.join("db/schema.sql"));
    let mut c = start(&w, &repo, &[]);
    log_saying(&mut c, "evd pushes");
    diagnostics(&mut c, &schema, 4);
    w.stop_daemon();
    log_saying(&mut c, "the evd watch stream ended");
    // The server does not start a daemon someone stopped: evd stays down until a command.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        w.daemon_pid().is_none(),
        "the language server restarted evd"
    );
    w.evctl(p, &["list"]).ok();
    log_saying(&mut c, "evd pushes this store's verdict changes");
    std::fs::write(p.join("broken"), "").expect("write");
    w.evctl(p, &["check", "--run"]).ok();
    diagnostics(&mut c, &schema, 1);
}

/// Every request gets an answer, whatever it lacks: an id without a method, a second
/// `initialize`; a frame whose `Content-Length` cannot be read ends the server with that said
/// on stderr (the framing is lost: nothing after it can be trusted), as docs/editors.md says.
#[test]
fn every_request_is_answered_and_lost_framing_is_said_on_stderr() {
    for bad_length in ["-5", "ten", ""] {
        let w = World::new();
        let repo = Repo::new();
        w.evctl(repo.path(), &["init"]).ok();
        let err = tempfile::NamedTempFile::new().expect("stderr file");
        let mut cmd = w.command(bin("evctl"));
        cmd.arg("lsp")
            .current_dir(repo.path())
            .stderr(err.reopen().expect("reopen"));
        let mut c = LspClient::spawn(cmd).expect("spawn evctl lsp");
        c.initialize(repo.path(), json!({}), json!({}))
            .expect("initialize answered");
        c.send_raw(b"Content-Length: 24\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":5}");
        let r = c
            .response(5, WAIT)
            .expect("an answer to an id without a method");
        assert_eq!(r["error"]["code"], -32600, "{r}");
        let again = c
            .call("initialize", json!({"capabilities": {}}), WAIT)
            .expect("an answer to a second initialize");
        assert_eq!(again["error"]["code"], -32600, "{again}");
        let header = if bad_length.is_empty() {
            "X-Other: 1\r\n\r\n{}".to_string()
        } else {
            format!("Content-Length: {bad_length}\r\n\r\n{{}}")
        };
        c.send_raw(header.as_bytes());
        assert_eq!(c.exited(WAIT), Some(1), "the server ends on lost framing");
        let said = std::fs::read_to_string(err.path()).expect("stderr");
        assert!(
            said.contains("evctl lsp:") && said.contains("Content-Length"),
            "{bad_length:?}: {said}"
        );
    }
}

/// A decision a commit made stale (the store reads staleness against the local HEAD) is offered
/// "re-verify … at HEAD" on the file it guards; the command runs its tests here and records it
/// verified at HEAD, and its diagnostic turns.
#[test]
fn a_decision_a_commit_made_stale_is_reverified_from_the_editor() {
    let w = World::new();
    let repo = setup(&w, &[]);
    let p = repo.path();
    let config = repo.ev_dir().join("config");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, text.replace("\"none\"", "\"local-head\"")).expect("config");
    std::fs::write(p.join(".gitignore"), ".evolving/results/\n").expect("gitignore");
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "decisions"]);
    std::fs::write(p.join("db/schema.sql"), "create table t(x int, y int);\n").expect("write");
    git(p, &["commit", "-q", "-am", "a column"]);
    let tick = tick_of(&w, &repo, "freeze the schema");
    let stale = w.evctl(p, &["check"]).ok();
    assert!(
        stale.stdout.contains(&format!("stale\t{tick}")),
        "{stale:?}"
    );

    let mut c = start(&w, &repo, &[]);
    let schema = file_uri(&p.join("db/schema.sql"));
    c.wait_for(WAIT, |v| {
        diagnostics_for(v, &schema).is_some_and(|d| {
            d.iter()
                .any(|d| d["message"].as_str().is_some_and(|m| m.contains("stale")))
        })
    })
    .expect("the stale decision's diagnostic");
    let actions = c
        .call(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": schema},
                   "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                   "context": {"diagnostics": []}}),
            WAIT,
        )
        .expect("actions");
    let offered = actions["result"]
        .as_array()
        .expect("actions")
        .iter()
        .find(|a| a["command"] == "ev.reverify")
        .cloned()
        .unwrap_or_else(|| panic!("no re-verify action: {actions}"));
    assert_eq!(
        offered["title"],
        "ev: re-verify \"freeze the schema\" at HEAD"
    );
    assert_eq!(offered["arguments"][0]["tick"], tick.as_str());

    let before = c.mark();
    let r = c
        .call(
            "workspace/executeCommand",
            json!({"command": "ev.reverify", "arguments": offered["arguments"]}),
            WAIT,
        )
        .expect("answer");
    let outcome = &r["result"]["outcomes"][0];
    assert_eq!(outcome["status"], "reverified", "{r}");
    let child = outcome["child_id"]
        .as_str()
        .expect("a child written")
        .to_string();
    shown_saying(&mut c, 0, "ev reverify: 1 decision(s) re-verified at HEAD");
    // The editor's diagnostic turns with no request of its own (published before the answer):
    // the child reads green.
    c.since_or_wait(before, WAIT, |v| {
        diagnostics_for(v, &schema).is_some_and(|d| {
            d.iter().any(|d| {
                d["message"].as_str().is_some_and(|m| {
                    m.contains(&format!("decision {child} ")) && m.contains("reads green")
                })
            })
        })
    })
    .expect("the re-verified decision's diagnostic, green");
    let green = w.evctl(p, &["check"]).ok();
    assert!(
        green.stdout.contains(&format!("green\t{child}")),
        "{green:?}"
    );
    assert_eq!(c.finish(WAIT), Some(1), "stdin closed without a shutdown");
}
