//! Receipts beyond one machine, through git notes: [`publish`] (this host's receipts into the
//! notes ref, for the client to push), [`import`] (what a fetch brought, into
//! `results/receipts/`, which every evaluation catches up on first) and [`trust`] (whose
//! published receipts may turn a verdict). The git plumbing is [`crate::git::notes`]'s.

pub mod import;
pub mod publish;
pub mod trust;

pub use import::{catch_up, status};
pub use publish::publish;
pub use trust::trust;
