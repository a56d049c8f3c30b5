//! `check`'s wire types: the request and its row forms, rows as a table or plain lines, the
//! answer, and `check --run`'s plan and receipts.

use super::context::{Context, Warning};
use super::evidence::EvidenceRow;
use super::plain::push_plain_row;
use serde::{Deserialize, Serialize};

/// `ev.check`: evaluate every current live test binding (the tests themselves, for `--run`, are
/// executed by the caller beforehand; see [`CheckPlan`] and [`AppendReceiptsRequest`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    pub context: Context,
    /// Staleness reference from the cache only.
    #[serde(default)]
    pub offline: bool,
    /// The attested platforms; `None` (or empty) attests every declared platform.
    #[serde(default)]
    pub attest: Option<Vec<String>>,
    /// Whether the caller ran the tests first (`--run`); only echoed and used for the note.
    #[serde(default)]
    pub ran: bool,
    /// How the rows come back: objects (the default, what `--json` shows), a compact
    /// [`RowTable`], or the finished plain lines.
    #[serde(default)]
    pub form: RowForm,
}

/// The shape of `ev.check`'s rows in the answer.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RowForm {
    /// [`CheckResult::rows`]: one object per row.
    #[default]
    Objects,
    /// [`CheckResult::table`]: what a renderer needs, about half the bytes.
    Table,
    /// [`CheckResult::plain`]: the rows exactly as the plain (unstyled) listing prints them.
    Plain,
    /// [`CheckResult::plain_file`]: the same lines in a file in the daemon's private runtime
    /// directory (falling back to [`CheckResult::plain`] when there is none).
    #[serde(rename = "plain-file")]
    PlainFile,
}

/// A file holding an answer's bytes, in the daemon's private runtime directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AnswerRef {
    pub path: String,
    /// Its length in bytes (a reader checks it read all of it).
    pub len: u64,
}

/// One printed row: a test ground of a current live tick.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckRow {
    /// The display label after the memo locks.
    pub label: String,
    pub tick_id: String,
    /// The tick's file name (what the plain row prints).
    pub file: String,
    pub decision: String,
    pub claim: String,
    pub supports: String,
    pub ground_index: usize,
    /// The detail text, harvested prefix included.
    pub detail: String,
    pub harvested: bool,
    /// `attention`, `clear` or `informational`.
    pub class: String,
    pub gating: bool,
    /// Why a memo row would have gated, when a lock replaced its verdict.
    pub memo_reason: Option<String>,
    /// The label with a stale's kind (`stale:sha` …).
    pub event_label: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StalenessRef {
    pub policy: String,
    pub sha: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tally {
    pub gating: usize,
    pub green: usize,
    pub non_gating: usize,
}

/// The rows of a check as a compact JSON table: one array per row,
/// `[label, class, file, tick_id, decision, claim, detail, memo_reason|null]`. evd keeps it
/// serialized and sends it as is; a client reads it back borrowing from the response.
#[derive(Debug, Clone)]
pub struct RowTable(Box<serde_json::value::RawValue>);

impl PartialEq for RowTable {
    fn eq(&self, other: &RowTable) -> bool {
        self.0.get() == other.0.get()
    }
}
impl Eq for RowTable {}

impl Serialize for RowTable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for RowTable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RowTable, D::Error> {
        Box::<serde_json::value::RawValue>::deserialize(d).map(RowTable)
    }
}

/// What rendering one check row needs, borrowed where the source allows.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RowView<'a>(
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Text<'a>,
    #[serde(borrow)] pub Option<Text<'a>>,
);

impl RowView<'_> {
    pub fn label(&self) -> &str {
        &self.0 .0
    }
    pub fn class(&self) -> &str {
        &self.1 .0
    }
    pub fn file(&self) -> &str {
        &self.2 .0
    }
    pub fn tick_id(&self) -> &str {
        &self.3 .0
    }
    pub fn decision(&self) -> &str {
        &self.4 .0
    }
    pub fn claim(&self) -> &str {
        &self.5 .0
    }
    pub fn detail(&self) -> &str {
        &self.6 .0
    }
    pub fn memo_reason(&self) -> Option<&str> {
        self.7.as_ref().map(|t| t.0.as_ref())
    }
}

/// A string that borrows from the JSON it was read from unless it had escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text<'a>(pub std::borrow::Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Text<'a>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Owned(v.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl CheckRow {
    /// This row as a renderer reads it.
    pub fn view(&self) -> RowView<'_> {
        let t = |s: &str| Text(std::borrow::Cow::Owned(s.to_string()));
        RowView(
            t(&self.label),
            t(&self.class),
            t(&self.file),
            t(&self.tick_id),
            t(&self.decision),
            t(&self.claim),
            t(&self.detail),
            self.memo_reason.as_deref().map(t),
        )
    }
}

impl RowTable {
    /// The table of these rows.
    pub fn encode<'r>(
        rows: impl IntoIterator<Item = &'r CheckRow>,
    ) -> Result<RowTable, serde_json::Error> {
        let cells: Vec<[Option<&str>; 8]> = rows
            .into_iter()
            .map(|r| {
                [
                    Some(r.label.as_str()),
                    Some(r.class.as_str()),
                    Some(r.file.as_str()),
                    Some(r.tick_id.as_str()),
                    Some(r.decision.as_str()),
                    Some(r.claim.as_str()),
                    Some(r.detail.as_str()),
                    r.memo_reason.as_deref(),
                ]
            })
            .collect();
        serde_json::value::RawValue::from_string(serde_json::to_string(&cells)?).map(RowTable)
    }

    /// The rows, borrowing from the table.
    pub fn rows(&self) -> Result<Vec<RowView<'_>>, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// The serialized size, in bytes.
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.get() == "[]"
    }
}

/// The plain listing's rows, each ending in a newline.
pub fn plain_lines<'r>(rows: impl IntoIterator<Item = &'r CheckRow>) -> String {
    let mut text = String::new();
    for r in rows {
        push_plain_row(&mut text, &r.label, &r.file, &r.claim, &r.detail);
        text.push('\n');
    }
    text
}

/// The plain listing's rows, newline-terminated. The sender keeps them serialized (a JSON
/// string, sent as is); the receiver reads them straight into text.
#[derive(Debug, Clone)]
pub enum PlainRows {
    Serialized(Box<serde_json::value::RawValue>),
    Text(String),
}

impl PartialEq for PlainRows {
    fn eq(&self, other: &PlainRows) -> bool {
        matches!((self.text(), other.text()), (Ok(a), Ok(b)) if a == b)
    }
}
impl Eq for PlainRows {}

impl Serialize for PlainRows {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PlainRows::Serialized(raw) => raw.serialize(s),
            PlainRows::Text(text) => text.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for PlainRows {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PlainRows, D::Error> {
        String::deserialize(d).map(PlainRows::Text)
    }
}

impl PlainRows {
    /// The lines of these rows, serialized once.
    pub fn encode(rows: &[CheckRow]) -> Result<PlainRows, serde_json::Error> {
        PlainRows::serialize_text(&plain_lines(rows))
    }

    /// These lines, serialized once.
    pub fn serialize_text(text: &str) -> Result<PlainRows, serde_json::Error> {
        serde_json::value::to_raw_value(text).map(PlainRows::Serialized)
    }

    /// The lines, each ending in a newline.
    pub fn text(&self) -> Result<std::borrow::Cow<'_, str>, serde_json::Error> {
        match self {
            PlainRows::Serialized(raw) => serde_json::from_str::<String>(raw.get()).map(Into::into),
            PlainRows::Text(text) => Ok(text.as_str().into()),
        }
    }

    /// The lines, taken.
    pub fn into_text(self) -> Result<String, serde_json::Error> {
        match self {
            PlainRows::Serialized(raw) => serde_json::from_str(raw.get()),
            PlainRows::Text(text) => Ok(text),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckResult {
    /// The rows as objects (empty when the request asked for a [`RowTable`]).
    pub rows: Vec<CheckRow>,
    /// The rows as a compact table, when the request asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<RowTable>,
    /// The rows as plain lines, when the request asked for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain: Option<PlainRows>,
    /// The plain lines in a file, when the request asked for one and the daemon could write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain_file: Option<AnswerRef>,
    pub total_test_bindings: usize,
    pub harvested_unproven: usize,
    pub ran: bool,
    pub staleness_ref: StalenessRef,
    pub tally: Tally,
    /// Any post-lock verdict gates (`--exit-on-red` exits 1), or a user-ruled decision's
    /// evidence drifted.
    pub gating: bool,
    #[serde(default)]
    pub warnings: Vec<Warning>,
    /// Current decisions whose cited evidence no longer holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceRow>,
}

/// One test binding `check --run` may execute.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PlannedRun {
    pub tick_id: String,
    pub ground_index: usize,
    pub reference: String,
    /// `None`: a harvested binding (no counter-test, no `falsifiable`).
    pub counter_test: Option<String>,
    pub platforms: Vec<String>,
}

/// `ev.check.plan`: every test binding of the current live view, in check order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckPlan {
    pub green_exit_code: i32,
    pub runs: Vec<PlannedRun>,
}

/// A receipt the caller produced by running a test; evd stamps `ran_at` with its clock.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NewReceipt {
    pub test: String,
    pub platform: String,
    pub commit: String,
    /// `green` or `red` (`gray` is accepted too: external writers use it).
    pub result: String,
    #[serde(default)]
    pub falsifiable: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AppendReceiptsRequest {
    pub context: Context,
    pub receipts: Vec<NewReceipt>,
    /// The caller's run (`[A-Za-z0-9._-]`, at most 64): the ledger's artifacts of `runs` are
    /// kept under `results/runs/<run_id>/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The test runs these receipts come from, each recorded in the ledger as a `tool_call`
    /// with its output kept as artifacts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<ToolRun>,
}

/// One test command `check --run` executed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ToolRun {
    pub command: String,
    /// `check` or `counter-test`.
    pub role: String,
    /// `None`: killed by a signal, stopped at its time limit, or never started.
    pub exit_code: Option<i32>,
    /// What it printed (at most 64 KiB of each stream; not UTF-8 bytes replaced).
    pub stdout: String,
    pub stderr: String,
    pub duration_ms: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AppendReceiptsResult {
    /// The lines written, each exactly as appended (with its `\n`).
    pub written: Vec<String>,
    /// One `could not write receipt` line per receipt that failed.
    #[serde(default)]
    pub warnings: Vec<Warning>,
}
