//! Turning answers into what ev prints: the plain bytes upstream writes, the rich terminal form,
//! and the `--json` form. Nothing here talks to the daemon.
//!
//! One file per output family, the same families as `verbs/`:
//!
//! - `out`: what a command prints, in order, on which stream, with its exit code; and the
//!   refusal every verb may end in;
//! - `store`: init, list, log, verify;
//! - `record`: decide, propose, supersede, guard, ratify, pending;
//! - `check`: check's rows, the evidence rows, the note after a `--run` that settled nothing;
//! - `recall`: brief, why, guards, reopen;
//! - `daemon`: status, and one `watch` line.
//!
//! This file is only the index: it declares the families and re-exports what the rest of evctl
//! uses. It must hold no code, so that no family ever imports it (they import `out` directly).

mod check;
mod daemon;
mod out;
mod recall;
mod record;
mod store;

pub use check::{check, check_with};
pub use daemon::{status, watch_line};
pub use out::{refusal, Out, Stream};
pub use recall::{brief, guards, reopen, why};
pub use record::{decide, guard, pending, propose, ratify, reverify, supersede};
pub use store::{doctor, init, list, list_plain, log, verify};
