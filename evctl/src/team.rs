//! `evctl receipts …` and `evctl remote setup`: receipts shared through git notes. The network
//! is here, in the user's process and with the user's credentials (`git fetch`, `git push`,
//! each under a deadline); what goes into the notes ref, what comes out of it and whom to
//! trust is evd's (`ev.receipts.*`, in-process when no daemon answers).
//!
//! A publish never forces anything: a push the remote rejects because someone else published
//! first is fetched, joined and tried again, with a growing, jittered pause, until it lands or
//! the attempts run out (then it fails, saying so, and nothing is lost: the receipts stay in
//! the local notes ref for the next publish).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use evd::api::shared::child;
use proto::json::q;
use proto::rpc::{
    PublishReceiptsRequest, PublishReceiptsResult, ReceiptsStatus, Refusal, StoreRequest,
    TrustRequest,
};

use crate::context::Needs;
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_write, Session};

/// The notes ref and where each remote's copy is kept (evd's names).
const NOTES_REF: &str = "refs/notes/evolving-receipts";
fn remote_notes_ref(remote: &str) -> String {
    format!("refs/evolving/remote-notes/{remote}/receipts")
}
fn fetch_refspec(remote: &str) -> String {
    format!("+{NOTES_REF}:{}", remote_notes_ref(remote))
}
/// The same as a pattern, for the remote's configuration: a plain `git fetch` of a remote that
/// holds no notes yet matches nothing instead of failing ("couldn't find remote ref").
fn configured_refspec(remote: &str) -> String {
    format!("+{NOTES_REF}*:{}*", remote_notes_ref(remote))
}

/// How many times a rejected push is fetched, joined and tried again.
const ATTEMPTS: u32 = 10;

#[derive(clap::Subcommand, Debug)]
pub enum ReceiptsAction {
    /// Publish this host's receipts to a remote, as git notes on the commits they ran at.
    ///
    /// Run it where tests ran (a CI job after `evctl check --run --platform linux-ci`, or a
    /// laptop): the receipts recorded at commits of this repository go into the notes ref
    /// refs/notes/evolving-receipts, joined with what the remote already holds, and are pushed
    /// (never forced). When another publisher pushed first, evctl fetches, joins and tries
    /// again. The publishing host is EV_HOST_ID, else this machine's name (`evctl status`).
    ///
    /// Every clone set up with `evctl remote setup` (or `evctl setup`) fetches the notes with a
    /// plain `git fetch`, and evd takes in the receipts for commits of HEAD's history within
    /// a second: `not-run (missing: linux-ci)` becomes CI's verdict without a command.
    ///
    /// --sign signs each notes commit (`git commit-tree -S`, with this repository's signing
    /// settings: user.signingkey, gpg.format), for clones that trust this host only when
    /// signed (`evctl receipts trust HOST --signer KEY`).
    ///
    /// Examples:
    ///   EV_HOST_ID=ci-linux evctl receipts publish --sign
    ///   evctl receipts publish --remote upstream
    #[command(verbatim_doc_comment)]
    Publish {
        /// The remote to publish to (default: the current branch's remote, else `origin`, else
        /// the only remote).
        #[arg(long, value_name = "REMOTE")]
        remote: Option<String>,
        /// Sign the notes commits (git's own signing settings).
        #[arg(long)]
        sign: bool,
    },
    /// What came in through git: the notes read, receipts imported, waiting, untrusted,
    /// and any notes ref found rewritten rather than extended.
    Status,
    /// Trust a publishing host: only trusted hosts' receipts may then turn a verdict.
    ///
    /// With no host trusted (the default), every publisher's receipts count, as upstream
    /// trusts any receipt writer. Once one is trusted, receipts published by any other host are
    /// shown by `evctl receipts status` but never gate and never turn a verdict green. The list
    /// is `trusted_hosts` in .evolving/config: commit it, and the team shares it.
    ///
    /// --signer KEY also asks that host's notes commits to carry a good signature by KEY, as
    /// git verifies it here (`git log --format=%G?`; for SSH keys, gpg.ssh.allowedSignersFile
    /// must name the key): a fingerprint (SHA256:… for SSH), a key id or a signer, as
    /// `git log --format='%GF %GK %GS'` shows them. Give it again for another key. Receipts
    /// in notes commits without such a signature are shown but never count. The list is
    /// `trusted_signers` in .evolving/config.
    ///
    /// Examples:
    ///   evctl receipts trust ci-linux
    ///   evctl receipts trust ci-linux --signer SHA256:9mVp9ghbyLzCZjGpd8iBPIcVmQcYm0zcZ01rV4Bb7SE
    ///   evctl receipts trust --everyone      # back to every publisher
    #[command(verbatim_doc_comment)]
    Trust {
        /// The host id (as `evctl status` shows it on that host).
        #[arg(required_unless_present = "everyone")]
        host: Option<String>,
        /// Trust every publisher again (removes the list).
        #[arg(long, conflicts_with = "host")]
        everyone: bool,
        /// Count that host's receipts only in notes commits signed by this key.
        #[arg(long, value_name = "KEY", conflicts_with = "everyone")]
        signer: Option<String>,
    },
    /// Stop trusting a publishing host (its receipts stop counting at the next check).
    Untrust {
        /// The host id.
        host: String,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum RemoteAction {
    /// Make `git fetch` bring a remote's published receipts and every host's ledger.
    ///
    /// Adds the fetch refspecs
    ///   +refs/notes/evolving-receipts*:refs/evolving/remote-notes/<remote>/receipts*
    ///   +refs/evolving/ledger/*:refs/evolving/remotes/<remote>/ledger/*
    /// to the remote's configuration, once each. `evctl setup` does this for every remote.
    #[command(verbatim_doc_comment)]
    Setup {
        /// The remote (default: every remote).
        remote: Option<String>,
    },
}

pub async fn receipts(s: &mut Session, action: ReceiptsAction) -> Out {
    match action {
        ReceiptsAction::Publish { remote, sign } => publish(s, remote, sign).await,
        ReceiptsAction::Status => status(s).await,
        ReceiptsAction::Trust {
            host,
            everyone,
            signer,
        } => {
            let host = if everyone {
                "*".to_string()
            } else {
                host.unwrap_or_default()
            };
            trust(s, host, true, signer).await
        }
        ReceiptsAction::Untrust { host } => trust(s, host, false, None).await,
    }
}

/// How long one fetch or push may take.
pub fn network_timeout() -> Duration {
    std::env::var("EVCTL_GIT_NETWORK_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(120))
}

/// `git -C root args…` as the user's own git (their credentials), never reading the index a
/// hook may have been handed.
fn git_cmd(root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(root)
        .args(args)
        .env_remove("GIT_INDEX_FILE")
        .env("GIT_TERMINAL_PROMPT", "0");
    c
}

/// Run git: its stdout, or what it said on failure (stderr, else its status).
pub fn git_run(
    root: &Path,
    args: &[&str],
    limit: Duration,
) -> Result<(bool, String, String), String> {
    // git's answers here are a line or two; its progress chatter goes to stderr.
    let out = child::output_with_input(&mut git_cmd(root, args), Vec::new(), limit, 1 << 20)
        .map_err(|e| e.to_string())?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    ))
}

fn remotes(root: &Path) -> Vec<String> {
    crate::context::git(root, &["remote"])
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The remote to publish to: the current branch's, else `origin`, else the only one.
pub fn default_remote(root: &Path) -> Result<String, String> {
    let all = remotes(root);
    if let Some(branch) = crate::context::git(root, &["symbolic-ref", "--short", "-q", "HEAD"]) {
        if let Some(r) = crate::context::git(root, &["config", &format!("branch.{branch}.remote")])
        {
            if all.contains(&r) {
                return Ok(r);
            }
        }
    }
    if all.iter().any(|r| r == "origin") {
        return Ok("origin".into());
    }
    match all.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err("this repository has no remote to publish to".into()),
        _ => Err(format!(
            "which remote? this repository has {}: pass --remote",
            all.join(", ")
        )),
    }
}

/// Who publishes where: the remote (given, or [`default_remote`]), this host's id and the
/// publisher's email (`user.email`, or nothing).
pub fn publisher(root: &Path, remote: Option<String>) -> Result<(String, String, String), Refusal> {
    let remote = remote
        .map_or_else(|| default_remote(root), Ok)
        .map_err(|e| Refusal::refused("remote", e))?;
    let (host, _) =
        evd::api::shared::users::host_id().map_err(|e| Refusal::refused("host_id", e))?;
    let by = crate::context::git(root, &["config", "user.email"]).unwrap_or_default();
    Ok((remote, host, by))
}

/// Fetch the remote's notes into its copy; a remote that has none yet is not an error.
fn fetch_notes(root: &Path, remote: &str) -> Result<(), String> {
    let spec = fetch_refspec(remote);
    let (ok, _, err) = git_run(
        root,
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            remote,
            &spec,
        ],
        network_timeout(),
    )?;
    if ok || err.contains("couldn't find remote ref") {
        return Ok(());
    }
    Err(format!("git fetch {remote} failed: {err}"))
}

/// How a push ended.
enum Pushed {
    Done,
    /// Someone else moved the remote's notes first: fetch, join, try again.
    Behind(String),
}

fn push_notes(root: &Path, remote: &str) -> Result<Pushed, String> {
    let spec = format!("{NOTES_REF}:{NOTES_REF}");
    let (ok, out, err) = git_run(
        root,
        &["push", "--porcelain", "--no-verify", remote, &spec],
        network_timeout(),
    )?;
    if ok {
        return Ok(Pushed::Done);
    }
    // --porcelain: one line per ref, `!` first when it was refused.
    let refused = out.lines().find(|l| l.starts_with('!'));
    match refused {
        Some(l)
            if l.contains("[rejected]")
                || l.contains("fetch first")
                || l.contains("non-fast-forward")
                || l.contains("cannot lock ref")
                || l.contains("failed to update ref")
                || l.contains("incorrect old value") =>
        {
            Ok(Pushed::Behind(l.to_string()))
        }
        Some(l) => Err(format!("git push {remote} was refused: {}", l.trim())),
        None => Err(format!("git push {remote} failed: {err}")),
    }
}

/// A pause before the next attempt: growing, with jitter, so racing publishers spread out.
fn backoff(attempt: u32) -> Duration {
    let base = 50u64.saturating_mul(1 << attempt.min(6));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let jitter = u64::from(nanos ^ std::process::id()) % base.max(1);
    Duration::from_millis(base + jitter)
}

async fn publish(s: &mut Session, remote: Option<String>, sign: bool) -> Out {
    let json = s.json;
    let root = s.root(true);
    let (remote, host, by) = match publisher(&root, remote) {
        Ok(p) => p,
        Err(e) => return render::refusal(&e, json),
    };
    let mut last: Option<PublishReceiptsResult> = None;
    let mut added = 0;
    for attempt in 0..ATTEMPTS {
        if let Err(e) = fetch_notes(&root, &remote) {
            return render::refusal(&Refusal::io(e), json);
        }
        let ctx = s.context(true, Needs::default());
        let req = PublishReceiptsRequest {
            context: ctx.clone(),
            remote: Some(remote.clone()),
            host: host.clone(),
            by: by.clone(),
        };
        let r = s
            .write(rpc!(req, receipts_publish), || {
                local_write(&ctx, |st| evd::api::receipts_publish(st, &req))
            })
            .await;
        let mut r = match r {
            Ok(r) => r,
            Err(e) => return render::refusal(&e, json),
        };
        added += r.added;
        if sign && r.push {
            if let Some(c) = r.commit.clone() {
                match sign_notes_commit(&root, &c) {
                    Ok(signed) => r.commit = Some(signed),
                    Err(e) => return render::refusal(&Refusal::io(e), json),
                }
            }
        }
        if !r.push {
            last = Some(r);
            break;
        }
        match push_notes(&root, &remote) {
            Ok(Pushed::Done) => {
                if let Some(c) = &r.commit {
                    // The remote has it now: so does our copy of the remote's.
                    let _ = git_run(
                        &root,
                        &["update-ref", &remote_notes_ref(&remote), c],
                        child::git_timeout(),
                    );
                }
                last = Some(r);
                break;
            }
            Ok(Pushed::Behind(said)) => {
                if std::env::var_os("EVCTL_DEBUG").is_some() {
                    eprintln!(
                        "evctl: attempt {attempt}: {remote} moved first ({said}); fetching again"
                    );
                }
                if attempt + 1 == ATTEMPTS {
                    return render::refusal(
                        &Refusal::io(format!(
                            "receipts publish: {remote} kept moving ({ATTEMPTS} pushes were rejected while others published); the receipts wait in {NOTES_REF}: run it again"
                        )),
                        json,
                    );
                }
                std::thread::sleep(backoff(attempt));
            }
            Err(e) => return render::refusal(&Refusal::io(e), json),
        }
    }
    let Some(mut r) = last else {
        return render::refusal(&Refusal::io("receipts publish: nothing was done"), json);
    };
    r.added = added;
    let mut out = Out::default();
    if json {
        out.json(&r);
        return out;
    }
    for w in &r.warnings {
        out.err(&w.message);
    }
    let short = |c: &Option<String>| {
        c.as_deref()
            .map_or("-", |c| c.get(..12).unwrap_or(c))
            .to_string()
    };
    let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    if r.added > 0 {
        out.line(format!(
            "published {} from {host} to {remote}: {NOTES_REF} is at {} ({} at {} in all)",
            plural(r.added, "receipt"),
            short(&r.commit),
            plural(r.receipts, "receipt"),
            plural(r.commits, "commit"),
        ));
    } else if r.commit.is_some() {
        out.line(format!(
            "nothing new to publish: {remote}'s {NOTES_REF} holds every receipt of {host} ({} at {} in all)",
            plural(r.receipts, "receipt"),
            plural(r.commits, "commit"),
        ));
    } else {
        out.line(format!(
            "nothing to publish: {host} has no receipt at a commit of this repository (run `evctl check --run` first)"
        ));
    }
    if r.skipped > 0 {
        out.line(format!(
            "{} left out (at commits this repository does not have, or brought by another publisher)",
            plural(r.skipped, "receipt")
        ));
    }
    out
}

async fn status(s: &mut Session) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = StoreRequest {
        context: ctx.clone(),
    };
    let r = s
        .read(rpc!(req, receipts_status), || {
            local_write(&ctx, evd::api::receipts_status)
        })
        .await;
    let json = s.json;
    s.finish(r, |v| render_status(v, json))
}

fn render_status(v: &ReceiptsStatus, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(v);
        return out;
    }
    for w in &v.warnings {
        out.err(&w.message);
    }
    let short = |c: &str| c.get(..12).unwrap_or(c).to_string();
    out.line(format!(
        "trusted    {}",
        match &v.trusted {
            None => "every publisher (no trusted_hosts in .evolving/config)".to_string(),
            Some(h) if h.is_empty() => "no publisher".to_string(),
            Some(h) => h.join(", "),
        }
    ));
    if !v.signers.is_empty() {
        out.line(format!("signed     {}", signed_said(&v.signers)));
    }
    if v.sources.is_empty() {
        out.line(format!(
            "notes      none yet ({NOTES_REF}: `evctl receipts publish` writes it, `git fetch` brings it once `evctl remote setup` ran)"
        ));
    }
    for (i, src) in v.sources.iter().enumerate() {
        out.line(format!(
            "{}{} at {}",
            if i == 0 { "notes      " } else { "           " },
            src.notes_ref,
            short(&src.commit)
        ));
    }
    out.line(format!("imported   {}", v.imported));
    out.line(format!(
        "waiting    {}{}",
        v.waiting,
        if v.waiting > 0 {
            " (at commits HEAD has not reached yet)"
        } else {
            ""
        }
    ));
    out.line(format!(
        "untrusted  {}{}",
        v.untrusted.len(),
        if v.untrusted.is_empty() {
            ""
        } else {
            " (shown, never counted):"
        }
    ));
    for u in v.untrusted.iter().take(20) {
        out.line(format!(
            "           {} {} at {} on {}, published by {}{} in {}",
            u.result,
            q(&u.test),
            short(&u.commit),
            u.platform,
            u.origin.host,
            if u.origin.by.is_empty() {
                String::new()
            } else {
                format!(" ({})", u.origin.by)
            },
            short(&u.origin.notes_commit)
        ));
    }
    if v.untrusted.len() > 20 {
        out.line(format!("           … and {} more", v.untrusted.len() - 20));
    }
    if v.refused > 0 {
        out.line(format!(
            "refused    {} (notes lines that are not receipts of the commit they are attached to)",
            v.refused
        ));
    }
    for r in &v.rewrites {
        out.line(format!(
            "REWRITTEN  {} at {}: {}",
            r.notes_ref,
            r.found_at,
            evd::api::shared::notes_rewrite_said(r).trim_start_matches("warning: ")
        ));
    }
    out
}

async fn trust(s: &mut Session, host: String, trust: bool, signer: Option<String>) -> Out {
    let ctx = s.context(true, Needs::default());
    let req = TrustRequest {
        context: ctx.clone(),
        host,
        trust,
        signer,
    };
    let r = s
        .write(rpc!(req, receipts_trust), || {
            local_write(&ctx, |st| evd::api::receipts_trust(st, &req))
        })
        .await;
    let json = s.json;
    s.finish(r, |v| {
        let mut out = Out::default();
        if json {
            out.json(v);
            return out;
        }
        let mut who = match &v.trusted {
            None => "every publisher's receipts count".to_string(),
            Some(h) if h.is_empty() => "no publisher's receipts count".to_string(),
            Some(h) => format!("only receipts published by {} count", h.join(", ")),
        };
        if !v.signers.is_empty() {
            who.push_str(&format!(", signed as {}", signed_said(&v.signers)));
        }
        if v.changed {
            out.line(format!(
                "{who} (.evolving/config: commit it so the team shares it)"
            ));
        } else {
            out.line(format!("unchanged: {who}"));
        }
        out
    })
}

/// `HOST=KEY` entries in words: "ci-linux by KEY or KEY2; ci-2 by KEY3".
fn signed_said(entries: &[String]) -> String {
    let mut by: Vec<(String, Vec<String>)> = Vec::new();
    for e in entries {
        let (h, k) = e.split_once('=').unwrap_or((e.as_str(), ""));
        match by.iter_mut().find(|(x, _)| x == h) {
            Some((_, keys)) => keys.push(k.to_string()),
            None => by.push((h.to_string(), vec![k.to_string()])),
        }
    }
    by.iter()
        .map(|(h, keys)| format!("{h} by {}", keys.join(" or ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Sign the notes commit `commit` (the notes ref's tip, unsigned as evd wrote it): the same
/// tree, parents, author and message, signed with git's own settings (`commit-tree -S`), and
/// the notes ref moved to it from `commit` only. Returns the signed commit.
fn sign_notes_commit(root: &Path, commit: &str) -> Result<String, String> {
    let (ok, raw, err) = git_run(root, &["cat-file", "commit", commit], child::git_timeout())?;
    if !ok {
        return Err(format!("git cat-file commit {commit}: {err}"));
    }
    let (head, message) = raw.split_once("\n\n").unwrap_or((raw.as_str(), ""));
    if head.lines().any(|l| l.starts_with("gpgsig")) {
        return Ok(commit.to_string());
    }
    let mut args: Vec<String> = vec!["commit-tree".into(), "-S".into()];
    let mut envs: Vec<(&str, String)> = Vec::new();
    let mut tree = None;
    for l in head.lines() {
        if let Some(t) = l.strip_prefix("tree ") {
            tree = Some(t.to_string());
        } else if let Some(p) = l.strip_prefix("parent ") {
            args.push("-p".into());
            args.push(p.to_string());
        } else if let Some((kind, who)) = l
            .strip_prefix("author ")
            .map(|w| ("AUTHOR", w))
            .or_else(|| l.strip_prefix("committer ").map(|w| ("COMMITTER", w)))
        {
            // "Name <email> 1700000000 +0000"
            let (name, rest) = who.split_once(" <").unwrap_or((who, ""));
            let (email, date) = rest.split_once("> ").unwrap_or((rest, ""));
            envs.push((
                if kind == "AUTHOR" {
                    "GIT_AUTHOR_NAME"
                } else {
                    "GIT_COMMITTER_NAME"
                },
                name.to_string(),
            ));
            envs.push((
                if kind == "AUTHOR" {
                    "GIT_AUTHOR_EMAIL"
                } else {
                    "GIT_COMMITTER_EMAIL"
                },
                email.to_string(),
            ));
            envs.push((
                if kind == "AUTHOR" {
                    "GIT_AUTHOR_DATE"
                } else {
                    "GIT_COMMITTER_DATE"
                },
                date.to_string(),
            ));
        }
    }
    let Some(tree) = tree else {
        return Err(format!("{commit} is not a commit git could read"));
    };
    args.insert(2, tree);
    args.push("-m".into());
    args.push(message.trim_end_matches('\n').to_string());
    let mut cmd = Command::new("git");
    cmd.current_dir(root).args(&args).envs(envs);
    let out = child::output(&mut cmd, network_timeout())
        .map_err(|e| format!("git commit-tree -S: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "signing the notes commit failed (git commit-tree -S: {}); set user.signingkey (and gpg.format) for this repository, or publish without --sign",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let signed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let (ok, _, err) = git_run(
        root,
        &["update-ref", NOTES_REF, &signed, commit],
        child::git_timeout(),
    )?;
    if !ok {
        return Err(format!("git update-ref {NOTES_REF}: {err}"));
    }
    Ok(signed)
}

/// The refspec that brings every host's published ledger.
fn ledger_refspec(remote: &str) -> String {
    format!("+refs/evolving/ledger/*:refs/evolving/remotes/{remote}/ledger/*")
}

/// Add the notes and ledgers fetch refspecs to `remote` unless they are there; whether one was
/// added.
pub fn setup_remote(root: &Path, remote: &str) -> Result<bool, String> {
    let key = format!("remote.{remote}.fetch");
    let have = crate::context::git(root, &["config", "--get-all", &key]).unwrap_or_default();
    let mut added = false;
    for spec in [configured_refspec(remote), ledger_refspec(remote)] {
        if have.lines().any(|l| l.trim() == spec) {
            continue;
        }
        let (ok, _, err) = git_run(
            root,
            &["config", "--add", &key, &spec],
            child::git_timeout(),
        )?;
        if !ok {
            return Err(format!("git config --add {key}: {err}"));
        }
        added = true;
    }
    Ok(added)
}

pub fn remote(s: &Session, action: RemoteAction) -> Out {
    let RemoteAction::Setup { remote } = action;
    let root = s.root(true);
    let all = remotes(&root);
    let wanted = match remote {
        Some(r) if all.contains(&r) => vec![r],
        Some(r) => {
            return render::refusal(
                &Refusal::refused("remote", format!("no remote named {}", q(&r))),
                s.json,
            )
        }
        None if all.is_empty() => {
            return render::refusal(
                &Refusal::refused("remote", "this repository has no remote yet"),
                s.json,
            )
        }
        None => all,
    };
    let mut out = Out::default();
    let mut done = Vec::new();
    for r in wanted {
        match setup_remote(&root, &r) {
            Ok(added) => {
                if !s.json {
                    out.line(if added {
                        format!(
                            "{r}: `git fetch` now brings its published receipts ({}) and every host's ledger ({})",
                            configured_refspec(&r),
                            ledger_refspec(&r)
                        )
                    } else {
                        format!("{r}: already set up")
                    });
                }
                done.push(
                    serde_json::json!({"remote": r, "added": added, "refspecs": [configured_refspec(&r), ledger_refspec(&r)]}),
                );
            }
            Err(e) => return render::refusal(&Refusal::io(e), s.json),
        }
    }
    if s.json {
        out.json(&done);
    }
    out
}
