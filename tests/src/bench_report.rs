//! `evbench report`: `evctl report` on the generated store of each size asked for (`--only
//! 100k` for the row), its ledger first filled to 100,000 client events (two agents'
//! plans and executions, through `ev.ledger.append` in batches) and its verdicts checked, so
//! every section of the page has data: the time of the whole `evctl report` process (three
//! runs, warm evd) and the size of the page.

use std::time::Instant;

use serde_json::json;

use super::{fmt_dur, size_fixtures, stats, Report, Res, World};

/// Whether `evbench report` was asked for.
pub fn selected() -> bool {
    std::env::args().skip(1).any(|a| a == "report")
}

const EVENTS: usize = 100_000;
const RUNS: usize = 3;

pub fn run(w: &World, report: &mut Report, started: Instant) -> Res<()> {
    println!("\nreport: evctl report at each size, with a 100,000-event ledger (release build)");
    let mut daemon = w.start_daemon()?;
    let mut summary = Vec::new();
    for fx in size_fixtures()? {
        let root = &fx.root;
        let ctx = json!({"store": root.display().to_string()});
        let t = Instant::now();
        let n = super::bench_ledger::fill(w, &ctx, EVENTS, 0)?;
        println!(
            "  {}: {n} ledger events appended in {}",
            fx.label,
            fmt_dur(t.elapsed())
        );
        w.evctl_output(root, &["check"])?;
        let page = fx.dir.path().join("report.html");
        let page_s = page.display().to_string();
        let mut took = Vec::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            w.evctl(root, &["report", "--out", &page_s])?;
            took.push(t.elapsed());
        }
        let bytes = std::fs::metadata(&page).map_err(|e| e.to_string())?.len();
        let s = report.add(
            "report",
            fx.label,
            "evctl report (whole process)",
            stats(took),
        );
        summary.push(format!(
            "report: {} ticks, {n} ledger events: `evctl report` {} (p50 of {RUNS}), page {:.2} MB (targets at 100k: ≤ 3 s, ≤ 5 MB)",
            fx.ticks,
            fmt_dur(s.p50),
            bytes as f64 / 1e6
        ));
    }
    daemon.shutdown();
    println!("\nreport summary ({} total):", fmt_dur(started.elapsed()));
    for s in summary {
        println!("{s}");
    }
    Ok(())
}
