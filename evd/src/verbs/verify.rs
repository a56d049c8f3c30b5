//! `verify [--self-test]`: the chain audit over every tick file, or the frozen vectors.

use proto::golden;
use proto::rpc::{Refusal, VectorLine, VerifyResult, Warning};

use crate::store::Store;

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
    }
}

/// `verify`: audit every tick file, read fresh from disk. A missing store is
/// `reading store: <io error>` here (there is no no-store message).
pub fn verify(store: &Store, self_test_only: bool) -> Result<VerifyResult, Refusal> {
    if self_test_only {
        return Ok(self_test());
    }
    store.exists()?;
    let files = store.read_all_fresh()?;
    let audit = crate::audit::audit(&files, store.config().schema_version)
        .map_err(|e| Refusal::io(format!("reading store: {e}")))?;
    Ok(VerifyResult {
        violations: audit.violations,
        vectors: None,
        warnings: audit
            .warnings
            .into_iter()
            .map(|m| Warning {
                kind: "verify".into(),
                message: m,
            })
            .collect(),
        files: files.len(),
    })
}
