//! Large answers handed over as files in the daemon's private runtime directory.
//!
//! A check of a large store answers hundreds of kilobytes of rows. Sent through JSON-RPC, those
//! bytes are escaped, copied, framed, scanned and unescaped several times on each side, which
//! costs more than everything else a remembered check does. Instead evd writes the finished
//! rows once per evaluation to `<runtime dir>/answers/` (0700, the same private directory as the
//! socket) and answers with the file's name and length; the client reads it from the page cache.
//! A file lives as long as the evaluation that wrote it, and a little longer (the last few
//! released files are kept), so a client that was just handed a name finds the file there.
//! Anything unusual — no directory, a failed write, a client that cannot read it — falls back to
//! sending the rows inline.

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

static DIR: OnceLock<PathBuf> = OnceLock::new();
static SEQ: AtomicU64 = AtomicU64::new(0);
/// Files whose evaluation is gone, removed once more than [`KEEP_RELEASED`] are waiting.
static RELEASED: Mutex<VecDeque<PathBuf>> = Mutex::new(VecDeque::new());
const KEEP_RELEASED: usize = 4;

/// Start handing answers over as files under `<rt_dir>/answers` (emptied first: whatever a
/// previous daemon left there is stale).
pub fn init(rt_dir: &Path) -> std::io::Result<()> {
    let dir = rt_dir.join("answers");
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    crate::sys::paths::ensure_private_dir(&dir)?;
    let _ = DIR.set(dir);
    Ok(())
}

/// One answer on disk; released (and eventually removed) when dropped.
#[derive(Debug)]
pub struct AnswerFile {
    pub path: PathBuf,
    pub len: u64,
}

impl AnswerFile {
    /// Write `bytes` as a new answer file, or `None` when answers are not handed over as files
    /// (an in-process read) or the write failed.
    pub fn write(bytes: &[u8]) -> Option<AnswerFile> {
        let dir = DIR.get()?;
        let name = format!(
            "{}-{}.txt",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(&name);
        let tmp = dir.join(format!("{}{name}", crate::sys::fsio::TEMP_PREFIX));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return None;
        }
        Some(AnswerFile {
            path,
            len: bytes.len() as u64,
        })
    }
}

impl Drop for AnswerFile {
    fn drop(&mut self) {
        let Ok(mut released) = RELEASED.lock() else {
            let _ = std::fs::remove_file(&self.path);
            return;
        };
        released.push_back(std::mem::take(&mut self.path));
        while released.len() > KEEP_RELEASED {
            if let Some(old) = released.pop_front() {
                let _ = std::fs::remove_file(old);
            }
        }
    }
}
