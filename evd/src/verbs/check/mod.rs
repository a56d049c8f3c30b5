//! `check`: evaluate every test binding of the current live view (commands §10, model §6), write
//! a state file per current tick, the cached origin sha and the events, and answer rows. evd never
//! executes a selector: `check --run` runs them in the caller and hands the receipts to
//! [`append_receipts`], after asking [`plan`] what to run.
//!
//! - [`basis`]: what the verdicts rest on (HEAD, the staleness reference, the selected-list);
//! - [`evaluate`]: the evaluation, reusing the memo made on the same basis;
//! - [`git_facts`]: git's answers one evaluation needs, asked once each;
//! - [`state`]: the state files of `results/state/`;
//! - [`answer`]: `check` answered, and the watcher's background re-evaluation;
//! - [`run`]: `check --run`'s plan and receipts.

pub mod answer;
pub mod basis;
pub mod evaluate;
pub mod git_facts;
pub mod run;
pub mod state;

pub use answer::{check, refresh_verdicts};
pub use basis::{WorkTree, NO_UPSTREAM_SAID, NO_UPSTREAM_WARNING};
pub use evaluate::{evaluated, evaluated_with, settle_state_files, Evaluated};
pub use run::{append_receipts, plan};
