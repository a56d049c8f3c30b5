//! The VS Code extension (contrib/vscode), packaged and checked: `scripts/package-vscode` runs
//! `npm ci`, checks package.json against what extension.js reads, type-checks extension.js and
//! packages the `.vsix`; then `evctl lsp` is started exactly as the activated extension would
//! start it (its command, arguments and options, read off extension.js by
//! contrib/vscode/test/launch.js, with VS Code's environment: the user's, `evctl` found on
//! `PATH`) and completes an initialize/diagnostics round trip with the extension's
//! initialization options. Without npm and node there is nothing to package: the test says so
//! and stops there.

use std::process::{Command, Stdio};
use std::time::Duration;

use evd_e2e::lsp_client::{diagnostics_for, file_uri, LspClient};
use evd_e2e::{bin, schema_decision, workspace_root, Repo, World};
use serde_json::{json, Value};

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_extension_is_packaged_and_starts_evctl_lsp_as_its_configuration_says() {
    if !have("npm") || !have("node") {
        eprintln!("skipped: npm and node are not installed, so the VS Code extension cannot be packaged here");
        return;
    }
    let root = workspace_root();
    let out = Command::new("bash")
        .arg(root.join("scripts/package-vscode"))
        .output()
        .expect("scripts/package-vscode");
    assert!(
        out.status.success(),
        "package-vscode failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("evctl-lsp.vsix (")
            && root.join("contrib/vscode/evctl-lsp.vsix").is_file(),
        "{out:?}"
    );

    // How the activated extension starts the server, with the default settings.
    let launch = Command::new("node")
        .arg(root.join("contrib/vscode/test/launch.js"))
        .arg("{}")
        .output()
        .expect("node test/launch.js");
    assert!(launch.status.success(), "{launch:?}");
    let l: Value = serde_json::from_slice(&launch.stdout).expect("launch JSON");
    assert_eq!(l["problems"], json!([]), "{l}");
    assert_eq!(l["documentSelector"], json!([{"scheme": "file"}]), "{l}");
    let command = l["command"].as_str().expect("command").to_string();
    let args: Vec<String> = l["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    assert_eq!(
        (command.as_str(), args.as_slice()),
        ("evctl", &["lsp".to_string()][..])
    );
    assert!(l["options"].is_null(), "no cwd or env of its own: {l}");

    // A repository with a decision guarding a file, as a user would open in VS Code.
    let w = World::new();
    let repo = Repo::new();
    let p = repo.path();
    schema_decision(&w, p, || {});
    w.evctl(p, &["check", "--run"]).ok();

    // VS Code spawns the command by name from its own environment: evctl is on PATH.
    let evctl_dir = bin("evctl")
        .parent()
        .expect("the binaries' directory")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        evctl_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = w.command(&command);
    cmd.args(&args)
        .env("PATH", path)
        .current_dir(p)
        .stderr(Stdio::null());
    let mut c = LspClient::spawn(cmd).expect("start the server as the extension does");
    let init = c
        .initialize(
            p,
            json!({"textDocument": {"publishDiagnostics": {}}}),
            l["initializationOptions"].clone(),
        )
        .expect("initialize answered");
    assert_eq!(init["result"]["serverInfo"]["name"], "evctl", "{init}");
    let schema = file_uri(&p.join("db/schema.sql"));
    let got = c
        .wait_for(Duration::from_secs(20), |v| {
            diagnostics_for(v, &schema).is_some_and(|d| !d.is_empty())
        })
        .expect("the guarded file's diagnostic");
    let d = &diagnostics_for(&got, &schema).expect("diagnostics")[0];
    assert!(
        d["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"freeze the schema\"") && m.contains("reads green")),
        "{d}"
    );
    c.call("shutdown", Value::Null, Duration::from_secs(10))
        .expect("shutdown answered");
    c.notify("exit", Value::Null);
    assert_eq!(c.finish(Duration::from_secs(10)), Some(0));
}
