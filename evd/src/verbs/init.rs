//! `init`: create the store layout (a no-op when `.evolving` exists).

use proto::rpc::{InitResult, Refusal};

use crate::open::OpenStore;

pub fn init(store: &mut OpenStore) -> Result<InitResult, Refusal> {
    let created = store.init()?;
    Ok(InitResult {
        created,
        path: store.ev_dir().display().to_string(),
    })
}
