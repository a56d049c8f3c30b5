//! The pure engine: the model as evd holds it (packed ticks, interned texts, the current
//! view), verdicts, the audit, the lints, the write limits, receipts and event lines as data,
//! and the clock's one timestamp shape. Pure: it imports nothing else of evd and touches no
//! disk, git or socket.

pub mod audit;
pub mod clock;
pub mod events;
pub mod interned;
pub mod limits;
pub mod lint;
pub mod packed;
pub mod receipts;
pub mod verdict;
pub mod view;
