//! `evctl cite` (a citation marker for the bytes of a file as they are now) and
//! `evctl verify --evidence` (every citation of the current decisions re-hashed).

use proto::evidence::Citation;
use proto::rpc::{EvidenceResult, Refusal, StoreRequest};

use evd::api::shared::beneath::Root;

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

/// The byte span of lines `first..=last` (1-based) of the file `f` holds, and its bytes. The
/// file is read only as far as the span's last line, and a span past [`MAX_SPAN`] is refused
/// as soon as it is seen (a citation of a few lines at the top of a huge file reads a few
/// lines). Only to say how many lines a too-short file has is it read to its end.
fn line_span(
    f: &mut impl std::io::BufRead,
    first: u64,
    last: u64,
) -> Result<(u64, u64, Vec<u8>), String> {
    if first == 0 || last < first {
        return Err(format!(
            "lines {first}-{last}: lines count from 1, the first no later than the last"
        ));
    }
    let mut line = 1u64;
    let mut at = 0u64;
    let mut start = None;
    let mut span = Vec::new();
    let mut last_seen = None;
    loop {
        let buf = f.fill_buf().map_err(|e| e.to_string())?;
        if buf.is_empty() {
            break;
        }
        let n = buf.len();
        let mut used = n;
        for (i, b) in buf.iter().enumerate() {
            last_seen = Some(*b);
            if start.is_none() && line == first {
                start = Some(at + i as u64);
            }
            if start.is_some() && line <= last {
                span.push(*b);
                if span.len() as u64 > MAX_SPAN {
                    return Err(format!(
                        "the span is more than {MAX_SPAN} bytes; a citation covers at most \
                         {MAX_SPAN}"
                    ));
                }
            }
            if *b == b'\n' {
                line += 1;
                if line > last {
                    used = i + 1;
                    break;
                }
            }
        }
        f.consume(used);
        at += used as u64;
        if line > last {
            break;
        }
    }
    match start {
        // The last line may lack its newline: the span then runs to the end of the file.
        Some(start) if line > last || (line == last && !span.is_empty()) => {
            let end = start + span.len() as u64;
            Ok((start, end, span))
        }
        _ => {
            // Count the rest, to say how many lines there are.
            let mut rest = Vec::new();
            std::io::Read::read_to_end(f, &mut rest).map_err(|e| e.to_string())?;
            let total = at + rest.len() as u64;
            let newlines = line - 1 + rest.iter().filter(|b| **b == b'\n').count() as u64;
            let ends_open = total > 0 && rest.last().copied().or(last_seen) != Some(b'\n');
            let lines = if total == 0 {
                0
            } else {
                newlines + u64::from(ends_open)
            };
            Err(format!(
                "the file has {lines} line(s); lines {first}-{last} are not all in it"
            ))
        }
    }
}

/// The citation of `a`'s bytes as they are now (what `evctl cite` prints). The file is opened
/// the way evd reads evidence (no link anywhere below the repository's root, nothing but a
/// regular file) and read only as far as the span.
pub fn cite_marker(s: &Session, a: &CiteArgs) -> Result<Citation, Refusal> {
    use std::io::{Read, Seek, SeekFrom};
    let refuse = |e: String| Refusal::refused("cite", e);
    let (given, lines) = match &a.bytes {
        Some(_) => (a.target.as_str(), None),
        None => split_target(&a.target),
    };
    let root = s.root(true);
    let rel = context::store_relative(&root, &s.cwd, given).map_err(refuse)?;
    proto::evidence::citable_path(&rel).map_err(refuse)?;
    let abs = root.join(&rel).display().to_string();
    let named = |e: std::io::Error| {
        let text = e.to_string().replace(&abs, &rel);
        refuse(if text.starts_with(&rel) {
            text
        } else {
            format!("{rel}: {text}")
        })
    };
    let mut f = Root::new(&root)
        .open_file(std::path::Path::new(&rel))
        .map_err(named)?;
    let len = f.metadata().map_err(named)?.len();
    let (start, end, span) = match (&a.bytes, lines) {
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
            if y - x > MAX_SPAN {
                return Err(refuse(format!(
                    "the span is {} bytes; a citation covers at most {MAX_SPAN}",
                    y - x
                )));
            }
            f.seek(SeekFrom::Start(x)).map_err(named)?;
            let mut bytes = Vec::with_capacity((y - x) as usize);
            (&mut f)
                .take(y - x)
                .read_to_end(&mut bytes)
                .map_err(named)?;
            (x, x + bytes.len() as u64, bytes)
        }
        (None, Some((first, last))) => {
            line_span(&mut std::io::BufReader::new(f), first, last).map_err(refuse)?
        }
        (None, None) if len == 0 => {
            return Err(refuse(format!("{rel} is empty: there is nothing to cite")))
        }
        (None, None) if len > MAX_SPAN => {
            return Err(refuse(format!(
                "the span is {len} bytes; a citation covers at most {MAX_SPAN}"
            )))
        }
        (None, None) => {
            let mut bytes = Vec::with_capacity(len as usize);
            (&mut f)
                .take(MAX_SPAN + 1)
                .read_to_end(&mut bytes)
                .map_err(named)?;
            (0, bytes.len() as u64, bytes)
        }
    };
    if end - start > MAX_SPAN {
        return Err(refuse(format!(
            "the span is {} bytes; a citation covers at most {MAX_SPAN}",
            end - start
        )));
    }
    Ok(proto::evidence::cite(&rel, start, end, &span))
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
