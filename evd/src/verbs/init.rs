//! `init`: create the store layout (a no-op when `.evolving` exists).

use proto::rpc::{InitResult, Refusal};

use crate::store::Store;

pub fn init(store: &mut Store) -> Result<InitResult, Refusal> {
    let created = store.init()?;
    Ok(InitResult {
        created,
        path: store.ev_dir().display().to_string(),
    })
}
