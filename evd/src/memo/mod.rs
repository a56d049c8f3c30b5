//! What evd remembers between requests so that a repeat is cheap: the check memo and the
//! verify memo, each reused only while the basis it was computed from provably holds.

pub mod check;
pub mod verify;
