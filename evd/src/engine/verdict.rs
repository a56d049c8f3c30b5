//! The verdict engine, pure: given one ground's test check, the receipts of its selector, the
//! staleness reference, the attest set, the selected-list, the clock and whether a triggering
//! change landed since the last run, say what the check reads (model-and-verify §6). Nothing here
//! reads a file, runs git or looks at a clock; callers pass all of it in.

use proto::model::Check;
use proto::Tick;
use time::OffsetDateTime;

use crate::engine::receipts::{Receipt, RunResult};

/// Why a binding reads stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleKind {
    /// The reference sha moved past `verified_at_sha`.
    Sha,
    /// A triggering change landed after the last run.
    CountWindow,
    /// A deciding receipt is older than the staleness window.
    Age,
}

/// Every verdict label, pre- and post-lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Green,
    Red,
    GrayRed,
    NotRun,
    Stale(StaleKind),
    Unproven,
    SilentlyUnbound,
    /// A green whose tracked `triggered_by` paths have uncommitted changes (0.1.32).
    Dirty,
    Exempt,
    Memo,
    NotApplicable,
}

impl Label {
    /// The display label (`stale` without its kind).
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Green => "green",
            Label::Red => "red",
            Label::GrayRed => "gray->red",
            Label::NotRun => "not-run",
            Label::Stale(_) => "stale",
            Label::Unproven => "unproven",
            Label::SilentlyUnbound => "silently-unbound",
            Label::Dirty => "dirty",
            Label::Exempt => "exempt",
            Label::Memo => "memo",
            Label::NotApplicable => "n/a",
        }
    }

    /// The event label: the display label, with a stale's kind (`stale:sha` …).
    pub fn event_label(self) -> String {
        match self {
            Label::Stale(StaleKind::Sha) => "stale:sha".into(),
            Label::Stale(StaleKind::CountWindow) => "stale:count-window".into(),
            Label::Stale(StaleKind::Age) => "stale:age".into(),
            other => other.as_str().into(),
        }
    }

    /// Whether `check --exit-on-red` trips on it.
    pub fn gates(self) -> bool {
        !matches!(
            self,
            Label::Green | Label::NotApplicable | Label::Exempt | Label::Memo | Label::Dirty
        )
    }

    /// Display class: attention, clear or informational.
    pub fn class(self) -> &'static str {
        match self {
            Label::Green => "clear",
            Label::Exempt | Label::Memo | Label::NotApplicable => "informational",
            _ => "attention",
        }
    }

    /// The per-tick event roll-up rank.
    pub fn rank(self) -> u8 {
        match self {
            Label::Red | Label::GrayRed => 6,
            Label::SilentlyUnbound => 5,
            Label::Stale(_) => 4,
            Label::NotRun => 3,
            Label::Unproven => 2,
            Label::Memo | Label::Dirty => 1,
            Label::Green | Label::Exempt | Label::NotApplicable => 0,
        }
    }
}

/// `results/selected.json`, when present and valid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selected {
    pub changed: Vec<String>,
    pub selected: Vec<String>,
}

/// Everything outside the ground that a verdict depends on.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    /// The staleness reference sha; `None` means sha-staleness is not evaluated.
    pub reference_sha: Option<&'a str>,
    /// `--attest`: `None` attests every declared platform.
    pub attest: Option<&'a [String]>,
    pub selected: Option<&'a Selected>,
    pub now: OffsetDateTime,
    pub staleness_days: u64,
}

/// One ground's verdict before the memo locks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub label: Label,
    /// The not-run platforms, in liveness order (only for not-run).
    pub missing: Vec<String>,
    /// The first instant at which the clock alone would change this verdict (a deciding receipt
    /// leaving the staleness window); `None` when time cannot change it.
    pub expires: Option<OffsetDateTime>,
}

/// The receipt with the greatest `ran_at` (plain string order; on a tie the later line wins).
pub fn latest<'r, I: IntoIterator<Item = &'r Receipt>>(receipts: I) -> Option<&'r Receipt> {
    receipts
        .into_iter()
        .fold(None, |best: Option<&Receipt>, r| match best {
            Some(b) if b.ran_at > r.ran_at => Some(b),
            _ => Some(r),
        })
}

/// Evaluate one ground (§6.3, first match wins). `receipts` are the selector's receipts in file
/// order; `triggered` says whether git saw a triggering change after the latest run.
pub fn evaluate(
    check: Option<&Check>,
    receipts: &[Receipt],
    triggered: bool,
    i: &Inputs,
) -> Verdict {
    let verdict = |label| Verdict {
        label,
        missing: Vec::new(),
        expires: None,
    };
    let Some(Check::Test {
        reference,
        verified_at_sha,
        liveness,
        ..
    }) = check
    else {
        return verdict(Label::NotApplicable);
    };
    if i.reference_sha.is_some_and(|r| r != verified_at_sha) {
        return verdict(Label::Stale(StaleKind::Sha));
    }
    let considered: Vec<&String> = match i.attest {
        Some(att) => {
            let c: Vec<&String> = liveness
                .platforms
                .iter()
                .filter(|p| att.contains(p))
                .collect();
            if c.is_empty() {
                return verdict(Label::Exempt);
            }
            c
        }
        None => liveness.platforms.iter().collect(),
    };
    let mut deciding = Vec::with_capacity(considered.len());
    let mut missing = Vec::new();
    for p in considered {
        match latest(
            receipts
                .iter()
                .filter(|r| &r.test == reference && &r.platform == p),
        ) {
            Some(r) => deciding.push(r),
            None => missing.push(p.clone()),
        }
    }
    if !missing.is_empty() {
        return Verdict {
            label: Label::NotRun,
            missing,
            expires: None,
        };
    }
    if triggered {
        return verdict(Label::Stale(StaleKind::CountWindow));
    }
    let window = i64::try_from(i.staleness_days.saturating_mul(86_400)).unwrap_or(i64::MAX);
    let mut expires: Option<OffsetDateTime> = None;
    for r in &deciding {
        let Some(t) = crate::engine::clock::parse(&r.ran_at) else {
            continue;
        };
        if (i.now - t).whole_seconds() > window {
            return verdict(Label::Stale(StaleKind::Age));
        }
        // Whole seconds past the window: stale from `t + window + 1 s` on.
        let at = t.checked_add(time::Duration::seconds(window.saturating_add(1)));
        if let Some(at) = at {
            expires = Some(expires.map_or(at, |e| e.min(at)));
        }
    }
    let verdict = |label| Verdict {
        label,
        missing: Vec::new(),
        expires,
    };
    if deciding.iter().any(|r| r.falsifiable == Some(false)) {
        return verdict(Label::Unproven);
    }
    if deciding.iter().any(|r| r.result == RunResult::Gray) {
        return verdict(Label::GrayRed);
    }
    if deciding.iter().any(|r| r.result == RunResult::Red) {
        return verdict(Label::Red);
    }
    if let Some(sel) = i.selected {
        let touched = liveness
            .triggered_by
            .iter()
            .any(|t| sel.changed.contains(t));
        if touched && !sel.selected.contains(reference) {
            return verdict(Label::SilentlyUnbound);
        }
    }
    verdict(Label::Green)
}

/// What git says about one ground beyond its receipts, asked only when the verdict needs it.
pub trait GitSays {
    /// Did a commit between `verified_at_sha` and the staleness reference touch the ground's
    /// `triggered_by` paths? A git failure counts as yes (0.1.29's diff-aware staleness).
    fn touched_since_verified(&mut self) -> bool;
    /// Has a tracked `triggered_by` path an uncommitted change? A git failure counts as no
    /// (0.1.32's `dirty`).
    fn uncommitted(&mut self) -> bool;
}

/// [`evaluate`], then the two later rules of upstream 0.1.32, in its order:
/// - a `stale` resting only on the reference sha is evaluated again without it when no commit
///   since `verified_at_sha` touched the ground's triggers (0.1.29);
/// - a `green` whose guarded paths have uncommitted changes reads `dirty` (0.1.32).
pub fn evaluate_with_git(
    check: Option<&Check>,
    receipts: &[Receipt],
    triggered: bool,
    i: &Inputs,
    git: &mut impl GitSays,
) -> Verdict {
    let mut v = evaluate(check, receipts, triggered, i);
    if v.label == Label::Stale(StaleKind::Sha) && !git.touched_since_verified() {
        let unreferenced = Inputs {
            reference_sha: None,
            ..i.clone()
        };
        v = evaluate(check, receipts, triggered, &unreferenced);
    }
    if v.label == Label::Green && git.uncommitted() {
        v.label = Label::Dirty;
    }
    v
}

/// The gate-time locks (§6.6): a detect-only tick, then an agent proposal, never gates. Returns
/// the final label and, when a lock replaced it, the reason shown in the rich form.
pub fn lock(tick: &Tick, label: Label) -> (Label, Option<String>) {
    let mut out = (label, None);
    if tick.is_detect_only()
        && !matches!(
            label,
            Label::Green | Label::NotApplicable | Label::Exempt | Label::Dirty
        )
    {
        out = (
            Label::Memo,
            Some(format!(
                "would read {}; detect-only (C/D), never gates",
                label.as_str()
            )),
        );
    }
    if tick.is_agent_proposed()
        && !matches!(
            out.0,
            Label::Green | Label::NotApplicable | Label::Exempt | Label::Memo | Label::Dirty
        )
    {
        out = (
            Label::Memo,
            Some(format!(
                "would read {}; agent-proposed, never gates",
                out.0.as_str()
            )),
        );
    }
    out
}

/// A row's detail text (§10.6) for its final (post-lock) label: the missing platforms, the stale
/// reason, or when the selector last ran (a memo row says when it ran, not why it would gate).
pub fn detail(label: Label, missing: &[String], receipts: &[Receipt]) -> String {
    match label {
        Label::NotRun => format!("missing: {}", missing.join(", ")),
        Label::Stale(StaleKind::Sha) => "verified_at_sha behind live origin".into(),
        Label::Stale(StaleKind::CountWindow) => {
            "a triggering change landed after the last run".into()
        }
        Label::Stale(StaleKind::Age) => "deciding receipt older than the staleness window".into(),
        Label::Dirty => {
            "verified against a dirty worktree — uncommitted change on a guarded path; \
                         commit + re-run to confirm"
                .into()
        }
        _ => match latest(receipts) {
            Some(r) => format!("ran {}", r.ran_at),
            None => "no receipt".into(),
        },
    }
}

/// A row's whole detail text: [`detail`], after the prefix a harvested binding (one without a
/// counter-test) carries.
pub fn row_detail(
    label: Label,
    missing: &[String],
    receipts: &[Receipt],
    harvested: bool,
) -> String {
    let detail = detail(label, missing, receipts);
    if harvested {
        format!("harvested — falsifiability not proven; {detail}")
    } else {
        detail
    }
}

/// The per-tick roll-up for the `check` event: the event label of the first ground with the
/// strictly highest rank, and the first stale ground's label when a higher rank masks it.
pub fn roll_up(labels: &[Label]) -> Option<(String, Option<String>)> {
    let mut best: Option<Label> = None;
    for l in labels {
        if best.is_none_or(|b| l.rank() > b.rank()) {
            best = Some(*l);
        }
    }
    let best = best?;
    let masked = if best.rank() > 4 {
        labels
            .iter()
            .find(|l| matches!(l, Label::Stale(_)))
            .map(|l| l.event_label())
    } else {
        None
    };
    Some((best.event_label(), masked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::model::Liveness;

    fn check(platforms: &[&str]) -> Check {
        Check::Test {
            reference: "t".into(),
            verified_at_sha: "a".repeat(40),
            counter_test: Some("c".into()),
            liveness: Liveness {
                platforms: platforms.iter().map(|s| s.to_string()).collect(),
                triggered_by: vec!["f".into()],
                surfaces: vec!["s".into()],
            },
        }
    }

    fn receipt(platform: &str, ran_at: &str, result: RunResult, f: Option<bool>) -> Receipt {
        Receipt {
            test: "t".into(),
            platform: platform.into(),
            commit: "c".into(),
            ran_at: ran_at.into(),
            result,
            falsifiable: f,
        }
    }

    fn inputs(now: &str) -> Inputs<'static> {
        Inputs {
            reference_sha: None,
            attest: None,
            selected: None,
            now: crate::engine::clock::parse(now).expect("now"),
            staleness_days: 7,
        }
    }

    const NOW: &str = "2026-11-21T00:00:00Z";
    const RECENT: &str = "2026-11-20T00:00:00Z";

    #[test]
    fn a_verdict_says_when_the_clock_alone_would_change_it() {
        let c = check(&["linux-ci", "mac"]);
        let older = receipt(
            "linux-ci",
            "2026-11-19T00:00:00Z",
            RunResult::Green,
            Some(true),
        );
        let newer = receipt("mac", RECENT, RunResult::Red, Some(true));
        let both = [older.clone(), newer];
        let v = evaluate(Some(&c), &both, false, &inputs(NOW));
        assert_eq!(v.label, Label::Red);
        // The older deciding receipt leaves the 7-day window first, a second past the window.
        let at = crate::engine::clock::parse("2026-11-26T00:00:01Z").expect("time");
        assert_eq!(v.expires, Some(at));
        let just_before = at - time::Duration::nanoseconds(1);
        let mut i = inputs(NOW);
        i.now = just_before;
        assert_eq!(evaluate(Some(&c), &both, false, &i).label, Label::Red);
        i.now = at;
        let v = evaluate(Some(&c), &both, false, &i);
        assert_eq!(v.label, Label::Stale(StaleKind::Age));
        assert_eq!(v.expires, None, "stale by age stays stale");
        // Verdicts the clock cannot change carry no expiry.
        let v = evaluate(Some(&c), std::slice::from_ref(&older), false, &inputs(NOW));
        assert_eq!((v.label, v.expires), (Label::NotRun, None));
    }

    #[test]
    fn the_precedence_of_the_spec_holds() {
        let c = check(&["linux-ci", "mac"]);
        let i = inputs(NOW);
        let green = receipt("linux-ci", RECENT, RunResult::Green, Some(true));
        let mac = receipt("mac", RECENT, RunResult::Green, None);
        // Missing a platform.
        let v = evaluate(Some(&c), std::slice::from_ref(&green), false, &i);
        assert_eq!(v.label, Label::NotRun);
        assert_eq!(v.missing, vec!["mac"]);
        // All there: green; triggered: stale; sha moved: stale (before anything else).
        let both = [green.clone(), mac.clone()];
        assert_eq!(evaluate(Some(&c), &both, false, &i).label, Label::Green);
        assert_eq!(
            evaluate(Some(&c), &both, true, &i).label,
            Label::Stale(StaleKind::CountWindow)
        );
        let moved = Inputs {
            reference_sha: Some("b"),
            ..i.clone()
        };
        assert_eq!(
            evaluate(Some(&c), &[], false, &moved).label,
            Label::Stale(StaleKind::Sha)
        );
        // Attest none of the platforms: exempt; attest one: only it is considered.
        let other = ["local".to_string()];
        let att = Inputs {
            attest: Some(&other),
            ..i.clone()
        };
        assert_eq!(evaluate(Some(&c), &[], false, &att).label, Label::Exempt);
        // Old receipt: stale by age; falsifiable false: unproven; gray beats red.
        let old = receipt("linux-ci", "2026-10-01T00:00:00Z", RunResult::Green, None);
        assert_eq!(
            evaluate(Some(&c), &[old, mac.clone()], false, &i).label,
            Label::Stale(StaleKind::Age)
        );
        let unproven = receipt("linux-ci", RECENT, RunResult::Green, Some(false));
        assert_eq!(
            evaluate(Some(&c), &[unproven, mac.clone()], false, &i).label,
            Label::Unproven
        );
        let gray = receipt("linux-ci", RECENT, RunResult::Gray, None);
        let red = receipt("mac", RECENT, RunResult::Red, None);
        assert_eq!(
            evaluate(Some(&c), &[gray, red.clone()], false, &i).label,
            Label::GrayRed
        );
        assert_eq!(
            evaluate(Some(&c), &[green.clone(), red], false, &i).label,
            Label::Red
        );
        // The latest receipt per platform decides, ties going to the later line.
        let later_red = receipt("linux-ci", RECENT, RunResult::Red, None);
        assert_eq!(
            evaluate(
                Some(&c),
                &[green.clone(), mac.clone(), later_red],
                false,
                &i
            )
            .label,
            Label::Red
        );
        // The selected-list: a changed trigger whose selector was not re-run.
        let sel = Selected {
            changed: vec!["f".into()],
            selected: vec![],
        };
        let with_sel = Inputs {
            selected: Some(&sel),
            ..i.clone()
        };
        assert_eq!(
            evaluate(Some(&c), &both, false, &with_sel).label,
            Label::SilentlyUnbound
        );
        assert_eq!(evaluate(None, &[], false, &i).label, Label::NotApplicable);
    }

    #[test]
    fn roll_up_takes_the_first_strictly_highest_and_reports_a_masked_stale() {
        let labels = [
            Label::Green,
            Label::Stale(StaleKind::Age),
            Label::Red,
            Label::GrayRed,
        ];
        assert_eq!(
            roll_up(&labels),
            Some(("red".to_string(), Some("stale:age".to_string())))
        );
        assert_eq!(
            roll_up(&[Label::NotRun, Label::Stale(StaleKind::Sha)]),
            Some(("stale:sha".to_string(), None))
        );
        assert_eq!(roll_up(&[]), None);
    }
}
