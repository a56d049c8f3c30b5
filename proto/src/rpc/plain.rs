//! The plain listing's one line shape (`<label>\t<file>\tQ(claim)\t(<detail>)`), shared by
//! check rows and evidence rows.

/// One row of the plain listing: `<label>\t<file>\tQ(claim)\t(<detail>)`.
pub fn plain_row(label: &str, file: &str, claim: &str, detail: &str) -> String {
    let mut row = String::new();
    push_plain_row(&mut row, label, file, claim, detail);
    row
}

/// [`plain_row`], appended to `out` (without a newline).
pub fn push_plain_row(out: &mut String, label: &str, file: &str, claim: &str, detail: &str) {
    use std::fmt::Write;
    out.push_str(label);
    out.push('\t');
    out.push_str(file);
    out.push('\t');
    // `Q` (see [`crate::json::q`]): printable ASCII other than `"` and `\` stands for itself.
    if claim
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(claim);
        out.push('"');
    } else {
        // Writing into a String cannot fail.
        let _ = write!(out, "{claim:?}");
    }
    out.push_str("\t(");
    out.push_str(detail);
    out.push(')');
}
