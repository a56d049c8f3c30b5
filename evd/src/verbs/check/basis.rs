//! What a check's verdicts rest on besides the ticks and receipts: HEAD, the staleness
//! reference (and its warning), the selected-list and policy, gathered into a [`Basis`]; a check
//! whose git children overran is refused rather than answered from half the facts.

use std::path::Path;

use proto::model::is_40_lower_hex;
use proto::rpc::{CheckRequest, Refusal, Warning};

use crate::memo::check::Basis;
use crate::open::OpenStore;
use crate::store::results::{cached_origin, read_selected};
use crate::sys::fsio;

/// The warning when the live-origin reference cannot be resolved.
pub const NO_UPSTREAM_WARNING: &str = "warning: cannot resolve the live-origin staleness reference (no upstream?) — sha-staleness skipped";

/// The file under `results/` saying that [`NO_UPSTREAM_WARNING`] was said for this store: it is
/// said once, not on every check (a repository without a remote would hear it forever), and
/// again once an upstream was resolved and lost. `evctl status` names it while it holds.
pub const NO_UPSTREAM_SAID: &str = "evd-no-upstream";

/// The repository's HEAD commit, as evd sees it (`None` outside git): `git rev-parse --verify
/// -q HEAD`, through the store's cache of git's answers.
pub fn git_head(facts: &mut crate::git::facts::FactCache, root: &Path) -> Option<String> {
    facts
        .answer(root, crate::git::facts::Query::Head)
        .filter(|s| is_40_lower_hex(s))
}

/// Resolve the staleness reference (§10.3); caches a resolved live-origin sha.
/// With `record` (a real `check`), a resolved live-origin sha is cached to `results/origin-sha`;
/// a background re-evaluation leaves that cache alone.
pub(super) fn staleness_reference(
    store: &OpenStore,
    req: &CheckRequest,
    policy: &str,
    warnings: &mut Vec<Warning>,
    record: bool,
) -> Option<String> {
    let results = store.results_dir();
    if req.offline {
        return cached_origin(&results);
    }
    match policy {
        "none" => None,
        "local-head" => req.context.git.head.clone().filter(|h| is_40_lower_hex(h)),
        _ => match req
            .context
            .git
            .upstream
            .clone()
            .filter(|u| is_40_lower_hex(u))
        {
            Some(sha) => {
                // Rewritten only when it moves: the cache is read far more often than it changes.
                let moved = cached_origin(&results).as_deref() != Some(sha.as_str());
                if record && moved && fsio::ensure_dir(&results).is_ok() {
                    let _ = fsio::replace_unsynced(&results.join("origin-sha"), sha.as_bytes());
                }
                if record {
                    let said = results.join(NO_UPSTREAM_SAID);
                    if std::fs::symlink_metadata(&said).is_ok_and(|m| m.is_file()) {
                        let _ = std::fs::remove_file(&said);
                    }
                }
                Some(sha)
            }
            None => {
                let said = results.join(NO_UPSTREAM_SAID);
                if !std::fs::symlink_metadata(&said).is_ok_and(|m| m.is_file()) {
                    warnings.push(Warning {
                        kind: "staleness_ref".into(),
                        message: NO_UPSTREAM_WARNING.into(),
                    });
                    if record && results.is_dir() {
                        let _ = fsio::replace_unsynced(&said, NO_UPSTREAM_WARNING.as_bytes());
                    }
                }
                None
            }
        },
    }
}

/// How much of the work tree a request has looked at.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WorkTree {
    /// Ask it (through the watches, else git): every answer but a pre-commit gate's.
    Look,
    /// Take the last answer git gave at this HEAD, when there is one, without looking at what
    /// changed since: for a request whose only use of the work tree is green against `dirty`
    /// for paths it names itself (see [`crate::verbs::guards`]). Only ever used to find an
    /// evaluation already made: one made on such a basis would be kept and written out.
    LastKnown,
}

/// What the verdicts rest on right now, re-established from the disk and git: everything a
/// remembered evaluation must match to be reused. With [`WorkTree::LastKnown`], the second
/// value says whether the work tree's part is the last known answer (not looked at now).
pub(super) fn basis(
    store: &mut OpenStore,
    offline: bool,
    attest: Option<Vec<String>>,
    config: &crate::store::config::Config,
    reference: Option<String>,
    work: WorkTree,
) -> Result<(Basis, bool), Refusal> {
    let t0 = std::time::Instant::now();
    store.refresh()?;
    let t1 = t0.elapsed();
    // Receipts a fetch brought through git land in results/receipts/ before they are read.
    let said = crate::verbs::receipts::catch_up(store, config);
    if store.import_warnings.len() < 20 {
        store.import_warnings.extend(said);
    }
    store.receipts.sync();
    let t2 = t0.elapsed();
    if store.results_dir().join("state").is_dir() {
        store.state_watch.ensure(&mut store.state_written);
    }
    let state = store.state_watch.sync(&mut store.state_written);
    let t3 = t0.elapsed();
    let root = store.root().to_path_buf();
    let head = git_head(&mut store.git, &root);
    if let Some(h) = &head {
        store.read_head_tree_ahead(h);
    }
    let t4 = t0.elapsed();
    let guarded = store.guarded_paths()?;
    let t5 = t0.elapsed();
    let known = match work {
        WorkTree::LastKnown => store.worktree.last_known(head.as_deref(), &guarded),
        WorkTree::Look => None,
    };
    let last_known = known.is_some();
    let uncommitted = match known {
        Some(u) => u,
        None => store.uncommitted_and_ranges(head.as_deref(), &guarded),
    };
    let t6 = t0.elapsed();
    let (evidence, changes) = crate::ledger::evidence::sync(&mut store.store, &mut store.evidence)?;
    store.note_changes(changes);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    tracing::debug!(
        ticks = ms(t1),
        receipts = ms(t2),
        state = ms(t3),
        head = ms(t4),
        guarded = ms(t5),
        uncommitted = ms(t6),
        evidence = ms(t0.elapsed()),
        "check basis (ms, cumulative)"
    );
    let basis = Basis {
        offline,
        attest,
        policy: config.staleness_ref.clone(),
        staleness_days: config.staleness_days,
        reference,
        selected: read_selected(&store.results_dir()),
        head,
        uncommitted,
        ticks: store.ticks_generation(),
        receipts: store.receipts.generation(),
        state,
        evidence,
    };
    Ok((basis, last_known))
}

/// When a git child overran during this evaluation, its verdicts rest on facts that could not be
/// learnt: refuse, keep nothing, and say what hung.
pub(super) fn refuse_on_git_timeouts(store: &mut OpenStore) -> Result<(), Refusal> {
    let timeouts = crate::sys::child::take_timeouts();
    let Some(first) = timeouts.first() else {
        return Ok(());
    };
    store.memos.clear();
    store.forget_ranges();
    std::mem::take(&mut store.pending_changes);
    Err(Refusal::io(format!(
        "git did not answer in time: `{first}` ran past {} s and was stopped{}, so the verdicts \
         that depend on it are unknown — look for a hung filesystem, a FIFO or a stale lock in \
         the repository, then check again",
        crate::sys::child::git_timeout().as_secs_f32(),
        if timeouts.len() > 1 {
            format!(" ({} git commands in all)", timeouts.len())
        } else {
            String::new()
        }
    )))
}
