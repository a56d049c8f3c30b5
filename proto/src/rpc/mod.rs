//! The RPC contract between evctl (and editors) and evd: one `#[rpc]` trait, its wire types, and
//! the error envelope. Methods are named `ev.<verb>`; every call takes exactly one object.
//!
//! Everything that depends on the caller (which store, its working directory, git identity and
//! HEAD, the agent id) travels in [`Context`]; evd never reads them from its own environment.

//!
//! One file per family of methods; this index re-exports them all, so every type is
//! `proto::rpc::Name`. The trait itself is in [`methods`].

pub mod check;
pub mod context;
pub mod daemon;
pub mod errors;
pub mod evidence;
pub mod guards;
pub mod ledger;
pub mod methods;
pub mod migrate;
pub mod plain;
pub mod recall;
pub mod team;
pub mod verbs;
pub mod watch;
pub mod writers;

pub use check::*;
pub use context::*;
pub use daemon::*;
pub use errors::*;
pub use evidence::*;
pub use guards::*;
pub use ledger::*;
pub use methods::*;
pub use migrate::*;
pub use plain::*;
pub use recall::*;
pub use team::*;
pub use verbs::*;
pub use watch::*;
pub use writers::*;
