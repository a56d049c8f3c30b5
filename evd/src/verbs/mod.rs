//! The verbs, one module each, every one a function of a [`Store`] and a request. The daemon's
//! store actor and evctl's in-process fallback call exactly these, so both give the same answers.

pub mod decide;
pub mod init;
pub mod list;
pub mod log;
pub mod migrate;
pub mod show;
pub mod verify;
pub mod write_path;

pub use decide::decide;
pub use init::init;
pub use list::list;
pub use log::log;
pub use show::show;
pub use verify::{self_test, verify};

use proto::Tick;
use serde_json::Value;

/// The stored tick as a JSON object plus `file`.
pub fn tick_value(file: &str, t: &Tick) -> Value {
    let mut v = t.to_value();
    if let Value::Object(o) = &mut v {
        o.insert("file".into(), file.into());
    }
    v
}
