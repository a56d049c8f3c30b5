//! The event ledger of a store (seed 002), with the integrity of seed 003: an append-only JSON
//! Lines file whose only writer is the evd that owns the store.
//!
//! **Where it lives, and why.** `.evolving/results/ledger/events.jsonl`: host-local, like the
//! rest of `results/` (git-ignored, never part of a tick id). Every event records the host and
//! the run it happened in, and every line is chained to the one before it (`prev`, the sha256
//! of that line), so two clones cannot share one file: their chains would fork at the first
//! event either wrote, and no merge of two forks keeps both chains whole. Each host keeps its
//! own ledger; what is shared between clones is the ticks, as before. Each host may publish its
//! ledger to a ref of its own ([`crate::git::ledger_refs`]), where the others fetch, verify and
//! witness it.
//!
//! - [`rules`]: the envelope, the schema versions and their upgrader, the consistency rules;
//! - [`file`]: reading and verifying the file, appending to it durably;
//! - [`query`]: the questions seed 002 asks of a ledger;
//! - [`replay`]: what a check rested on, recorded, and the fold that reproduces its verdicts;
//! - [`witness`]: what hosts witnessed of each other's ledgers, read out of a ledger's text.

pub mod evidence;
pub mod file;
pub mod query;
pub mod replay;
pub mod rules;
pub mod witness;

use serde_json::{Map, Value};

pub use file::{Broken, Ledger};
pub use rules::{Rules, Violation, SCHEMA_VERSION};

/// One of evd's own events before its envelope: its type and payload.
pub type OwnEvent = (&'static str, Map<String, Value>);

/// The host part of the envelope, for events that do not bring their own.
pub fn host(repo_root: &std::path::Path) -> Value {
    let hostname = crate::sys::users::hostname().unwrap_or_else(|| "localhost".into());
    let mut h = Map::new();
    h.insert("hostname".into(), hostname.into());
    h.insert("platform".into(), std::env::consts::OS.into());
    h.insert("repo_root".into(), repo_root.display().to_string().into());
    Value::Object(h)
}

/// The git part of the envelope, from what evd knows of the repository.
pub fn git(branch: &str, head_sha: &str, dirty: bool) -> Value {
    let mut g = Map::new();
    g.insert("branch".into(), branch.into());
    g.insert("head_sha".into(), head_sha.into());
    g.insert("dirty".into(), dirty.into());
    Value::Object(g)
}

/// A client's event as it reaches the door: an object with the envelope 002 requires, of a
/// readable version (upgraded to the current one here), of a type clients may append, and
/// without the writer's own fields. `host` and `git` are filled in from `host`/`git` when the
/// event has none. Returns the event ready for [`Rules::admit`].
/// Whether the ledger `text` has a `tick_recorded` for `tick`.
pub fn records_tick(text: &str, tick: &str) -> bool {
    let id = format!("\"tick_id\":\"{tick}\"");
    text.lines()
        .any(|l| l.contains("\"event_type\":\"tick_recorded\"") && l.contains(&id))
}

/// The agent ids of evd's own events (`evctl` when it answers in-process).
pub const OWN_AGENTS: [&str; 2] = ["evd", "evctl"];

pub fn from_client(v: Value, host: &Value, git: &Value) -> Result<Map<String, Value>, Violation> {
    let Value::Object(mut ev) = v else {
        return Err(Violation {
            rule: "envelope",
            message: "an event must be a JSON object".into(),
        });
    };
    for k in ["seq", "ts", "prev"] {
        if ev.contains_key(k) {
            return Err(Violation {
                rule: "envelope",
                message: format!("{k} is the ledger writer's: an appended event must not carry it"),
            });
        }
    }
    rules::upgrade(&mut ev)?;
    match ev.get("event_type").and_then(Value::as_str) {
        Some(t) if rules::DAEMON_TYPES.contains(&t) => {
            return Err(Violation {
                rule: "event_type",
                message: format!("{t} events are evd's own journal: a client may not append them"),
            })
        }
        _ => {}
    }
    // The agent ids evd writes its own events under are its alone: a client's events (its
    // `tool_call`s included) name the client, so nothing appended can pass for evd's record.
    if let Some(a) = ev
        .get("agent_id")
        .and_then(Value::as_str)
        .filter(|a| OWN_AGENTS.contains(a))
    {
        return Err(Violation {
            rule: "envelope",
            message: format!(
                "agent_id \"{a}\" is reserved for evd's own events: a client appends under its \
                 own agent id"
            ),
        });
    }
    ev.entry("host").or_insert_with(|| host.clone());
    ev.entry("git").or_insert_with(|| git.clone());
    rules::check_envelope(&ev)?;
    let size = proto::json::compact(&Value::Object(ev.clone())).len();
    if size > file::MAX_LINE - 512 {
        return Err(Violation {
            rule: "size",
            message: format!(
                "the event is {size} bytes; the most an event may be is {}",
                file::MAX_LINE - 512
            ),
        });
    }
    Ok(ev)
}

/// One of evd's own events (its type one of [`rules::DAEMON_TYPES`]), its envelope complete
/// but for the writer's fields.
pub fn own_event(
    event_type: &str,
    agent_id: &str,
    host: &Value,
    git: &Value,
    payload: Map<String, Value>,
) -> Map<String, Value> {
    let mut ev = Map::new();
    ev.insert("schema_version".into(), SCHEMA_VERSION.into());
    ev.insert("event_type".into(), event_type.into());
    ev.insert("run_id".into(), run_id().into());
    ev.insert("agent_id".into(), agent_id.into());
    ev.insert("host".into(), host.clone());
    ev.insert("git".into(), git.clone());
    ev.insert("payload".into(), Value::Object(payload));
    ev
}

/// The id of this process's run, for the events it writes itself: `R-<start>-<pid>`.
pub fn run_id() -> &'static str {
    static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let start = crate::engine::clock::now_rfc3339().replace([':', '-'], "");
        let start = start.split('.').next().unwrap_or_default().to_string();
        format!("R-{start}-{}", std::process::id())
    })
}
