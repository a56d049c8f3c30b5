//! `evctl lsp` under a real editor: Neovim's built-in LSP client (headless, Debian's package,
//! `.ci/run` installs it) opens a guarded file, receives the diagnostic, sees it turn red after
//! another process records a red receipt, hovers, and runs the server's commands.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use evd_e2e::{bin, git, schema_decision, wait_until, Repo, World};
use serde_json::Value;

fn nvim() -> String {
    let found = std::process::Command::new("nvim")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "nvim is required for this test (Debian: `apt-get install neovim`; .ci/run installs it)"
    );
    "nvim".into()
}

/// CLOCK_MONOTONIC in milliseconds: the clock of Neovim's `vim.loop.hrtime()`.
fn millis_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6
}

/// A Lua string literal (long brackets cannot be closed by a path).
fn lua_str(s: &str) -> String {
    format!("[==[{s}]==]")
}

/// Run Neovim headless on `script` (given `EVCTL`, `REPO`, `PHASE1` and `RESULT`) in the
/// repository at `p`; once the script has written `PHASE1` (it has seen `first`), run `then`,
/// another process's doing. Returns what the script wrote to `RESULT`, which must not hold an
/// `error`.
fn run_nvim(w: &World, p: &Path, script: &str, first: &str, then: impl FnOnce()) -> Value {
    let nvim = nvim();
    let work = tempfile::tempdir().expect("tempdir");
    let phase1 = work.path().join("phase1.json");
    let result = work.path().join("result.json");
    let file = work.path().join("script.lua");
    let head = format!(
        "local EVCTL = {}\nlocal REPO = {}\nlocal PHASE1 = {}\nlocal RESULT = {}\n",
        lua_str(&bin("evctl").display().to_string()),
        lua_str(&p.display().to_string()),
        lua_str(&phase1.display().to_string()),
        lua_str(&result.display().to_string()),
    );
    std::fs::write(&file, head + PRELUDE + script + EPILOGUE).expect("write script");
    let mut child = w
        .command(&nvim)
        .current_dir(p)
        .args(["--headless", "--clean", "-n", "-i", "NONE", "-c"])
        .arg(format!("luafile {}", file.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nvim");
    let limit = Instant::now() + Duration::from_secs(150);
    let waited = wait_until(Duration::from_secs(60), || phase1.exists());
    if waited {
        then();
    }
    while Instant::now() < limit && !matches!(child.try_wait(), Ok(Some(_))) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if !matches!(child.try_wait(), Ok(Some(_))) {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("nvim output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(waited, "nvim never saw {first}; stderr:\n{stderr}");
    let text = std::fs::read_to_string(&result)
        .unwrap_or_else(|e| panic!("nvim wrote no result ({e}); stderr:\n{stderr}"));
    let v: Value = serde_json::from_str(&text).expect("result is JSON");
    assert!(v.get("error").is_none(), "the script failed: {v}");
    v
}

/// What every script starts with: `out` (written as JSON by `save`), and `open(path)`, which
/// starts `evctl lsp` (its shown messages collected in `out.shown`) and opens a file of the
/// repository with the client attached, returning the client's id and the buffer.
const PRELUDE: &str = r#"
local out = {shown = {}}
local function save(path)
  vim.fn.writefile({vim.fn.json_encode(out)}, path)
end
local function open(path)
  local id = vim.lsp.start_client({
    name = 'ev',
    cmd = {EVCTL, 'lsp'},
    root_dir = REPO,
    handlers = {
      ['window/showMessage'] = function(_, result)
        table.insert(out.shown, result.message)
      end,
    },
  })
  assert(id, 'the client did not start')
  vim.cmd('edit ' .. vim.fn.fnameescape(REPO .. path))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(bufnr, id)
  return id, bufnr
end
"#;

/// What every script ends with (its body sets `ok`, `err` from a `pcall`).
const EPILOGUE: &str = r#"
if not ok then out.error = tostring(err) end
save(RESULT)
vim.cmd('qa!')
"#;

const SCRIPT: &str = r#"
local function now_ms()
  return vim.loop.hrtime() / 1e6
end
local function worst(bufnr)
  local ds = vim.diagnostic.get(bufnr)
  if #ds == 0 then return nil end
  return ds[1]
end
local ok, err = pcall(function()
  local id, bufnr = open('/db/schema.sql')
  -- 1. The green diagnostic arrives by itself.
  vim.wait(20000, function()
    local d = worst(bufnr)
    return d ~= nil and d.severity == vim.diagnostic.severity.HINT
  end, 10)
  local d = worst(bufnr)
  out.first = d and {severity = d.severity, message = d.message, source = d.source} or vim.NIL
  save(PHASE1)
  -- 2. Another process records a red receipt: the diagnostic turns into an error.
  local turned = vim.wait(60000, function()
    local d = worst(bufnr)
    return d ~= nil and d.severity == vim.diagnostic.severity.ERROR
  end, 5)
  out.turned_at = now_ms()
  d = worst(bufnr)
  out.turned = turned
  out.second = d and {severity = d.severity, message = d.message} or vim.NIL
  out.count = #vim.diagnostic.get(bufnr)
  local client = vim.lsp.get_client_by_id(id)
  -- 3. Hover.
  local h = client.request_sync('textDocument/hover', {
    textDocument = {uri = vim.uri_from_bufnr(bufnr)},
    position = {line = 0, character = 0},
  }, 20000, bufnr)
  out.hover = h and h.result and h.result.contents.value or vim.NIL
  -- 4. Commands through workspace/executeCommand.
  local function run(command, arg)
    local r = client.request_sync('workspace/executeCommand',
      {command = command, arguments = {arg}}, 60000, bufnr)
    if r == nil then return {timeout = true} end
    return {result = r.result or vim.NIL, err = r.err or vim.NIL}
  end
  out.check = run('ev.check', vim.empty_dict())
  out.verify = run('ev.verify', vim.empty_dict())
  out.decide = run('ev.decide', {args = {'log every schema change', '--assume', 'audits need it', '--blame', 'Wang Yu'}})
  out.unknown = run('ev.nothing', vim.empty_dict())
  local lenses = client.request_sync('textDocument/codeLens',
    {textDocument = {uri = vim.uri_from_bufnr(bufnr)}}, 20000, bufnr)
  out.lenses = {}
  for _, l in ipairs(lenses and lenses.result or {}) do
    table.insert(out.lenses, l.command.title)
  end
  vim.wait(2000, function() return #out.shown >= 3 end, 10)
end)
"#;

#[test]
fn neovim_shows_live_verdicts_and_runs_the_commands() {
    nvim();
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    schema_decision(&w, p, || {});
    w.evctl(p, &["check", "--run"]).ok();

    let mut red_done = 0.0;
    let v = run_nvim(&w, p, SCRIPT, "the first diagnostic", || {
        // Another process: make the test fail and record a red receipt.
        std::fs::write(p.join("broken"), "").expect("write");
        w.evctl(p, &["check", "--run"]).ok();
        red_done = millis_now();
    });

    // 1. Green, as a hint, naming decision, ground, blame and the run.
    let first = &v["first"];
    assert_eq!(first["severity"], 4, "{v}");
    let msg = first["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("\"freeze the schema\"")
            && msg.contains("ground \"the schema is stable\" reads green")
            && msg.contains("on the hook: Wang Yu")
            && msg.contains("last run just now at "),
        "{msg}"
    );
    assert_eq!(first["source"], "ev");

    // 2. Red after the outside receipt, with no request from the editor.
    assert_eq!(v["turned"], true, "{v}");
    assert_eq!(v["second"]["severity"], 1, "{v}");
    assert!(
        v["second"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("reads red (gating)")),
        "{v}"
    );
    assert_eq!(v["count"], 1, "one diagnostic per decision: {v}");
    let seen = v["turned_at"].as_f64().unwrap_or(0.0);
    eprintln!(
        "neovim saw the red diagnostic {:.0} ms after `evctl check --run` returned",
        (seen - red_done).max(0.0)
    );

    // 3. The hover lists the decision, its verdict and the road not taken.
    let hover = v["hover"].as_str().unwrap_or_default();
    assert!(hover.contains("freeze the schema"), "{hover}");
    assert!(hover.contains("**red** (gating)"), "{hover}");
    assert!(
        hover.contains("not taken: pgvector — it locks the schema"),
        "{hover}"
    );

    // 4. Commands: check, verify, decide; an unknown one is refused.
    assert_eq!(v["check"]["result"]["tally"]["gating"], 1, "{v}");
    assert_eq!(v["verify"]["result"]["ok"], true, "{v}");
    assert_eq!(v["decide"]["result"]["ok"], true, "{v}");
    assert!(
        v["decide"]["result"]["stdout"]
            .as_str()
            .is_some_and(|s| s.starts_with("recorded ")),
        "{v}"
    );
    assert!(v["unknown"]["err"].is_object(), "{v}");
    let list = w.evctl(p, &["list"]).ok().stdout;
    assert!(list.contains("\"log every schema change\""), "{list}");
    let shown: Vec<&str> = v["shown"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        shown.iter().any(|m| m.starts_with("ev check: 1 gating")),
        "{shown:?}"
    );
    assert!(
        shown.iter().any(|m| m.starts_with("ev decide: recorded ")),
        "{shown:?}"
    );
    let lenses: Vec<&str> = v["lenses"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        lenses,
        vec![
            "ev: red — freeze the schema · run its tests",
            "ev: check now",
            "ev: verify the store"
        ]
    );
}

const EVIDENCE_SCRIPT: &str = r#"
local function evidence(bufnr)
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.message:find('evidence of decision', 1, true) then return d end
  end
  return nil
end
local function said(d)
  if d == nil then return vim.NIL end
  return {severity = d.severity, message = d.message, lnum = d.lnum, col = d.col,
          end_lnum = d.end_lnum, end_col = d.end_col}
end
local ok, err = pcall(function()
  local id, bufnr = open('/bench/p99.txt')
  -- 1. The citation shows at its span, holding.
  vim.wait(20000, function()
    local d = evidence(bufnr)
    return d ~= nil and d.severity == vim.diagnostic.severity.HINT
  end, 10)
  out.holds = said(evidence(bufnr))
  save(PHASE1)
  -- 2. Another process edits the cited line: it drifts, with no request from the editor.
  out.turned = vim.wait(60000, function()
    local d = evidence(bufnr)
    return d ~= nil and d.severity == vim.diagnostic.severity.ERROR
  end, 5)
  out.drifted = said(evidence(bufnr))
  local client = vim.lsp.get_client_by_id(id)
  -- 3. Cite the cursor's line, then a selection, through the code action's command.
  local function cite(range)
    local r = client.request_sync('textDocument/codeAction', {
      textDocument = {uri = vim.uri_from_bufnr(bufnr)},
      range = range,
      context = {diagnostics = {}},
    }, 20000, bufnr)
    for _, a in ipairs(r and r.result or {}) do
      if a.command == 'ev.cite' then
        local x = client.request_sync('workspace/executeCommand',
          {command = a.command, arguments = a.arguments}, 20000, bufnr)
        return {title = a.title, result = x and x.result or vim.NIL, err = x and x.err or vim.NIL}
      end
    end
    return vim.NIL
  end
  out.line = cite({start = {line = 0, character = 2}, ['end'] = {line = 0, character = 2}})
  out.selection = cite({start = {line = 1, character = 4}, ['end'] = {line = 1, character = 7}})
  vim.wait(2000, function() return #out.shown >= 2 end, 10)
end)
"#;

/// Neovim shows each citation of a current decision at its span (a hint while it holds, an error
/// once a user-ruled decision's evidence drifts, with no request from the editor), and "cite …
/// as evidence" gives the same marker `evctl cite` does.
#[test]
fn neovim_shows_evidence_at_its_span_and_cites_the_selection() {
    nvim();
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    std::fs::create_dir_all(p.join("bench")).expect("mkdir");
    std::fs::write(p.join("bench/p99.txt"), "p50 3.1 ms\np99 4.8 ms\n").expect("write");
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "bench"]);
    w.evctl(p, &["init"]).ok();
    let marker = w.evctl(p, &["cite", "bench/p99.txt:2"]).ok().stdout;
    let claim = format!("p99 stays under 5 ms {}", marker.trim_end());
    let id = w
        .evctl(
            p,
            &[
                "decide",
                "keep the queue shallow",
                "--assume",
                &claim,
                "--authority",
                "user-ruled",
                "--blame",
                "Wang Yu",
            ],
        )
        .ok()
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("id")
        .to_string();
    w.evctl(p, &["check"]).ok();
    // The edit another process makes while the editor looks: the cited line's digits change.
    let edited = "p50 3.1 ms\np99 5.9 ms\n";

    let v = run_nvim(&w, p, EVIDENCE_SCRIPT, "the citation", || {
        std::fs::write(p.join("bench/p99.txt"), edited).expect("edit");
    });

    // 1. At the cited span (line 2 of the file: 0-based line 1, through the newline), holding.
    let holds = &v["holds"];
    assert_eq!(holds["severity"], 4, "{v}");
    assert_eq!(
        (
            &holds["lnum"],
            &holds["col"],
            &holds["end_lnum"],
            &holds["end_col"]
        ),
        (
            &Value::from(1),
            &Value::from(0),
            &Value::from(2),
            &Value::from(0)
        ),
        "{v}"
    );
    let msg = holds["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with(&format!(
            "evidence of decision {id} \"keep the queue shallow\" — ground 0: holds"
        )),
        "{msg}"
    );
    // 2. Drifted after the outside edit; user-ruled, so an error.
    assert_eq!(v["turned"], true, "{v}");
    let drifted = v["drifted"]["message"].as_str().unwrap_or_default();
    assert!(
        drifted.contains("ground 0: drifted (gating) — bytes 11-22: its bytes changed"),
        "{v}"
    );
    // 3. The cursor's line and a selection, cited as `evctl cite` would.
    let cli = |args: &[&str]| w.evctl(p, args).ok().stdout.trim_end().to_string();
    assert_eq!(
        v["line"]["title"], "ev: cite bytes 0-11 of bench/p99.txt as evidence",
        "{v}"
    );
    assert_eq!(
        v["line"]["result"]["marker"],
        cli(&["cite", "bench/p99.txt:1"]).as_str(),
        "{v}"
    );
    assert_eq!(
        v["selection"]["result"]["marker"],
        cli(&["cite", "bench/p99.txt", "--bytes", "15-18"]).as_str(),
        "{v}"
    );
    let shown: Vec<&str> = v["shown"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        shown
            .iter()
            .any(|m| m.starts_with("ev cite: [evidence:bench/p99.txt:0-11:")),
        "{shown:?}"
    );
}
