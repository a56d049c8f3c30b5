//! The crash-safe appends of a store: one tick (written durably, then HEAD moved), a batch
//! (staged, made durable together, renamed in, HEAD moved once), the intent recorded for an
//! exactly-once write, the undo of an append whose HEAD could not move, and the roll-forward
//! of an append a crash interrupted. Only a lock holder appends; the tick is validated before
//! (the write limits and every rule registered with [`Store::check_ticks_with`]).

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::PathBuf;

use proto::rpc::{codes, Refusal};
use proto::Tick;

use super::Store;
use crate::sys::fsio;

impl Store {
    /// The shared append: write `ticks/<id>` durably, then move HEAD. Only a lock holder may
    /// call this; the caller has already built and validated `tick`.
    pub fn append(&mut self, tick: Tick) -> Result<(), Refusal> {
        if self.lock.is_none() {
            return Err(Refusal::new(
                codes::INTERNAL,
                "not_owner",
                "internal: append without holding the store lock",
            ));
        }
        // The layout was checked when this request took the store (`acquire`).
        self.check_tick(&tick)?;
        if self.head_for_write()? != tick.parent_id {
            return Err(Refusal::new(
                codes::INTERNAL,
                "head_moved",
                "internal: HEAD moved between reading it and appending; nothing was written",
            ));
        }
        let tmp = self.tmp_dir()?;
        let ticks = self.ticks_dir();
        // Gone since the store was opened (git removes the directory it empties when it
        // switches branches): missing is empty, made again before the first tick lands in it.
        match std::fs::create_dir(&ticks) {
            Ok(()) => {
                // The dir entry of ticks/ is durable before anything is written in it.
                let _ = fsio::sync_dir(&self.ev);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(Refusal::io(format!(
                    "writing tick: {}: {e}",
                    ticks.display()
                )))
            }
        }
        let in_sync = self.cache.in_sync();
        let dest = ticks.join(&tick.id);
        self.record_intent(&tick.id)?;
        fsio::replace_atomically(&tmp, &dest, tick.file_bytes().as_bytes())
            .map_err(|e| Refusal::io(format!("writing tick: {e}")))?;
        // The fault campaign's crash points: the tick durable, HEAD not yet; then HEAD too.
        crate::crash_point!("append.tick_durable");
        let head = self.ev.join("HEAD");
        if let Err(e) = fsio::replace_atomically(&tmp, &head, tick.id.as_bytes()) {
            // Not recorded: take the tick back out before saying so, so that a write reported
            // as failed never lands (the roll-forward at open would otherwise adopt it).
            return Err(self.undo_append(&tick.id, &tick.parent_id, &e));
        }
        crate::crash_point!("append.head_written");
        self.writes += 1;
        self.cache.took_own(in_sync, [&tick]);
        Ok(())
    }

    /// Before an append under a request id: record, durably, which tick will be HEAD if it
    /// lands (see [`crate::store::requests`]).
    fn record_intent(&mut self, tip: &str) -> Result<(), Refusal> {
        let Some(id) = self.current_request.clone() else {
            return Ok(());
        };
        self.requests
            .intent(&id, tip)
            .map_err(|e| Refusal::io(format!("writing tick: recording the request: {e}")))
    }

    /// An append whose HEAD update failed: put HEAD back if it moved, remove the tick file, and
    /// say what happened (and, if the tick could not be taken back, that it may still land).
    fn undo_append(&mut self, id: &str, parent: &str, e: &io::Error) -> Refusal {
        let ticks = self.ticks_dir();
        let head = self.ev.join("HEAD");
        let undo = || -> io::Result<()> {
            if self.head().ok().as_deref() == Some(id) {
                let tmp = self.tmp_dir().map_err(|r| io::Error::other(r.message))?;
                fsio::replace_atomically(&tmp, &head, parent.as_bytes())?;
            }
            match fs::remove_file(ticks.join(id)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            fsio::sync_dir(&ticks)
        };
        match undo() {
            Ok(()) => Refusal::io(format!(
                "writing tick: {e} — nothing was recorded (the tick file was removed again)"
            )),
            Err(u) => Refusal::io(format!(
                "writing tick: {e}; taking tick {id} back out failed too ({u}): it may become HEAD \
                 the next time the store is opened — run `evctl verify` and `evctl log` then"
            )),
        }
    }

    /// Append a whole chain of ticks (each the parent of the next, the first a child of HEAD) and
    /// move HEAD once, to the last. `progress(phase, done, total)` hears `stage` (temp files
    /// written) and `write` (ticks published), ending with `write` total/total. Every tick is written to a temp file, all of them are made
    /// durable together (one syncfs), then each is renamed into `ticks/`, `ticks/` is synced, and
    /// only then does HEAD move. So a file in `ticks/` is always complete, and a crash leaves HEAD
    /// on the old tip with a durable linear chain below it that [`Store::recover_head`] finishes.
    /// A failure before HEAD moves removes what it had put into `ticks/`.
    pub fn append_batch(
        &mut self,
        ticks: &[Tick],
        progress: &mut dyn FnMut(&str, u64, u64),
    ) -> Result<(), Refusal> {
        let Some(last) = ticks.last() else {
            return Ok(());
        };
        if self.lock.is_none() {
            return Err(Refusal::new(
                codes::INTERNAL,
                "not_owner",
                "internal: append without holding the store lock",
            ));
        }
        let head = self.head_for_write()?;
        let linked = ticks
            .iter()
            .scan(head.as_str(), |parent, t| {
                let ok = t.parent_id == *parent;
                *parent = t.id.as_str();
                Some(ok)
            })
            .all(|ok| ok);
        if !linked {
            return Err(Refusal::new(
                codes::INTERNAL,
                "not_a_chain",
                "internal: a batch must be a chain descending from HEAD (HEAD moved?); nothing was written",
            ));
        }
        for t in ticks {
            self.check_tick(t)?;
        }
        let total = ticks.len() as u64;
        self.record_intent(&last.id)?;
        let tmp = self.tmp_dir()?;
        let dir = self.ticks_dir();
        let in_sync = self.cache.in_sync();
        let fail = |e: io::Error| Refusal::io(format!("writing tick: {e}"));

        // 1. Stage every tick outside ticks/, unsynced.
        let mut staged: Vec<PathBuf> = Vec::with_capacity(ticks.len());
        let discard = |staged: &[PathBuf]| {
            for p in staged {
                let _ = fs::remove_file(p);
            }
        };
        for (i, t) in ticks.iter().enumerate() {
            let p = tmp.join(fsio::temp_name());
            if let Err(e) = fsio::write_new_unsynced(&p, t.file_bytes().as_bytes()) {
                discard(&staged);
                return Err(fail(e));
            }
            staged.push(p);
            if i % 256 == 255 {
                progress("stage", i as u64 + 1, total);
            }
        }
        // 2. Durable together.
        if let Err(e) = fsio::sync_filesystem(&tmp, &staged) {
            discard(&staged);
            return Err(fail(e));
        }
        crate::crash_point!("batch.staged");
        // 3. Publish into ticks/, then make the names durable.
        let mut published: Vec<PathBuf> = Vec::with_capacity(ticks.len());
        let unpublish = |published: &[PathBuf]| {
            for p in published {
                let _ = fs::remove_file(p);
            }
            let _ = fsio::sync_dir(&dir);
        };
        for (i, (t, p)) in ticks.iter().zip(&staged).enumerate() {
            let dest = dir.join(&t.id);
            let existed = fs::symlink_metadata(&dest).is_ok();
            let moved = match fs::rename(p, &dest) {
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                    let _ = fs::remove_file(p);
                    fsio::replace_atomically(&tmp, &dest, t.file_bytes().as_bytes())
                }
                other => other,
            };
            if let Err(e) = moved {
                discard(&staged[i..]);
                unpublish(&published);
                return Err(fail(e));
            }
            // A file that was already there (same payload, same parent) is not ours to remove.
            if !existed {
                published.push(dest);
            }
            if i % 256 == 255 {
                progress("write", i as u64 + 1, total);
            }
        }
        if let Err(e) = fsio::sync_dir(&dir) {
            unpublish(&published);
            return Err(fail(e));
        }
        crate::crash_point!("batch.published");
        // 4. HEAD moves once, to the tip.
        if let Err(e) = fsio::replace_atomically(&tmp, &self.ev.join("HEAD"), last.id.as_bytes()) {
            // HEAD may have moved before the error (its directory sync failed): put it back.
            if self.head().ok().as_deref() == Some(last.id.as_str()) {
                let _ = fsio::replace_atomically(
                    &tmp,
                    &self.ev.join("HEAD"),
                    ticks[0].parent_id.as_bytes(),
                );
            }
            unpublish(&published);
            return Err(fail(e));
        }
        crate::crash_point!("batch.head_written");
        progress("write", total, total);
        self.writes += total;
        self.cache.took_own(in_sync, ticks);
        Ok(())
    }

    /// A crash between "ticks durable" and "HEAD moved" leaves a chain of complete ticks below
    /// HEAD that HEAD does not name: one tick from a single append, several from a batch. Finish
    /// that append: when HEAD has exactly one child, that child exactly one, and so on to a tick
    /// with none, HEAD moves to the end. Anything branching is left alone.
    pub(super) fn recover_head(&mut self) -> Result<(), Refusal> {
        let Ok(head) = self.head() else { return Ok(()) };
        let Ok(ticks) = self.ticks() else {
            return Ok(());
        };
        // Nearly always HEAD names the last tick: nothing names it as parent.
        if !ticks
            .iter()
            .any(|(name, t)| t.parent_id() == head && *name != head)
        {
            return Ok(());
        }
        let mut children: std::collections::HashMap<&str, Vec<&str>> =
            std::collections::HashMap::new();
        for (name, t) in &ticks {
            if t.parent_id() != *name {
                children.entry(t.parent_id()).or_default().push(name);
            }
        }
        let mut tip = head.as_str();
        let mut seen = BTreeSet::new();
        loop {
            match children.get(tip).map(Vec::as_slice) {
                None | Some([]) => break,
                Some([only]) => {
                    if !seen.insert(*only) {
                        return Ok(()); // a cycle cannot come from content ids; leave it alone
                    }
                    tip = only;
                }
                Some(_) => return Ok(()),
            }
        }
        if tip == head {
            return Ok(());
        }
        let (tip, rolled) = (tip.to_string(), seen.len());
        drop(seen);
        drop(children);
        drop(ticks);
        tracing::warn!(store = %self.root.display(), head = %head, tick = %tip, ticks = rolled,
            "finishing an interrupted append: moving HEAD to the end of the durable chain it did not name");
        let tmp = self.tmp_dir()?;
        fsio::replace_atomically(&tmp, &self.ev.join("HEAD"), tip.as_bytes())
            .map_err(|e| Refusal::io(format!("writing HEAD: {e}")))
    }
}
