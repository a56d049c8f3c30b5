//! One handler per verb: resolve what the caller knows, ask the session (daemon or in-process),
//! render the answer. `main.rs` dispatches each verb here; the handlers live one family a file:
//!
//! - `store`: init, show, list, log, verify (and the audit `verify --evidence` reuses);
//! - `record`: decide, propose, supersede, the verbs that read their own flag stream;
//! - `guard`: binding a test to a ground after the fact;
//! - `reverify`: getting decisions a commit made stale back to green, in one command;
//! - `proposals`: pending and ratify, an agent proposal's way to a human ruling;
//! - `check`: check, and the verdict context every verdict read needs;
//! - `check_run`: `check --run`, running the bound tests here and handing evd the receipts;
//! - `guards`: which decisions guard which files (also asked by the git hooks and the editor);
//! - `recall`: brief, why, reopen, reading decisions back;
//! - `daemon`: status, shutdown and watch, the verbs that talk to a running evd only;
//! - `answer`: reading back the answer files evd leaves in our runtime directory.
//!
//! This file is only the index: it declares the families and re-exports what the rest of evctl
//! calls. It must hold no code, so that no family ever imports it (they import each other
//! directly). Printing is render's; the wire and the in-process fallback are the session's.

mod answer;
mod check;
mod check_run;
mod daemon;
mod guard;
mod guards;
mod proposals;
mod recall;
mod record;
mod reverify;
mod store;

pub use check::{check, check_answer, verdict_context, CheckArgs};
pub use check_run::{run_tests, TestRun};
pub use daemon::{shutdown, status, watch};
pub use guard::{guard, GuardArgs};
pub use guards::{ask_guards, guards};
pub use proposals::{pending, ratify};
pub use recall::{brief, reopen, why};
pub use record::{decide, propose, supersede};
pub use reverify::{reverified, reverify, How, ReverifyArgs};
pub use store::{audit, doctor, init, list, log, show, verify};
