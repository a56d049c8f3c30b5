//! The verbs, one module each, every one a function of an [`crate::open::OpenStore`] and a
//! request. The daemon's store actor and evctl's in-process fallback call exactly these
//! (through [`crate::api`]), so both give the same answers.
//!
//! A verb never reaches the socket or the daemon (it is called through [`crate::api`]), and never
//! writes a store file but through the store's appends, repairs and `results/` writers.

pub mod brief;
pub mod check;
pub mod common;
pub mod decide;
pub mod doctor;
pub mod evidence;
pub mod guard;
pub mod guards;
pub mod init;
pub mod ledger;
pub mod ledger_share;
pub mod list;
pub mod log;
pub mod migrate;
pub mod pending;
pub mod propose;
pub mod ratify;
pub mod receipts;
pub mod reopen;
pub mod reverify;
pub mod show;
pub mod supersede;
pub mod verify;
pub mod why;
pub mod write_path;

pub use brief::brief;
pub use check::check;
pub use decide::decide;
pub use doctor::doctor;
pub use guard::guard;
pub use guards::guards;
pub use init::init;
pub use list::list;
pub use log::log;
pub use pending::pending;
pub use propose::propose;
pub use ratify::ratify;
pub use reopen::reopen;
pub use reverify::reverify;
pub use show::show;
pub use supersede::supersede;
pub use verify::{self_test, verify};
pub use why::why;
