//! The store's repairs, as `evctl doctor --fix` plans them: files moved out of `ticks/` (never
//! deleted), a tick renamed to its id, a tick put back from a copy, then HEAD. Every tick file is
//! durable before HEAD names it. Only the lock holder repairs.
//!
//! It must not decide what to repair (the `doctor` verb does) nor mint or rewrite a tick.

use std::path::Path;

use proto::rpc::{codes, Refusal};

use super::Store;
use crate::sys::fsio;

/// One change to `ticks/`.
pub enum Step {
    /// Move `ticks/<name>` (whatever it is: a file, a symlink, a directory) out to the run's
    /// directory.
    MoveOut(String),
    /// Rename `ticks/<from>` to `ticks/<to>`.
    Rename { from: String, to: String },
    /// Write `ticks/<id>` with these bytes (the caller checked they are that tick).
    Restore { id: String, bytes: Vec<u8> },
}

impl Store {
    /// Make `steps` in order (the moves out first, into a new directory `results/doctor/<run>`,
    /// or `<run>-2`, … when that exists), sync `ticks/`, then set HEAD to `head` when given.
    /// Where the moved files went, relative to the store's root.
    pub fn repair(
        &mut self,
        steps: &[Step],
        run: &str,
        head: Option<&str>,
    ) -> Result<Option<String>, Refusal> {
        if self.lock.is_none() {
            return Err(Refusal::new(
                codes::INTERNAL,
                "not_owner",
                "internal: repair without holding the store lock",
            ));
        }
        let fail = |what: &str, e: std::io::Error| Refusal::io(format!("{what}: {e}"));
        let ticks = self.ticks_dir();
        let mut moved_to = None;
        if steps.iter().any(|s| matches!(s, Step::MoveOut(_))) {
            let (dir, shown) = self
                .new_doctor_dir(run)
                .map_err(|e| fail("results/doctor/", e))?;
            moved_to = Some(shown);
            for step in steps {
                if let Step::MoveOut(name) = step {
                    move_out(&ticks.join(name), &dir.join(name))
                        .map_err(|e| fail(&format!("moving ticks/{name} out"), e))?;
                }
            }
            fsio::sync_dir(&dir).map_err(|e| fail("syncing the moved files", e))?;
        }
        let tmp = self.tmp_dir()?;
        if steps.iter().any(|s| !matches!(s, Step::MoveOut(_))) {
            fsio::ensure_dir(&ticks).map_err(|e| fail("ticks/", e))?;
        }
        for step in steps {
            match step {
                Step::MoveOut(_) => {}
                Step::Rename { from, to } => std::fs::rename(ticks.join(from), ticks.join(to))
                    .map_err(|e| fail(&format!("renaming ticks/{from}"), e))?,
                Step::Restore { id, bytes } => {
                    fsio::replace_atomically(&tmp, &ticks.join(id), bytes)
                        .map_err(|e| fail(&format!("putting back ticks/{id}"), e))?
                }
            }
        }
        if !steps.is_empty() && std::fs::symlink_metadata(&ticks).is_ok_and(|m| m.is_dir()) {
            fsio::sync_dir(&ticks).map_err(|e| fail("syncing ticks/", e))?;
        }
        if let Some(head) = head {
            fsio::replace_atomically(&tmp, &self.ev.join("HEAD"), head.as_bytes())
                .map_err(|e| fail("writing HEAD", e))?;
        }
        Ok(moved_to)
    }

    /// A directory of its own for one run's moved-out files (never one an earlier run filled:
    /// a rename onto a file of the same name would replace it), with its path from the root.
    fn new_doctor_dir(&self, run: &str) -> std::io::Result<(std::path::PathBuf, String)> {
        let parent = self.results_dir().join("doctor");
        fsio::ensure_dir(&parent)?;
        for n in 1..1000 {
            let name = if n == 1 {
                run.to_string()
            } else {
                format!("{run}-{n}")
            };
            match std::fs::create_dir(parent.join(&name)) {
                Ok(()) => {
                    return Ok((
                        parent.join(&name),
                        format!(".evolving/results/doctor/{name}"),
                    ))
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other("no free directory name"))
    }
}

/// rename(2), which moves a link itself, never what it points to.
fn move_out(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::rename(from, to)
}
