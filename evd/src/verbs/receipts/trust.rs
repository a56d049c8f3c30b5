//! `ev.receipts.trust`: which publishing hosts' receipts may turn a verdict, kept in the
//! store's config as `trusted_hosts = ["…"]` (committed with the decisions, so the team shares
//! it and reviews a change to it like code), and which signers a host's notes commits must
//! carry, as `trusted_signers = ["HOST=KEY", …]`. Host `*` with `trust` removes the hosts'
//! key: every publisher counts again, as upstream trusts any receipt writer.
//!
//! It edits those lines and nothing else of the config; it must not touch receipts (the next
//! evaluation takes the new trust into account).

use proto::rpc::{Refusal, TrustRequest, TrustResult};

use crate::open::OpenStore;
use crate::store::config::{lookup, Signers, Trust, TRUSTED_HOSTS, TRUSTED_SIGNERS};
use crate::sys::fsio;

/// The config text with `trusted_hosts` set to `hosts` (`None`: the key removed).
fn edited(text: &str, hosts: Option<&[String]>) -> String {
    edited_key(text, TRUSTED_HOSTS, hosts)
}

/// The config text with `key` set to the list `values` (`None`: the key removed).
fn edited_key(text: &str, key: &str, values: Option<&[String]>) -> String {
    let line = values.map(|h| {
        format!(
            "{key} = {}",
            serde_json::to_string(h).unwrap_or_else(|_| "[]".into())
        )
    });
    let is_key = |l: &str| l.split_once('=').is_some_and(|(k, _)| k.trim() == key);
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
        // Into the `[receipts]` section when it is the last one already (never a second one).
        let last_section = out.lines().rev().find(|l| l.trim_start().starts_with('['));
        if last_section.map(str::trim) != Some("[receipts]") {
            out.push_str("\n[receipts]\n");
        }
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
    let mut new = edited(&text, hosts.as_deref());
    // The signatures asked of each host: one added with `--signer`; all of a host's dropped
    // when it is no longer trusted.
    let before = crate::store::config::Config::parse(Some(&text)).signers;
    let mut signers: Vec<String> = match &before {
        Signers::Only(_) => before.entries(),
        _ => Vec::new(),
    };
    if let Some(key) = req.signer.as_deref().map(str::trim) {
        if everyone || !req.trust {
            return Err(Refusal::refused(
                "signer",
                "--signer goes with trusting one host: evctl receipts trust HOST --signer KEY",
            ));
        }
        if key.is_empty() || key.contains(['"', '\n', '\\']) {
            return Err(Refusal::refused(
                "signer",
                format!("{key:?} is not a key: give a fingerprint (SHA256:… for SSH), a key id or a signer as git reports them (git log --format=%GF/%GK/%GS)"),
            ));
        }
        signers.push(format!("{}={key}", req.host));
    }
    if !req.trust {
        let prefix = format!("{}=", req.host);
        signers.retain(|e| !e.starts_with(&prefix));
    }
    signers.sort();
    signers.dedup();
    if signers != before.entries() || matches!(before, Signers::Unreadable(_)) {
        new = edited_key(
            &new,
            TRUSTED_SIGNERS,
            (!signers.is_empty()).then_some(signers.as_slice()),
        );
    }
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
        signers,
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
        let signed = edited_key(&two, TRUSTED_SIGNERS, Some(&["ci-1=SHA256:a".to_string()]));
        assert_eq!(
            signed,
            format!("{two}trusted_signers = [\"ci-1=SHA256:a\"]\n"),
            "into the one [receipts] section"
        );
        let none = edited(&two, None);
        assert_eq!(none, format!("{base}\n[receipts]\n"));
        assert_eq!(
            crate::store::config::Config::parse(Some(&two)).trust,
            Trust::Only(vec!["ci-1".into(), "ci-2".into()])
        );
    }
}
