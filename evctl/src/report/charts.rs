//! The report's pictures, as SVG text (pure: numbers in, markup out). Each chart carries a
//! `<title>` and a `<desc>` (its text alternative) and an `id` the page and its test find it
//! by; marks carry their numbers in `data-*` attributes.
//!
//! It must not read files, ask evd, or compute a number the ledger queries compute: the rows
//! it draws are theirs, as `evctl ledger query` prints them.

use std::fmt::Write;

/// Text for XML: `&`, `<`, `>`, `"` and `'` escaped.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The colour a verdict label is drawn in.
pub fn verdict_colour(label: &str) -> &'static str {
    match label {
        "green" => "#2e7d32",
        "red" | "gray->red" => "#c62828",
        l if l.starts_with("stale") => "#ef6c00",
        "not-run" | "unproven" | "silently-unbound" => "#9e9e9e",
        "exempt" | "memo" => "#5c6bc0",
        "dirty" => "#8d6e63",
        _ => "#607d8b",
    }
}

/// A palette for series (agents × models).
const SERIES: [&str; 8] = [
    "#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#ad1457", "#4e342e",
];

fn open(out: &mut String, id: &str, w: u32, h: u32, title: &str, desc: &str) {
    let _ = write!(
        out,
        "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-labelledby=\"{id}-title {id}-desc\"><title id=\"{id}-title\">{}</title><desc id=\"{id}-desc\">{}</desc>",
        esc(title),
        esc(desc)
    );
}

/// One point of the reliability diagram: a group's bin.
pub struct Bin {
    pub group: String,
    pub predicted: f64,
    pub actual: f64,
    pub executions: u64,
}

/// Predicted against actual success, one dot per (group, tenth) sized by its executions, the
/// diagonal being perfect calibration.
pub fn reliability(bins: &[Bin]) -> String {
    let (w, h, m) = (520u32, 420u32, 50f64);
    let plot = |v: f64| m + v.clamp(0.0, 1.0) * (f64::from(w) - 2.0 * m);
    let ploty = |v: f64| f64::from(h) - m - v.clamp(0.0, 1.0) * (f64::from(h) - 2.0 * m);
    let groups: Vec<&str> = {
        let mut g: Vec<&str> = bins.iter().map(|b| b.group.as_str()).collect();
        g.dedup();
        g.sort();
        g.dedup();
        g
    };
    let total: u64 = bins.iter().map(|b| b.executions).sum();
    let mut out = String::new();
    open(
        &mut out,
        "reliability",
        w,
        h,
        "Reliability diagram: predicted against actual success",
        &format!(
            "{} points over {total} executions in {} agent/model groups; the diagonal is perfect calibration.",
            bins.len(),
            groups.len()
        ),
    );
    let _ = write!(
        out,
        "<rect x=\"{m}\" y=\"{m}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#bbb\"/>",
        f64::from(w) - 2.0 * m,
        f64::from(h) - 2.0 * m
    );
    let _ = write!(
        out,
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>",
        plot(0.0),
        ploty(0.0),
        plot(1.0),
        ploty(1.0)
    );
    for t in 0..=5 {
        let v = f64::from(t) / 5.0;
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{v:.1}</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{v:.1}</text>",
            plot(v),
            f64::from(h) - m + 16.0,
            m - 6.0,
            ploty(v) + 4.0
        );
    }
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">predicted p_success</text><text x=\"14\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">actual success</text>",
        f64::from(w) / 2.0,
        f64::from(h) - 12.0,
        f64::from(h) / 2.0,
        f64::from(h) / 2.0
    );
    let most = bins.iter().map(|b| b.executions).max().unwrap_or(1).max(1) as f64;
    for b in bins {
        let i = groups.iter().position(|g| *g == b.group).unwrap_or(0);
        let r = 3.0 + 9.0 * (b.executions as f64 / most).sqrt();
        let _ = write!(
            out,
            "<circle class=\"mark\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"{r:.1}\" fill=\"{}\" fill-opacity=\"0.7\" data-group=\"{}\" data-executions=\"{}\"><title>{}: predicted {:.2}, actual {:.2}, {} executions</title></circle>",
            plot(b.predicted),
            ploty(b.actual),
            SERIES[i % SERIES.len()],
            esc(&b.group),
            b.executions,
            esc(&b.group),
            b.predicted,
            b.actual,
            b.executions
        );
    }
    for (i, g) in groups.iter().enumerate().take(8) {
        let y = m + 14.0 + 16.0 * i as f64;
        let _ = write!(
            out,
            "<circle cx=\"{}\" cy=\"{y}\" r=\"5\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>",
            m + 12.0,
            SERIES[i % SERIES.len()],
            m + 22.0,
            y + 4.0,
            esc(g)
        );
    }
    out.push_str("</svg>");
    out
}

/// Horizontal bars, one per row: `(label, value, note)`.
pub fn bars(
    id: &str,
    title: &str,
    desc: &str,
    rows: &[(String, f64, String)],
    colour: &str,
) -> String {
    let (w, row_h, left) = (560u32, 24u32, 190f64);
    let h = 30 + row_h * rows.len().max(1) as u32;
    let most = rows.iter().map(|r| r.1).fold(0.0f64, f64::max).max(1e-9);
    let mut out = String::new();
    open(&mut out, id, w, h, title, desc);
    for (i, (label, v, note)) in rows.iter().enumerate() {
        let y = 10.0 + f64::from(row_h) * i as f64;
        let width = (f64::from(w) - left - 90.0) * (v / most);
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">{}</text><rect class=\"mark\" x=\"{left}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"16\" fill=\"{colour}\" data-value=\"{v}\"><title>{}: {note}</title></rect><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
            left - 6.0,
            y + 12.0,
            esc(label),
            width.max(1.0),
            esc(label),
            left + width.max(1.0) + 4.0,
            y + 12.0,
            esc(note)
        );
    }
    out.push_str("</svg>");
    out
}

/// One decision's verdict over time: `(from, label)` segments, seconds since the window starts.
pub struct Band {
    pub name: String,
    pub segments: Vec<(f64, String)>,
}

/// Verdict history bands: a row per decision, coloured by its verdict between changes, over a
/// window of `span` seconds ending now (`start_label`/`end_label` say when).
pub fn history(
    bands: &[Band],
    span: f64,
    start_label: &str,
    end_label: &str,
    events: usize,
) -> String {
    let (w, row_h, left) = (760u32, 20u32, 200f64);
    let h = 40 + row_h * bands.len().max(1) as u32;
    let x = |t: f64| left + (t / span.max(1.0)).clamp(0.0, 1.0) * (f64::from(w) - left - 10.0);
    let mut out = String::new();
    open(
        &mut out,
        "history",
        w,
        h,
        "Verdict history",
        &format!(
            "{} decisions' verdicts from {start_label} to {end_label}, from {events} verdict changes in the ledger.",
            bands.len()
        ),
    );
    for (i, b) in bands.iter().enumerate() {
        let y = 6.0 + f64::from(row_h) * i as f64;
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            y + 12.0,
            esc(&b.name)
        );
        for (j, (from, label)) in b.segments.iter().enumerate() {
            let to = b.segments.get(j + 1).map_or(span, |n| n.0);
            let _ = write!(
                out,
                "<rect class=\"mark\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"14\" fill=\"{}\" data-label=\"{}\"><title>{}: {}</title></rect>",
                x(*from),
                (x(to) - x(*from)).max(1.0),
                verdict_colour(label),
                esc(label),
                esc(&b.name),
                esc(label)
            );
        }
    }
    let _ = write!(
        out,
        "<text x=\"{left}\" y=\"{}\" font-size=\"11\">{}</text><text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
        h - 8,
        esc(start_label),
        w - 10,
        h - 8,
        esc(end_label)
    );
    out.push_str("</svg>");
    out
}

/// A node of the lineage graph.
pub struct Node {
    pub id: String,
    pub label: String,
    pub colour: &'static str,
    pub current: bool,
    /// 0: HEAD's chain; 1: a fork off it (a branch merged, or a writer that forked the chain).
    pub lane: u8,
}

/// The chain, newest on top, one node per tick (a fork's ticks in a lane of their own); `edges`
/// are (from, to, kind) between node indexes, kind `supersedes` or `ratifies` (arcs beside the
/// chain) or `fork` (a fork's last tick to the tick it joins).
pub fn lineage(nodes: &[Node], edges: &[(usize, usize, &str)], more: usize) -> String {
    let (w, row_h) = (760u32, 26u32);
    let h = 20 + row_h * nodes.len().max(1) as u32 + if more > 0 { 20 } else { 0 };
    let lane_x = |lane: u8| 40.0 + 28.0 * f64::from(lane);
    let cx = lane_x(0);
    let y = |i: usize| 18.0 + f64::from(row_h) * i as f64;
    let main = nodes.iter().take_while(|n| n.lane == 0).count();
    let mut out = String::new();
    open(
        &mut out,
        "lineage",
        w,
        h,
        "Decision lineage",
        &format!(
            "{} ticks, newest first, with {} supersede or ratify edges{}.",
            nodes.len(),
            edges.len(),
            if more > 0 {
                format!(" ({more} older ones not drawn)")
            } else {
                String::new()
            }
        ),
    );
    if main > 1 {
        let _ = write!(
            out,
            "<line x1=\"{cx}\" y1=\"{}\" x2=\"{cx}\" y2=\"{}\" stroke=\"#ccc\" stroke-width=\"2\"/>",
            y(0),
            y(main - 1)
        );
    }
    for (a, b, kind) in edges {
        if *kind == "fork" {
            let _ = write!(
                out,
                "<path class=\"edge\" d=\"M {:.1} {:.1} L {cx} {:.1}\" fill=\"none\" stroke=\"#777\" stroke-dasharray=\"3 3\" data-kind=\"fork\"><title>fork: joins here</title></path>",
                lane_x(nodes[*a].lane),
                y(*a),
                y(*b)
            );
            continue;
        }
        let (ya, yb) = (y(*a), y(*b));
        let bulge = 20.0 + 6.0 * (b.abs_diff(*a) as f64).min(20.0);
        let colour = if *kind == "ratifies" {
            "#6a1b9a"
        } else {
            "#ef6c00"
        };
        let _ = write!(
            out,
            "<path class=\"edge\" d=\"M {cx} {ya:.1} C {:.1} {ya:.1}, {:.1} {yb:.1}, {cx} {yb:.1}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" data-kind=\"{kind}\"><title>{kind}</title></path>",
            cx - bulge,
            cx - bulge
        );
    }
    for (i, n) in nodes.iter().enumerate() {
        let nx = lane_x(n.lane);
        let _ = write!(
            out,
            "<circle class=\"mark\" cx=\"{nx}\" cy=\"{:.1}\" r=\"7\" fill=\"{}\" stroke=\"#333\" stroke-width=\"{}\" data-id=\"{}\"><title>{}</title></circle><text x=\"{}\" y=\"{:.1}\" font-size=\"12\"{}>{} {}</text>",
            y(i),
            n.colour,
            if n.current { 2 } else { 0 },
            esc(&n.id),
            esc(&n.label),
            lane_x(1) + 16.0,
            y(i) + 4.0,
            if n.current { "" } else { " fill=\"#888\"" },
            esc(&n.id),
            esc(&n.label)
        );
    }
    if more > 0 {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#888\">… and {more} older ticks</text>",
            cx + 16.0,
            h - 6
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_escape_what_they_are_given_and_draw_one_mark_per_row() {
        let b = bars(
            "failures",
            "t",
            "d",
            &[
                ("<x> & y".into(), 2.0, "2".into()),
                ("z".into(), 1.0, "1".into()),
            ],
            "#000",
        );
        assert!(b.contains("&lt;x&gt; &amp; y") && !b.contains("<x>"));
        assert_eq!(b.matches("class=\"mark\"").count(), 2);
        let r = reliability(&[Bin {
            group: "a/m".into(),
            predicted: 0.9,
            actual: 1.0,
            executions: 3,
        }]);
        assert!(r.contains("data-executions=\"3\"") && r.starts_with("<svg id=\"reliability\""));
        let l = lineage(
            &[
                Node {
                    id: "b".into(),
                    label: "new".into(),
                    colour: "#000",
                    current: true,
                    lane: 0,
                },
                Node {
                    id: "a".into(),
                    label: "old".into(),
                    colour: "#000",
                    current: false,
                    lane: 0,
                },
            ],
            &[(0, 1, "supersedes")],
            3,
        );
        assert_eq!(l.matches("class=\"edge\"").count(), 1);
        assert!(l.contains("3 older"));
        // A fork's tick in the second lane, joined to the chain by a dashed line.
        let f = lineage(
            &[
                Node {
                    id: "b".into(),
                    label: "main".into(),
                    colour: "#000",
                    current: true,
                    lane: 0,
                },
                Node {
                    id: "c".into(),
                    label: "fork: side".into(),
                    colour: "#000",
                    current: true,
                    lane: 1,
                },
            ],
            &[(1, 0, "fork")],
            0,
        );
        assert!(
            f.contains("data-kind=\"fork\"") && f.contains("cx=\"68\""),
            "{f}"
        );
    }
}
