//! The compact forms of `ev.check`'s rows say exactly what the row objects say.

use proto::rpc::{plain_row, CheckResult, CheckRow, PlainRows, RowTable, StalenessRef, Tally};

fn row(claim: &str, detail: &str, memo: Option<&str>) -> CheckRow {
    CheckRow {
        label: "memo".into(),
        tick_id: "0123456789ab".into(),
        file: "0123456789ab".into(),
        decision: "use \"quotes\" → and\ttabs".into(),
        claim: claim.into(),
        supports: "chosen".into(),
        ground_index: 1,
        detail: detail.into(),
        harvested: false,
        class: "informational".into(),
        gating: false,
        memo_reason: memo.map(str::to_string),
        event_label: "memo".into(),
    }
}

fn result(rows: Vec<CheckRow>, table: Option<RowTable>, plain: Option<PlainRows>) -> CheckResult {
    CheckResult {
        total_test_bindings: rows.len(),
        rows,
        table,
        plain,
        plain_file: None,
        harvested_unproven: 0,
        ran: false,
        staleness_ref: StalenessRef {
            policy: "none".into(),
            sha: None,
        },
        tally: Tally::default(),
        gating: false,
        warnings: Vec::new(),
        evidence: Vec::new(),
    }
}

#[test]
fn a_table_and_plain_lines_survive_the_wire_with_every_awkward_character() {
    let rows = vec![
        row("plain claim", "ran 2026-01-01T00:00:00Z", None),
        row(
            "a \"quoted\"\nclaim\\",
            "ran \u{1}odd",
            Some("would read red; …"),
        ),
    ];
    let table = RowTable::encode(&rows).expect("encodes");
    let plain = PlainRows::encode(&rows).expect("encodes");
    let wire =
        serde_json::to_string(&result(Vec::new(), Some(table), Some(plain))).expect("serializes");
    let back: CheckResult = serde_json::from_str(&wire).expect("reads back");
    let views = back.table.as_ref().expect("table").rows().expect("rows");
    assert_eq!(views.len(), 2);
    for (v, r) in views.iter().zip(&rows) {
        assert_eq!(v, &r.view());
        assert_eq!(v.claim(), r.claim);
        assert_eq!(v.decision(), r.decision);
        assert_eq!(v.memo_reason(), r.memo_reason.as_deref());
    }
    let text = back.plain.expect("plain").into_text().expect("text");
    let want: String = rows
        .iter()
        .map(|r| plain_row(&r.label, &r.file, &r.claim, &r.detail) + "\n")
        .collect();
    assert_eq!(text, want);
    assert!(text.starts_with("memo\t0123456789ab\t\"plain claim\"\t(ran 2026-01-01T00:00:00Z)\n"));
    // Without a compact form the fields are absent from the wire, and old readers still parse.
    let objects = serde_json::to_string(&result(rows.clone(), None, None)).expect("serializes");
    assert!(!objects.contains("\"table\"") && !objects.contains("\"plain\""));
    let back: CheckResult = serde_json::from_str(&objects).expect("reads back");
    assert_eq!(back.rows, rows);
}

#[test]
fn a_plain_row_quotes_its_claim_as_q_does_for_every_kind_of_character() {
    let mut claims: Vec<String> = (0u8..0x80).map(|b| format!("a{}b", b as char)).collect();
    claims.extend(
        [
            "",
            "plain words",
            "é and 😀",
            "\u{2028} separator",
            "combining \u{301} mark",
            "\u{feff}bom",
            "del\u{7f}",
        ]
        .map(String::from),
    );
    for claim in claims {
        assert_eq!(
            plain_row("green", "0123456789ab", &claim, "detail"),
            format!("green\t0123456789ab\t{}\t(detail)", proto::json::q(&claim)),
            "claim {claim:?}"
        );
    }
}
