//! The pure engine: the model as evd holds it (packed ticks, interned texts, the current
//! view), verdicts, the audit, the lints, the write limits, receipts and event lines as data,
//! the check memo's pure parts (a tick's rows as kept, the trigger index, event templates), and
//! the clock's one timestamp shape. Pure: it imports nothing else of evd and touches no
//! disk, git or socket.

pub mod audit;
pub mod check_events;
pub mod clock;
pub mod codec;
pub mod events;
pub mod interned;
pub mod limits;
pub mod lint;
pub mod packed;
pub mod receipts;
pub mod rows;
pub mod triggers;
pub mod verdict;
pub mod view;
