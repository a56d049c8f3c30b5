//! `evctl cite` (a citation marker for the bytes of a file as they are now) and
//! `evctl verify --evidence` (every citation of the current decisions re-hashed).

use proto::evidence::Citation;
use proto::rpc::{EvidenceResult, Refusal, StoreRequest};

use crate::context::{self, Needs};
use crate::render::{self, Out};
use crate::rpc;
use crate::session::{local_read, Session};

/// The most a citation covers (as evd checks it).
const MAX_SPAN: u64 = evd::api::shared::MAX_SPAN;

#[derive(clap::Args, Debug)]
pub struct CiteArgs {
    /// The file, optionally with lines: PATH, PATH:LINE or PATH:FIRST-LAST (1-based,
    /// inclusive; a line's bytes include its newline). Relative to the working directory.
    pub target: String,
    /// A byte span instead of lines: B0-B1 (B0 included, B1 not); TARGET is then the path.
    #[arg(long, value_name = "B0-B1")]
    pub bytes: Option<String>,
}

/// `PATH[:FIRST[-LAST]]` → the path and the line range, when one is given (a path that merely
/// holds a colon and no number after it is taken whole).
fn split_target(t: &str) -> (&str, Option<(u64, u64)>) {
    if let Some((path, lines)) = t.rsplit_once(':') {
        let (a, b) = lines.split_once('-').unwrap_or((lines, lines));
        if let (Ok(a), Ok(b)) = (a.parse::<u64>(), b.parse::<u64>()) {
            return (path, Some((a, b)));
        }
    }
    (t, None)
}

/// The byte span of lines `first..=last` (1-based) of `bytes`.
fn line_span(bytes: &[u8], first: u64, last: u64) -> Result<(u64, u64), String> {
    if first == 0 || last < first {
        return Err(format!(
            "lines {first}-{last}: lines count from 1, the first no later than the last"
        ));
    }
    let mut starts = vec![0u64];
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' && i + 1 < bytes.len() {
            starts.push(i as u64 + 1);
        }
    }
    let lines = starts.len() as u64;
    if last > lines || bytes.is_empty() {
        return Err(format!(
            "the file has {} line(s); lines {first}-{last} are not all in it",
            if bytes.is_empty() { 0 } else { lines }
        ));
    }
    let start = starts[(first - 1) as usize];
    let end = starts
        .get(last as usize)
        .copied()
        .unwrap_or(bytes.len() as u64);
    Ok((start, end))
}

/// The citation of `a`'s bytes as they are now (what `evctl cite` prints).
pub fn cite_marker(s: &Session, a: &CiteArgs) -> Result<Citation, Refusal> {
    let refuse = |e: String| Refusal::refused("cite", e);
    let (given, lines) = match &a.bytes {
        Some(_) => (a.target.as_str(), None),
        None => split_target(&a.target),
    };
    let root = s.root(true);
    let rel = context::store_relative(&root, &s.cwd, given).map_err(refuse)?;
    proto::evidence::citable_path(&rel).map_err(refuse)?;
    let path = root.join(&rel);
    let m = std::fs::symlink_metadata(&path).map_err(|e| refuse(format!("{rel}: {e}")))?;
    if !m.is_file() {
        return Err(refuse(format!("{rel} is not a regular file")));
    }
    let bytes = std::fs::read(&path).map_err(|e| refuse(format!("{rel}: {e}")))?;
    let len = bytes.len() as u64;
    let (start, end) = match (&a.bytes, lines) {
        (Some(span), _) => {
            let parsed = span
                .split_once('-')
                .and_then(|(x, y)| Some((x.parse::<u64>().ok()?, y.parse::<u64>().ok()?)));
            let Some((x, y)) = parsed else {
                return Err(refuse(format!(
                    "--bytes {span}: give B0-B1, two byte offsets"
                )));
            };
            if x >= y || y > len {
                return Err(refuse(format!(
                    "--bytes {span}: the span must be non-empty and within the file's {len} bytes"
                )));
            }
            (x, y)
        }
        (None, Some((first, last))) => line_span(&bytes, first, last).map_err(refuse)?,
        (None, None) if len == 0 => {
            return Err(refuse(format!("{rel} is empty: there is nothing to cite")))
        }
        (None, None) => (0, len),
    };
    if end - start > MAX_SPAN {
        return Err(refuse(format!(
            "the span is {} bytes; a citation covers at most {MAX_SPAN}",
            end - start
        )));
    }
    let span = bytes.get(start as usize..end as usize).unwrap_or_default();
    Ok(proto::evidence::cite(&rel, start, end, span))
}

/// `evctl cite`: print the marker for the bytes as they are now.
pub fn cite(s: &Session, a: &CiteArgs) -> Out {
    match cite_marker(s, a) {
        Ok(c) => {
            let mut out = Out::default();
            if s.json {
                out.json(&c);
            } else {
                out.line(c.marker());
            }
            out
        }
        Err(e) => render::refusal(&e, s.json),
    }
}

/// Every citation of the current decisions, re-hashed: from evd, or in-process.
pub async fn evidence(s: &mut Session) -> Result<EvidenceResult, Refusal> {
    let ctx = s.context(true, Needs::default());
    let req = StoreRequest {
        context: ctx.clone(),
    };
    s.read(rpc!(req, evidence), || {
        local_read(&ctx, |st| evd::api::evidence(st, &req))
    })
    .await
}

/// The lines `verify --evidence` adds, and whether every citation holds.
pub fn render(r: &EvidenceResult, out: &mut Out) -> bool {
    let bad: Vec<_> = r.citations.iter().filter(|c| c.state != "holds").collect();
    for c in &bad {
        let what = if c.state == "malformed" {
            c.detail.clone()
        } else {
            format!("cites {} bytes {}-{}: {}", c.path, c.start, c.end, c.detail)
        };
        out.line(format!(
            "✗ evidence {} ground {}: {what}",
            c.file, c.ground_index
        ));
    }
    if bad.is_empty() {
        out.line(format!(
            "evidence: {} citation(s), every one holds",
            r.citations.len()
        ));
    } else {
        out.line(format!(
            "evidence: {} of {} citation(s) no longer hold",
            bad.len(),
            r.citations.len()
        ));
    }
    bad.is_empty()
}

/// `verify --evidence`: the audit, then every citation re-hashed; exit 1 when either fails.
/// With `--json`, one document: `{"verify": …, "evidence": …}`.
pub async fn verify_with_evidence(s: &mut Session) -> Out {
    let audit = crate::verbs::audit(s).await;
    let audit = match audit {
        Ok(a) => a,
        Err(e) => return render::refusal(&e, s.json),
    };
    let cited = match evidence(s).await {
        Ok(c) => c,
        Err(e) => return render::refusal(&e, s.json),
    };
    let holds = cited.holding == cited.citations.len();
    if s.json {
        let mut out = Out {
            code: u8::from(!audit.ok() || !holds),
            ..Out::default()
        };
        out.json(&serde_json::json!({"verify": audit, "evidence": cited}));
        return out;
    }
    let mut out = render::verify(&audit, false);
    if !render(&cited, &mut out) {
        out.code = 1;
    }
    out
}
