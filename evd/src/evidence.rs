//! Evidence cited by grounds ([`proto::evidence`]), checked against the files: at every write
//! door (a citation must hold when it is recorded) and whenever it is asked about since.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use proto::evidence::{citations, Citation};
use proto::rpc::Refusal;
use proto::Tick;

/// The largest span a citation may cover (and so the most read to check one).
pub const MAX_SPAN: u64 = 16 << 20;

/// What a citation's file says now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// The span's bytes still hash as cited.
    Holds,
    /// They hash otherwise now (the sha256 they have).
    Drifted(String),
    /// The file ends before the span does (its length now).
    OutOfBounds(u64),
    /// The file cannot be read as a regular file (why).
    Unreadable(String),
}

impl State {
    pub fn holds(&self) -> bool {
        matches!(self, State::Holds)
    }

    /// How it reads in a row or a refusal.
    pub fn describe(&self) -> String {
        match self {
            State::Holds => "holds".into(),
            State::Drifted(now) => format!(
                "its bytes changed (they hash to {} now)",
                &now[..12.min(now.len())]
            ),
            State::OutOfBounds(len) => {
                format!("the file is {len} bytes now; the span runs past its end")
            }
            State::Unreadable(why) => why.clone(),
        }
    }

    /// The short label: `holds`, `drifted`, `out-of-bounds`, `unreadable`.
    pub fn label(&self) -> &'static str {
        match self {
            State::Holds => "holds",
            State::Drifted(_) => "drifted",
            State::OutOfBounds(_) => "out-of-bounds",
            State::Unreadable(_) => "unreadable",
        }
    }
}

/// Read `c`'s span from the repository at `root` and compare its hash. Never follows a link.
pub fn state(root: &Path, c: &Citation) -> State {
    if c.end.saturating_sub(c.start) > MAX_SPAN {
        return State::Unreadable(format!(
            "the span is {} bytes; a citation covers at most {MAX_SPAN}",
            c.end - c.start
        ));
    }
    let path = root.join(&c.path);
    // Every directory on the way, and the file, must not be a link out of the repository.
    let mut at = root.to_path_buf();
    for part in c.path.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return State::Unreadable(format!(
                    "{} is a symlink (evd never follows links to evidence)",
                    c.path
                ))
            }
            Ok(_) => {}
            Err(e) => return State::Unreadable(format!("{}: {e}", c.path)),
        }
    }
    let read = || -> std::io::Result<State> {
        let mut f = std::fs::File::open(&path)?;
        let m = f.metadata()?;
        if !m.is_file() {
            return Ok(State::Unreadable(format!(
                "{} is not a regular file",
                c.path
            )));
        }
        if m.len() < c.end {
            return Ok(State::OutOfBounds(m.len()));
        }
        f.seek(SeekFrom::Start(c.start))?;
        let mut span = Vec::with_capacity((c.end - c.start) as usize);
        f.take(c.end - c.start).read_to_end(&mut span)?;
        if (span.len() as u64) < c.end - c.start {
            return Ok(State::OutOfBounds(c.start + span.len() as u64));
        }
        let now = proto::evidence::sha256_hex(&span);
        Ok(if now == c.sha256 {
            State::Holds
        } else {
            State::Drifted(now)
        })
    };
    read().unwrap_or_else(|e| State::Unreadable(format!("{}: {e}", c.path)))
}

/// Every citation of `tick`'s grounds, with the ground it is in; an error names the first
/// marker that is not a citation.
pub fn of_tick(tick: &Tick) -> Result<Vec<(usize, Citation)>, (usize, String)> {
    let mut out = Vec::new();
    for (i, g) in tick.grounds.iter().enumerate() {
        for c in citations(&g.claim).map_err(|e| (i, e))? {
            out.push((i, c));
        }
    }
    Ok(out)
}

/// The write door: every marker in `tick`'s grounds is a whole citation whose span holds now.
pub fn check_tick(root: &Path, tick: &Tick) -> Result<(), Refusal> {
    let cited = of_tick(tick).map_err(|(i, e)| {
        Refusal::refused(
            "evidence_marker",
            format!("ground {i}: {e}; nothing was written"),
        )
    })?;
    for (i, c) in cited {
        let st = state(root, &c);
        if !st.holds() {
            return Err(Refusal::refused(
                "evidence_mismatch",
                format!(
                    "ground {i} cites {} bytes {}-{}, but {}; cite it again (`evctl cite`); nothing was written",
                    c.path,
                    c.start,
                    c.end,
                    st.describe()
                ),
            ));
        }
    }
    Ok(())
}
