//! `verify [--self-test]`: the chain audit over every tick file, or the frozen vectors.

use proto::golden;
use proto::rpc::{Refusal, VectorLine, VerifyResult, Warning};

use crate::open::OpenStore;

/// The four frozen vectors, as the wire reports them.
pub fn self_test() -> VerifyResult {
    VerifyResult {
        violations: Vec::new(),
        vectors: Some(
            golden::self_test()
                .into_iter()
                .map(|v| VectorLine {
                    pass: v.pass(),
                    name: v.name.to_string(),
                    got: v.got,
                    want: v.want.to_string(),
                })
                .collect(),
        ),
        warnings: Vec::new(),
        files: 0,
        reaudited: None,
    }
}

/// `verify`: audit every tick file, read fresh from disk (a daemon reads again only the files
/// that changed since its last audit, see [`crate::memo::verify`]). A missing store is
/// `reading store: <io error>` here (there is no no-store message).
pub fn verify(store: &mut OpenStore, self_test_only: bool) -> Result<VerifyResult, Refusal> {
    if self_test_only {
        return Ok(self_test());
    }
    store.exists()?;
    let schema_version = store.config().schema_version;
    let audited =
        crate::memo::verify::audit_store(&mut store.store, &mut store.verify_memo, schema_version)?;
    // Beyond upstream's audit: what no tick reader sees, but a writer would build on.
    let mut violations = audited.audit.violations;
    violations.extend(
        audited
            .odd
            .iter()
            .map(|(name, kind)| format!("{name}: {kind} in ticks/, not a tick file")),
    );
    match store.head() {
        Ok(head) => violations.extend(store.head_problem(&head).map(|p| format!("HEAD: {p}"))),
        Err(e) => violations.push(format!("HEAD: {}", e.message)),
    }
    Ok(VerifyResult {
        violations,
        vectors: None,
        warnings: audited
            .audit
            .warnings
            .into_iter()
            .map(|m| Warning {
                kind: "verify".into(),
                message: m,
            })
            .collect(),
        files: audited.files,
        reaudited: Some(audited.reaudited),
    })
}
