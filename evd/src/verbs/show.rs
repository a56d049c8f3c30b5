//! `show <id>`: a tick file's bytes, exactly as stored.

use proto::rpc::{codes, Refusal, ShowResult};

use crate::open::OpenStore;

fn no_tick(id: &str) -> Refusal {
    Refusal::new(
        codes::NOT_FOUND,
        "not_found",
        format!("no tick with id {id}"),
    )
}

/// `show`: the file's bytes, unparsed. A non-id never touches the disk.
pub fn show(store: &OpenStore, id: &str) -> Result<ShowResult, Refusal> {
    store.refuse_conflicted_head()?;
    match store.read_tick_file(id) {
        Ok(Some(raw)) => Ok(ShowResult {
            id: id.to_string(),
            tick: serde_json::from_str(&raw).ok(),
            raw,
        }),
        Ok(None) => Err(no_tick(id)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(no_tick(id)),
        Err(e) => Err(Refusal::io(format!("reading {id}: {e}"))),
    }
}
