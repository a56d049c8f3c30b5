//! `evctl lsp` under a second real editor: Emacs with eglot (Debian's `emacs-nox` and
//! `elpa-eglot`, which `.ci/run` installs), headless (`emacs --batch`), configured exactly as
//! docs/editors.md says. It opens a file a decision guards, receives the diagnostic (through
//! flymake, as a user sees it), hovers, is offered the re-verify code action for a decision a
//! commit made stale and runs it through eglot (its diagnostic turns green), runs `ev.check`,
//! and sees the diagnostic turn red after another process's `check --run`, with no request of
//! its own.

use std::process::Stdio;
use std::time::{Duration, Instant};

use evd_e2e::{bin, git, schema_decision, wait_until, Repo, World};
use serde_json::Value;

/// Emacs, with eglot loadable (built in from Emacs 29; Debian 12's `elpa-eglot` before).
fn emacs() -> String {
    let out = std::process::Command::new("emacs")
        .args(["--batch", "-q", "--eval", "(require 'eglot)"])
        .output();
    assert!(
        out.as_ref().is_ok_and(|o| o.status.success()),
        "emacs with eglot is required for this test (Debian: `apt-get install emacs-nox \
         elpa-eglot`; .ci/run installs them): {out:?}"
    );
    "emacs".into()
}

/// An Emacs Lisp string literal.
fn el_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The configuration docs/editors.md gives, with the evctl under test.
fn config(evctl: &str) -> String {
    let page = std::fs::read_to_string(evd_e2e::workspace_root().join("docs/editors.md"))
        .expect("docs/editors.md");
    let start = page
        .find(";; evctl-eglot-begin")
        .expect("docs/editors.md holds the eglot configuration");
    let end = page[start..]
        .find(";; evctl-eglot-end")
        .expect("the configuration's end marker")
        + start;
    page[start..end].replace("\"evctl\"", &el_str(evctl))
}

const SCRIPT: &str = r#"
(require 'eglot)
(require 'flymake)
(require 'json)
(setq eglot-sync-connect t eglot-connect-timeout 30 eglot-autoreconnect nil)
(defvar ev-out nil)
(defun ev-put (key value) (setq ev-out (cons (cons key value) ev-out)))
(defun ev-save (path)
  (with-temp-file path (insert (json-encode ev-out))))
(defun ev-diags ()
  (flymake-start)
  (mapcar (lambda (d) (list (cons 'type (symbol-name (flymake-diagnostic-type d)))
                            (cons 'text (flymake-diagnostic-text d))))
          (flymake-diagnostics)))
(defun ev-wait (secs pred)
  "Wait up to SECS seconds, serving eglot, until PRED holds of the diagnostics."
  (let ((deadline (+ (float-time) secs)) (found nil))
    (while (and (not found) (< (float-time) deadline))
      (accept-process-output nil 0.05)
      (setq found (funcall pred (ev-diags))))
    found))
(defun ev-saying (text)
  (lambda (ds) (seq-find (lambda (d) (string-match-p (regexp-quote text) (alist-get 'text d))) ds)))
(condition-case err
    (progn
      (find-file (concat REPO "/db/schema.sql"))
      (eglot-ensure)
      (unless (eglot-current-server) (apply #'eglot (eglot--guess-contact)))
      (ev-put 'mode (symbol-name major-mode))
      ;; 1. The stale decision's diagnostic arrives by itself.
      (ev-put 'stale (ev-wait 20 (ev-saying "reads stale")))
      (let ((server (eglot-current-server)))
        ;; 2. Hover.
        (ev-put 'hover (plist-get (plist-get (jsonrpc-request server :textDocument/hover
                                   (list :textDocument (eglot--TextDocumentIdentifier)
                                         :position (list :line 0 :character 0)))
                                  :contents) :value))
        ;; 3. The code actions offered at the top of the file; re-verify run through eglot.
        (let* ((actions (jsonrpc-request server :textDocument/codeAction
                          (list :textDocument (eglot--TextDocumentIdentifier)
                                :range (list :start (list :line 0 :character 0)
                                             :end (list :line 0 :character 0))
                                :context (list :diagnostics []))))
               (reverify (seq-find (lambda (a) (equal (plist-get a :command) "ev.reverify"))
                                   actions)))
          (ev-put 'actions (vconcat (mapcar (lambda (a) (plist-get a :title)) actions)))
          (when reverify
            (ev-put 'reverified
                    (eglot-execute-command server "ev.reverify" (plist-get reverify :arguments)))))
        (ev-put 'green (ev-wait 20 (ev-saying "reads green")))
        ;; 4. ev.check, as the command a user runs.
        (ev-put 'check (eglot-execute-command server "ev.check" [])))
      (ev-save PHASE1)
      ;; 5. Another process records a red receipt: the diagnostic turns into an error.
      (ev-put 'red (ev-wait 60 (lambda (ds) (seq-find (lambda (d) (equal (alist-get 'type d) "eglot-error")) ds))))
      (ev-put 'count (length (ev-diags))))
  (error (ev-put 'error (format "%S" err))))
(ev-save RESULT)
(kill-emacs 0)
"#;

#[test]
fn emacs_eglot_shows_live_verdicts_and_runs_the_code_actions() {
    let emacs = emacs();
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    // Staleness against the local HEAD: a commit touching the schema makes the decision stale.
    let id = schema_decision(&w, p, || {
        let config_path = p.join(".evolving/config");
        let text = std::fs::read_to_string(&config_path).expect("config");
        std::fs::write(
            &config_path,
            text.replace("\"live-origin\"", "\"local-head\""),
        )
        .expect("config");
        std::fs::write(p.join(".gitignore"), ".evolving/results/\n").expect("gitignore");
    });
    w.evctl(p, &["check", "--run"]).ok();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "the decision"]);
    std::fs::write(p.join("db/schema.sql"), "create table t(x int, y int);\n").expect("write");
    git(p, &["commit", "-q", "-am", "a column"]);
    let stale = w.evctl(p, &["check"]).ok();
    assert!(stale.stdout.contains(&format!("stale\t{id}")), "{stale:?}");

    let work = tempfile::tempdir().expect("tempdir");
    let phase1 = work.path().join("phase1.json");
    let result = work.path().join("result.json");
    let script = work.path().join("test.el");
    let head = format!(
        ";; -*- lexical-binding: t -*-\n(defvar REPO {})\n(defvar PHASE1 {})\n(defvar RESULT {})\n",
        el_str(&p.display().to_string()),
        el_str(&phase1.display().to_string()),
        el_str(&result.display().to_string()),
    );
    std::fs::write(
        &script,
        head + &config(&bin("evctl").display().to_string()) + SCRIPT,
    )
    .expect("script");
    let mut child = w
        .command(&emacs)
        .current_dir(p)
        .args(["--batch", "-q", "-l"])
        .arg(&script)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start emacs");
    let waited = wait_until(Duration::from_secs(90), || {
        phase1.exists() || matches!(child.try_wait(), Ok(Some(_)))
    }) && phase1.exists();
    if waited {
        // Another process: make the test fail and record a red receipt.
        std::fs::write(p.join("broken"), "").expect("write");
        w.evctl(p, &["check", "--run"]).ok();
    }
    let limit = Instant::now() + Duration::from_secs(120);
    while Instant::now() < limit && !matches!(child.try_wait(), Ok(Some(_))) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if !matches!(child.try_wait(), Ok(Some(_))) {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("emacs output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = std::fs::read_to_string(&result)
        .unwrap_or_else(|e| panic!("emacs wrote no result ({e}); stderr:\n{stderr}"));
    let v: Value = serde_json::from_str(&text).expect("result is JSON");
    assert!(v.get("error").is_none(), "{v}\n{stderr}");
    assert!(waited, "emacs never reached its first phase: {v}\n{stderr}");

    // 1. The stale decision, through flymake, as a warning.
    assert_eq!(v["mode"], "sql-mode", "{v}");
    assert_eq!(v["stale"]["type"], "eglot-warning", "{v}");
    let msg = v["stale"]["text"].as_str().unwrap_or_default();
    assert!(
        msg.contains("\"freeze the schema\"") && msg.contains("on the hook: Wang Yu"),
        "{msg}"
    );
    // 2. Hover: the decision, its verdict, the road not taken.
    let hover = v["hover"].as_str().unwrap_or_default();
    assert!(
        hover.contains("freeze the schema")
            && hover.contains("not taken: pgvector — it locks the schema"),
        "{hover}"
    );
    // 3. Re-verify offered and run through eglot: the decision reads green again.
    let actions: Vec<&str> = v["actions"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        actions.contains(&"ev: re-verify \"freeze the schema\" at HEAD"),
        "{actions:?}"
    );
    assert_eq!(
        v["reverified"]["outcomes"][0]["status"], "reverified",
        "{v}"
    );
    let child = v["reverified"]["outcomes"][0]["child_id"]
        .as_str()
        .unwrap_or_default();
    // 4. ev.check answered: the re-verified decision reads green.
    assert_eq!(v["check"]["tally"]["gating"], 0, "{v}");
    assert!(
        v["check"]["rows"]
            .as_str()
            .is_some_and(|r| r.starts_with(&format!("green\t{child}\t"))),
        "{v}"
    );
    // 5. Red after the outside receipt, with no request from the editor.
    assert_eq!(v["red"]["type"], "eglot-error", "{v}");
    assert!(
        v["red"]["text"]
            .as_str()
            .is_some_and(|m| m.contains("reads red (gating)")),
        "{v}"
    );
    assert_eq!(v["count"], 1, "one diagnostic per decision: {v}");
}
