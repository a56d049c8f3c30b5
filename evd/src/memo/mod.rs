//! What evd remembers between requests so that a repeat is cheap: the check memo and the
//! verify memo, each reused only while the basis it was computed from provably holds.
//!
//! A memo never decides a verdict and never writes a store file: it remembers what the verbs
//! computed and says when that still holds. It imports `sys`, `engine`, `store` and `git` only.

pub mod check;
pub mod verify;
