//! `ev.receipts.trust`: which publishing hosts' receipts may turn a verdict, kept in the
//! store's config as `trusted_hosts = ["…"]` (committed with the decisions, so the team shares
//! it and reviews a change to it like code). Host `*` with `trust` removes the key: every
//! publisher counts again, as upstream trusts any receipt writer.
//!
//! It edits that one line and nothing else of the config; it must not touch receipts (the next
//! evaluation takes the new trust into account).

use proto::rpc::{Refusal, TrustRequest, TrustResult};

use crate::open::OpenStore;
use crate::store::config::{lookup, Trust, TRUSTED_HOSTS};
use crate::sys::fsio;

/// The config text with `trusted_hosts` set to `hosts` (`None`: the key removed).
fn edited(text: &str, hosts: Option<&[String]>) -> String {
    let line = hosts.map(|h| {
        format!(
            "{TRUSTED_HOSTS} = {}",
            serde_json::to_string(h).unwrap_or_else(|_| "[]".into())
        )
    });
    let is_key = |l: &str| {
        l.split_once('=')
            .is_some_and(|(k, _)| k.trim() == TRUSTED_HOSTS)
    };
    let mut out = String::new();
    let mut done = false;
    for l in text.split_inclusive('\n') {
        if !done && is_key(l) {
            done = true;
            if let Some(new) = &line {
                out.push_str(new);
                out.push('\n');
            }
            continue;
        }
        out.push_str(l);
    }
    if let (false, Some(new)) = (done, &line) {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("\n[receipts]\n");
        out.push_str(new);
        out.push('\n');
    }
    out
}

pub fn trust(store: &mut OpenStore, req: &TrustRequest) -> Result<TrustResult, Refusal> {
    store.require()?;
    let everyone = req.host == "*";
    if !everyone {
        crate::verbs::common::require_host_id(&req.host)?;
    }
    let path = store.ev_dir().join("config");
    let text = fsio::read_text_opt(&path)
        .map_err(|e| Refusal::io(format!("config: {e}")))?
        .unwrap_or_default();
    let now = crate::store::config::Config::parse(Some(&text)).trust;
    let hosts: Option<Vec<String>> = match (everyone, req.trust, &now) {
        (true, true, _) => None,
        (true, false, _) => Some(Vec::new()),
        (false, true, Trust::Only(h)) => {
            let mut h = h.clone();
            h.push(req.host.clone());
            Some(h)
        }
        (false, true, _) => Some(vec![req.host.clone()]),
        (false, false, Trust::Only(h)) => {
            Some(h.iter().filter(|x| **x != req.host).cloned().collect())
        }
        // Not trusting one host out of everyone: nobody else is named, so nobody is trusted.
        (false, false, Trust::Everyone) => Some(Vec::new()),
        (false, false, Trust::Unreadable(_)) => Some(Vec::new()),
    };
    let hosts = hosts.map(|mut h| {
        h.sort();
        h.dedup();
        h
    });
    let new = edited(&text, hosts.as_deref());
    let changed = new != text;
    if changed {
        let tmp = store.tmp_dir()?;
        fsio::replace_atomically(&tmp, &path, new.as_bytes())
            .map_err(|e| Refusal::io(format!("config: {e}")))?;
        debug_assert!(lookup(&new, TRUSTED_HOSTS).is_some() == hosts.is_some());
    }
    Ok(TrustResult {
        trusted: hosts,
        changed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_line_is_added_replaced_or_removed_and_nothing_else_moves() {
        let base = crate::store::config::DEFAULT_CONFIG;
        let one = edited(base, Some(&["ci-1".to_string()]));
        assert!(one.starts_with(base));
        assert!(
            one.ends_with("\n[receipts]\ntrusted_hosts = [\"ci-1\"]\n"),
            "{one}"
        );
        let two = edited(&one, Some(&["ci-1".to_string(), "ci-2".to_string()]));
        assert_eq!(two, one.replace("[\"ci-1\"]", "[\"ci-1\",\"ci-2\"]"));
        let none = edited(&two, None);
        assert_eq!(none, format!("{base}\n[receipts]\n"));
        assert_eq!(
            crate::store::config::Config::parse(Some(&two)).trust,
            Trust::Only(vec!["ci-1".into(), "ci-2".into()])
        );
    }
}
