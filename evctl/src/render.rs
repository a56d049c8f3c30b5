//! Turning answers into what ev prints: the plain bytes upstream writes, the rich terminal form,
//! and the `--json` form. Nothing here talks to the daemon.

use proto::json::q;
use proto::rpc::{
    DaemonStatus, DecideResult, InitResult, ListResult, LogResult, Refusal, VerifyResult, Warning,
};
use serde::Serialize;

use crate::style::Style;

/// Which stream a piece of output goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What a command prints, in the order it prints it (the interleaving of stdout and stderr is
/// part of the interface: upstream prints verify's `✗` lines before its count), and its exit
/// code.
#[derive(Debug, Default)]
pub struct Out {
    pub parts: Vec<(Stream, String)>,
    pub code: u8,
    /// Files whose bytes go to stdout as they are (an answer file evd wrote: megabytes that
    /// need not pass through this process's memory), each before the part at its index.
    pub files: Vec<(usize, std::fs::File)>,
}

impl Out {
    fn push(&mut self, stream: Stream, s: &str) {
        match self.parts.last_mut() {
            Some((last, text)) if *last == stream => text.push_str(s),
            _ => self.parts.push((stream, s.to_string())),
        }
    }
    /// Raw text on stdout (no newline added).
    pub fn raw(text: String) -> Out {
        let mut out = Out::default();
        out.push(Stream::Stdout, &text);
        out
    }
    /// A usage error: `error: <e>` on stderr, exit 2.
    pub fn usage(e: &str) -> Out {
        let mut out = Out {
            code: 2,
            ..Out::default()
        };
        out.err(format!("error: {e}"));
        out
    }
    pub fn line(&mut self, s: impl AsRef<str>) {
        self.push(Stream::Stdout, &format!("{}\n", s.as_ref()));
    }
    pub fn err(&mut self, s: impl AsRef<str>) {
        self.push(Stream::Stderr, &format!("{}\n", s.as_ref()));
    }
    /// Write every part to its stream, in order.
    /// `file`'s bytes on stdout, after everything pushed so far.
    pub fn stdout_file(&mut self, file: std::fs::File) {
        self.files.push((self.parts.len(), file));
    }

    pub fn emit(&self) {
        use std::io::Write;
        let copy = |at: usize| {
            for (_, f) in self.files.iter().filter(|(i, _)| *i == at) {
                let mut out = std::io::stdout().lock();
                let _ = out.flush();
                let mut f = f;
                let _ = std::io::copy(&mut f, &mut out);
            }
        };
        for (i, (stream, text)) in self.parts.iter().enumerate() {
            copy(i);
            let _ = match stream {
                Stream::Stdout => std::io::stdout().write_all(text.as_bytes()),
                Stream::Stderr => {
                    let _ = std::io::stdout().flush();
                    std::io::stderr().write_all(text.as_bytes())
                }
            };
        }
        copy(self.parts.len());
        let _ = std::io::stdout().flush();
    }
    pub fn warnings(&mut self, w: &[Warning]) {
        for w in w {
            self.err(&w.message);
        }
    }
    /// One compact JSON document on stdout.
    pub fn json<T: Serialize>(&mut self, v: &T) {
        let text = serde_json::to_value(v)
            .map(|v| proto::json::compact(&v))
            .unwrap_or_else(|e| format!("{{\"error\":{}}}", q(&e.to_string())));
        self.line(text);
    }
}

/// A refusal: warnings, then `error: <message>`, exit 1. With `--json`, one JSON object on stdout.
pub fn refusal(r: &Refusal, json: bool) -> Out {
    // A retried write that had been applied already is a success whose words were lost.
    let applied = r.code == proto::rpc::codes::ALREADY_APPLIED;
    let mut out = Out {
        code: if applied { 0 } else { 1 },
        ..Out::default()
    };
    if applied && !json {
        out.warnings(&r.warnings);
        out.err(format!("note: evctl: {}", r.message));
        return out;
    }
    if json {
        out.json(&serde_json::json!({
            "error": {"code": r.code, "reason": r.reason, "message": r.message},
            "warnings": r.warnings,
        }));
    } else {
        out.warnings(&r.warnings);
        out.err(format!("error: {}", r.message));
    }
    out
}

pub fn init(r: &InitResult, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
    } else if r.created {
        out.line("created .evolving/  (content-addressed chain + results cache)");
    } else {
        out.line(".evolving/ already exists (no-op)");
    }
    out
}

pub fn decide(r: &DecideResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(r);
    } else if r.dry_run {
        out.line(format!(
            "would record {} ({} ground(s)) — dry run, nothing written",
            r.id, r.ground_count
        ));
    } else {
        out.line(format!("recorded {} ({} ground(s))", r.id, r.ground_count));
    }
    out
}

pub fn list(r: &ListResult, style: Style, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
        return out;
    }
    if r.entries.is_empty() {
        out.line("no decisions yet");
        return out;
    }
    if !style.rich {
        // Plain rows sort by the whole rendered line (the daemon renders the same lines).
        return Out::raw(proto::rpc::list_plain_lines(&r.entries));
    }
    let tags = |e: &proto::rpc::ListEntry, sep: &str| {
        let mut s = String::new();
        for (k, v) in [
            ("authority", &e.authority),
            ("jurisdiction", &e.jurisdiction),
            ("source_ref", &e.source_ref),
        ] {
            if let Some(v) = v {
                s.push_str(&format!("{sep}{k}={v}"));
            }
        }
        s
    };
    // Rich rows stay in id order.
    for e in &r.entries {
        if !e.parseable {
            out.line(style.dim(&format!("? {} <unparseable>", e.file)));
            continue;
        }
        let decision = q(e.decision.as_deref().unwrap_or(""));
        let status = e.status.as_deref().unwrap_or("");
        let agent = e.provenance.as_deref() == Some(proto::vocab::AGENT_PROPOSED);
        out.line(format!(
            "{} {}  {}  {}",
            style.provenance_glyph(agent),
            style.bold(&decision),
            style.id(&e.file),
            style.dim(&format!("{status}{}", tags(e, " · ")))
        ));
    }
    out
}

/// The plain listing evd handed over as a file (of `len` bytes).
pub fn list_plain(file: std::fs::File, len: u64) -> Out {
    let mut out = Out::default();
    if len == 0 {
        out.line("no decisions yet");
    } else {
        out.stdout_file(file);
    }
    out
}

pub fn log(r: &LogResult, style: Style, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
        if r.unreadable.is_some() {
            out.code = 1;
        }
        return out;
    }
    if r.entries.is_empty() && r.broken_at.is_none() && r.unreadable.is_none() {
        out.line("no decisions yet");
        return out;
    }
    for e in &r.entries {
        if style.rich {
            let agent = e.provenance.as_deref() == Some(proto::vocab::AGENT_PROPOSED);
            let verb = if let Some(s) = &e.supersedes {
                format!("supersedes {s}")
            } else if let Some(rt) = &e.ratifies {
                format!("ratifies {rt}")
            } else if agent {
                "proposed".to_string()
            } else {
                "decided".to_string()
            };
            let mut row = format!(
                "{} {}  {}  {}  {}",
                style.provenance_glyph(agent),
                style.dim(&verb),
                style.bold(&q(&e.decision)),
                style.id(&e.id),
                style.dim(&e.blame)
            );
            if let Some(child) = &e.superseded_by {
                row.push_str(&format!(
                    "  {}",
                    style.dim(&format!("superseded by {child}"))
                ));
            }
            out.line(row);
        } else {
            let mut row = format!("{}\t{}\t{}", e.id, e.status, q(&e.decision));
            if let Some(child) = &e.superseded_by {
                row.push_str(&format!("\tsuperseded-by:{child}"));
            }
            out.line(row);
        }
    }
    if let Some(id) = &r.broken_at {
        out.err(format!("warning: {id} not found (broken lineage)"));
    }
    if let Some((id, e)) = &r.unreadable {
        out.err(format!("error: reading {id}: {e}"));
        out.code = 1;
    }
    out
}

pub fn verify(r: &VerifyResult, json: bool) -> Out {
    let mut out = Out {
        code: u8::from(!r.ok()),
        ..Out::default()
    };
    if json {
        out.json(r);
        return out;
    }
    out.warnings(&r.warnings);
    if let Some(vectors) = &r.vectors {
        for v in vectors {
            let mark = if v.pass { "✓" } else { "✗" };
            out.line(format!("{mark} {}: {} (want {})", v.name, v.got, v.want));
        }
        return out;
    }
    if r.violations.is_empty() {
        out.line("✓ chain intact: every id == hash(payload), lineage forward-only");
        out.line("✓ every tick validates against the closed schema (R1) and check shape (R2)");
    } else {
        for v in &r.violations {
            out.line(format!("✗ {v}"));
        }
        out.err(format!("{} violation(s)", r.violations.len()));
    }
    out
}

fn human_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{}.{:01}s", s, (ms % 1000) / 100),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

pub fn status(s: &DaemonStatus, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(s);
        return out;
    }
    out.line(format!(
        "evd pid {}  version {}  protocol {}  up {}",
        s.pid,
        s.version,
        s.protocol,
        human_ms(s.uptime_ms)
    ));
    out.line(format!("socket   {}", s.socket));
    out.line(format!("build    {}", s.build_id));
    let r = &s.resources;
    out.line(format!(
        "holds    {} thread(s)  {} fd(s)  {} RSS  {} inotify instance(s) / {} watch(es)  {} connection(s)",
        r.threads,
        r.open_fds,
        human_bytes(r.rss_bytes),
        r.inotify_instances,
        r.inotify_watches,
        r.connections
    ));
    if s.stores.is_empty() {
        out.line("stores   none open yet");
    } else {
        out.line(format!("stores   {}", s.stores.len()));
        for st in &s.stores {
            let head = if st.head.is_empty() {
                "-"
            } else {
                st.head.as_str()
            };
            out.line(format!(
                "  {}  {} tick(s)  head {}  {} write(s) since {}  idle {}",
                st.root,
                st.ticks,
                head,
                st.writes,
                st.opened_at,
                human_ms(st.idle_ms)
            ));
            if !st.watch.is_empty() {
                out.line(format!("    {}", st.watch));
            }
        }
    }
    out
}

fn human_bytes(n: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else {
        format!("{} KiB", n / 1024)
    }
}

pub fn propose(r: &proto::rpc::ProposeResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(&r.envelope);
    } else if r.deduped {
        out.line(format!(
            "already proposed {} as {} for this source_ref — no-op (awaiting ratification)",
            q(&r.envelope.decision),
            r.id
        ));
    } else {
        out.line(format!(
            "proposed {} ({} ground(s)) — agent-proposed, awaiting ratification",
            r.id, r.ground_count
        ));
    }
    out
}

pub fn ratify(r: &proto::rpc::RatifyResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(r);
    } else {
        out.line(format!(
            "ratified {} → {} (now user-ruled, human-now)",
            r.proposal_id, r.child_id
        ));
    }
    out
}

pub fn pending(r: &proto::rpc::PendingResult, style: Style, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
        return out;
    }
    if r.proposals.is_empty() {
        match &r.filter {
            Some(k) => out.line(format!(
                "no proposals awaiting ratification for source_ref {k}"
            )),
            None => out.line("no proposals awaiting ratification"),
        }
        return out;
    }
    for p in &r.proposals {
        if style.rich {
            let mut meta = p.blame.clone();
            if let Some(k) = &p.source_ref {
                meta.push_str(&format!(" · {k}"));
            }
            meta.push_str(&format!(" · {}", p.held_since));
            out.line(format!(
                "{} {}  {}  {}",
                style.provenance_glyph(true),
                style.bold(&q(&p.decision)),
                style.id(&p.id),
                style.dim(&meta)
            ));
        } else {
            out.line(format!(
                "{}\t{}\t{}\t{}",
                p.id,
                p.status,
                q(&p.decision),
                p.blame
            ));
        }
    }
    if style.rich {
        out.line(style.dim(&format!(
            "{} awaiting ratification — evctl ratify <id> --blame <you>",
            r.proposals.len()
        )));
    }
    out
}

pub fn guard(r: &proto::rpc::GuardResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(r);
    } else {
        out.line(format!("bound; wrote child {}", r.child_id));
    }
    out
}

pub fn supersede(r: &proto::rpc::SupersedeResult, json: bool) -> Out {
    let mut out = Out::default();
    out.warnings(&r.warnings);
    if json {
        out.json(r);
    } else {
        match r.ground_count {
            None => out.line(format!(
                "re-tagged {} (supersedes {})",
                r.child_id, r.superseded_id
            )),
            Some(n) => out.line(format!(
                "recorded {} ({n} ground(s)) — supersedes {}",
                r.child_id, r.superseded_id
            )),
        }
    }
    out
}

pub fn check(r: &proto::rpc::CheckResult, style: Style, json: bool, exit_on_red: bool) -> Out {
    check_with(r, None, style, json, exit_on_red)
}

/// [`check`], the plain rows in `rows` (an answer file of `len` bytes) when given.
pub fn check_with(
    r: &proto::rpc::CheckResult,
    rows: Option<(std::fs::File, u64)>,
    style: Style,
    json: bool,
    exit_on_red: bool,
) -> Out {
    let mut out = Out {
        code: u8::from(exit_on_red && r.gating),
        ..Out::default()
    };
    out.warnings(&r.warnings);
    if json {
        out.json(r);
        return out;
    }
    let unreadable = |e: serde_json::Error| {
        let e = Refusal::io(format!("evd sent unreadable rows: {e}"));
        refusal(&e, json)
    };
    // Each printed row's final label, for the note after a run.
    let mut labels: Vec<String> = Vec::new();
    if let Some((mut file, len)) = rows {
        if len == 0 {
            out.line("no test-bound grounds to check");
            evidence_rows(r, style, &mut out);
            return out;
        }
        if r.ran {
            // The note after a run needs each row's label: read the rows (a run takes far
            // longer than this anyway).
            let mut text = String::new();
            if let Err(e) = std::io::Read::read_to_string(&mut file, &mut text) {
                let e = Refusal::io(format!("reading evd's answer file: {e}"));
                return refusal(&e, json);
            }
            labels = text
                .lines()
                .map(|l| l.split('\t').next().unwrap_or("").to_string())
                .collect();
            out.push(Stream::Stdout, &text);
        } else {
            out.stdout_file(file);
        }
    } else if let Some(p) = &r.plain {
        match p.text() {
            Ok(text) if text.is_empty() => {
                out.line("no test-bound grounds to check");
                evidence_rows(r, style, &mut out);
                return out;
            }
            Ok(text) => {
                if r.ran {
                    labels = text
                        .lines()
                        .map(|l| l.split('\t').next().unwrap_or("").to_string())
                        .collect();
                }
                out.push(Stream::Stdout, &text)
            }
            Err(e) => return unreadable(e),
        }
    } else {
        let rows: Vec<proto::rpc::RowView<'_>> = match &r.table {
            Some(t) => match t.rows() {
                Ok(rows) => rows,
                Err(e) => return unreadable(e),
            },
            None => r.rows.iter().map(proto::rpc::CheckRow::view).collect(),
        };
        if rows.is_empty() {
            out.line("no test-bound grounds to check");
            evidence_rows(r, style, &mut out);
            return out;
        }
        if r.ran {
            labels = rows.iter().map(|row| row.label().to_string()).collect();
        }
        for row in &rows {
            if style.rich {
                let tail = row.memo_reason().unwrap_or(row.detail());
                out.line(format!(
                    "{} {}  {}  {}  {}",
                    style.verdict_glyph(row.class()),
                    style.hue(row.class(), row.label()),
                    style.bold(&q(row.decision())),
                    style.id(row.tick_id()),
                    style.dim(&format!("{} · {tail}", q(row.claim())))
                ));
            } else {
                out.line(proto::rpc::plain_row(
                    row.label(),
                    row.file(),
                    row.claim(),
                    row.detail(),
                ));
            }
        }
    }
    evidence_rows(r, style, &mut out);
    let note_after_run = if r.ran {
        colocation_note(labels.iter().map(String::as_str))
    } else {
        None
    };
    let harvested = (r.harvested_unproven > 0).then(|| {
        format!(
            "harvested-unproven: {} of {} test bindings have no counter-test",
            r.harvested_unproven, r.total_test_bindings
        )
    });
    let note = if r.ran {
        None
    } else if r.total_test_bindings > r.harvested_unproven {
        Some("note: run `evctl check --run` to re-run each bound check and prove each declared counter-test's falsifiability")
    } else {
        Some("note: run `evctl check --run` to re-run each bound check and record a fresh receipt")
    };
    if style.rich {
        out.line(style.dim(&format!(
            "{} gating · {} green · {} non-gating",
            r.tally.gating, r.tally.green, r.tally.non_gating
        )));
        if let Some(h) = harvested {
            out.line(style.hue("attention", &h));
        }
        if r.tally.gating > 0 {
            out.line(style.dim("tip: evctl why <selector> · evctl reopen <id> — resurface a red"));
        }
        if let Some(n) = note {
            out.line(style.dim(n));
        }
    } else {
        if let Some(h) = harvested {
            out.line(h);
        }
        if let Some(n) = note {
            out.line(n);
        }
    }
    if let Some(n) = note_after_run {
        out.err(n);
    }
    out
}

/// The decisions whose cited evidence no longer holds, after the verdict rows.
fn evidence_rows(r: &proto::rpc::CheckResult, style: Style, out: &mut Out) {
    for e in &r.evidence {
        if style.rich {
            let class = if e.gating {
                "attention"
            } else {
                "informational"
            };
            out.line(format!(
                "{} {}  {}  {}  {}",
                style.verdict_glyph(class),
                style.hue(class, &e.label),
                style.bold(&q(&e.decision)),
                style.id(&e.tick_id),
                style.dim(&format!(
                    "evidence {} bytes {}-{}: {}{}",
                    e.path,
                    e.start,
                    e.end,
                    e.detail,
                    e.since
                        .as_deref()
                        .map(|s| format!(", since {s}"))
                        .unwrap_or_default()
                ))
            ));
        } else {
            out.line(e.plain());
        }
    }
}

/// After `check --run`: when the rows are stuck (some `stale`, `not-run` or `unproven`) and none
/// resolved to `green` or `red`, the runs could not settle anything, which is what happens when
/// the git state read is not the guarded code's. Every other label counts as neither.
pub fn colocation_note<'a>(labels: impl IntoIterator<Item = &'a str>) -> Option<&'static str> {
    let (mut stuck, mut resolved) = (false, false);
    for label in labels {
        match label {
            "stale" | "not-run" | "unproven" => stuck = true,
            "green" | "red" => resolved = true,
            _ => {}
        }
    }
    (stuck && !resolved).then_some(
        "note: ran the bound checks but none resolved pass/fail (all stale / not-run / unproven) — evctl reads git state from this directory; if the ledger is separate from the guarded code, run evctl in the working tree, or set staleness_ref = local-head",
    )
}

pub fn brief(r: &proto::rpc::BriefResult, style: Style, json: bool) -> Out {
    if json {
        return Out::raw(r.contract_line());
    }
    let mut out = Out::default();
    if r.total == 0 {
        out.line("no user-ruled decisions");
        return out;
    }
    let glyph = style.provenance_glyph(false);
    if style.rich {
        out.line(format!(
            "{glyph} {}",
            style.bold(&format!("{} user-ruled decisions", r.total))
        ));
    }
    for d in &r.decisions {
        match (style.rich, d.bound) {
            (true, bound) => {
                let mut row = format!(
                    "{glyph} {}  {}",
                    style.bold(&q(&d.decision)),
                    style.id(&d.id)
                );
                if !bound {
                    row.push_str(&format!("  {}", style.hue("attention", "advisory")));
                }
                out.line(row);
            }
            (false, true) => out.line(format!("{}  [user-ruled]", d.decision)),
            (false, false) => out.line(format!("{}  [user-ruled · advisory]", d.decision)),
        }
        for road in &d.rejected_roads {
            let text = format!("rejected {}: {}", road.option, road.claim);
            if style.rich {
                out.line(format!("    {}", style.dim(&text)));
            } else {
                out.line(format!("  {text}"));
            }
        }
    }
    if r.elided > 0 {
        let mut footer = format!("… {} more user-ruled decision(s)", r.elided);
        if r.elided_load_bearing > 0 {
            footer.push_str(&format!(", {} with rejected roads", r.elided_load_bearing));
        }
        footer.push_str(" — `evctl list` for all");
        out.line(if style.rich {
            style.dim(&footer)
        } else {
            footer
        });
    }
    if r.advisory > 0 {
        let note = format!(
            "{} of {} advisory — nothing watches them (heed only); bind a check to catch a violation",
            r.advisory, r.total
        );
        out.line(if style.rich {
            style.hue("attention", &note)
        } else {
            note
        });
    }
    out
}

pub fn why(r: &proto::rpc::WhyResult, json: bool) -> Out {
    let mut out = Out::default();
    if r.matches.is_empty() {
        out.code = 1;
    }
    if json {
        out.json(r);
        return out;
    }
    if r.matches.is_empty() {
        out.err(format!("{} guards nothing", q(&r.selector)));
    }
    for m in &r.matches {
        out.line(format!(
            "{}\t{}\tguards: {} ({})",
            m.file,
            q(&m.decision),
            q(&m.claim),
            m.supports
        ));
    }
    out
}

/// `guards`: one line per guarding decision: the verdict that speaks for it, the tick, the
/// decision and the paths it guards (tab-separated, like `why`).
pub fn guards(r: &proto::rpc::GuardsResult, json: bool) -> Out {
    let mut out = Out::default();
    if r.decisions.is_empty() {
        out.code = 1;
    }
    if json {
        out.json(r);
        return out;
    }
    if r.decisions.is_empty() {
        out.err("no current decision guards these paths");
    }
    for d in &r.decisions {
        let label = d.worst_ground(None).map_or("-", |g| g.label.as_str());
        out.line(format!(
            "{label}\t{}\t{}\t{}",
            d.tick_id,
            q(&d.decision),
            d.matched.join(", ")
        ));
    }
    out
}

pub fn reopen(r: &proto::rpc::ReopenResult, style: Style, json: bool) -> Out {
    let mut out = Out::default();
    if json {
        out.json(r);
        return out;
    }
    let edges = [
        ("authority", &r.authority),
        ("jurisdiction", &r.jurisdiction),
        ("source_ref", &r.source_ref),
        ("supersedes", &r.supersedes),
        ("ratifies", &r.ratifies),
        ("superseded by", &r.superseded_by),
    ];
    if style.rich {
        out.line(format!(
            "{} {}  {}",
            style.provenance_glyph(r.agent_proposed),
            style.bold(&q(&r.decision)),
            style.id(&r.id)
        ));
        if !r.observe.is_empty() {
            out.line(format!(
                "  {}",
                style.dim(&format!("observe: {}", q(&r.observe)))
            ));
        }
        let tags: Vec<String> = edges
            .iter()
            .filter_map(|(k, v)| {
                v.as_ref().map(|v| match *k {
                    "authority" | "jurisdiction" | "source_ref" => format!("{k}={v}"),
                    _ => format!("{k} {v}"),
                })
            })
            .collect();
        if !tags.is_empty() {
            out.line(format!("  {}", style.dim(&tags.join(" · "))));
        }
    } else {
        out.line(format!("decision {}: {}", r.id, q(&r.decision)));
        if !r.observe.is_empty() {
            out.line(format!("observe: {}", q(&r.observe)));
        }
        for (k, v) in edges {
            if let Some(v) = v {
                out.line(format!("{k}: {v}"));
            }
        }
    }
    for g in &r.grounds {
        let head = format!("[{}]", g.supports);
        let claim = q(&g.claim);
        let reference = q(g.reference.as_deref().unwrap_or(""));
        let sha8: String = g
            .verified_at_sha
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(8)
            .collect();
        let label = g.verdict.as_deref().unwrap_or("n/a");
        let line = match (g.check.as_str(), style.rich) {
            ("test", false) => {
                format!("  {head} {claim} — test {reference} frozen@{sha8} now: {label}")
            }
            ("person", false) => format!("  {head} {claim} — person {reference}"),
            (_, false) => format!("  {head} {claim}"),
            ("test", true) => format!(
                "  {}  {head} {}  {}",
                style.verdict(label),
                style.bold(&claim),
                style.dim(&format!("test {reference} frozen@{sha8}"))
            ),
            ("person", true) => format!(
                "  {} {head} {}  {}",
                style.dot(),
                style.bold(&claim),
                style.dim(&format!("person {reference}"))
            ),
            (_, true) => format!("  {} {head} {}", style.dot(), style.bold(&claim)),
        };
        out.line(line);
    }
    out
}

/// One pushed event as `evctl watch` prints it: like a check row, with what it was before
/// (`gone` when the ground left the view), or a `resync` line.
pub fn watch_line(ev: &proto::rpc::WatchEvent, json: bool) -> String {
    use proto::rpc::WatchEvent;
    if json {
        return serde_json::to_value(ev)
            .map(|v| proto::json::compact(&v))
            .unwrap_or_default();
    }
    match ev {
        WatchEvent::Changed(c) => format!(
            "{}\t{}\t{}\t(was {})",
            c.new.as_deref().unwrap_or("gone"),
            c.tick_id,
            q(&c.claim),
            c.old.as_deref().unwrap_or("not in view")
        ),
        WatchEvent::Resync { reason } => format!("resync\t-\t-\t({reason})"),
    }
}

#[cfg(test)]
mod tests {
    use super::colocation_note;

    #[test]
    fn the_colocation_note_needs_a_stuck_row_and_no_resolved_one() {
        for (labels, note) in [
            (&["stale"][..], true),
            (&["not-run", "unproven"], true),
            (&["stale", "dirty"], true),
            (
                &[
                    "unproven",
                    "memo",
                    "exempt",
                    "gray->red",
                    "silently-unbound",
                ],
                true,
            ),
            (&["dirty"], false),
            (&["exempt"], false),
            (&["memo", "gray->red", "silently-unbound"], false),
            (&["green", "not-run"], false),
            (&["stale", "red"], false),
            (&[], false),
        ] {
            assert_eq!(
                colocation_note(labels.iter().copied()).is_some(),
                note,
                "{labels:?}"
            );
        }
        let text = colocation_note(["stale"]).unwrap_or_default();
        assert!(text.contains("— evctl reads git state"), "{text}");
        assert!(text.contains("run evctl in the working tree"), "{text}");
    }
}
