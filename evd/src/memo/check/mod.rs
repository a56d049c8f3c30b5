//! What makes a repeated `check` cheap: the last evaluations, each with the exact basis it was
//! computed from, reused only while that basis provably holds.
//!
//! A check's verdicts are a function of the current view (the tick cache's generation), the
//! receipts (the receipt cache's generation), the selected-list, the staleness reference and
//! policy, the attest set, HEAD (trigger liveness) and the clock (age-staleness). Every one of
//! those is re-established synchronously at the start of each request — inotify drains, a read
//! of `selected.json`, git facts — so a memo is never behind a change that finished before the
//! request arrived. The clock is handled by an expiry: the earliest instant any receipt could
//! cross the staleness window. Event lines are kept as templates and stamped with the time of
//! each check; state files are only rewritten when their verdicts change, and a state file
//! changed by anyone else is noticed (inotify on `results/state/`) and rewritten.
//!
//! Here by concern: [`memos`] (the basis and the memos kept by it), [`evaluation`] (one
//! evaluation and its renderings). The pure parts are the engine's, re-exported here under
//! the names callers know: a tick's part and its rows ([`crate::engine::rows`]), the trigger
//! index ([`crate::engine::triggers`]) and the event templates
//! ([`crate::engine::check_events`]). This file is an index: it declares and re-exports, and
//! holds no code its children use.

mod evaluation;
pub mod image;
mod memos;

pub use crate::engine::check_events::{EventTemplate, EventTemplates};
pub use crate::engine::rows::{
    fingerprint_of, receipt_key_number, CheckEvent, Row, Rows, SharedTexts, TestPart, TickPart,
    Triggered,
};
pub use crate::engine::triggers::{chosen, TriggerIndex};
pub use evaluation::Evaluation;
pub use memos::{Basis, Evaluated, Memos};
