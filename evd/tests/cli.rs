//! The evd binary's own command line (this also makes `cargo test` build the binary that the
//! end-to-end tests in tests/ drive).

use std::process::Command;

#[test]
fn version_and_where_answer_without_serving() {
    let out = Command::new(env!("CARGO_BIN_EXE_evd"))
        .arg("--version")
        .output()
        .expect("run evd");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("evd {}", env!("CARGO_PKG_VERSION"))
    );
    let rt = tempfile::tempdir().expect("tmp");
    let out = Command::new(env!("CARGO_BIN_EXE_evd"))
        .arg("where")
        .env("EVD_RUNTIME_DIR", rt.path())
        .output()
        .expect("run evd");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        rt.path().join("evd.sock").display().to_string()
    );
}
