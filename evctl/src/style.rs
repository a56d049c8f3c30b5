//! Rich terminal output: when it is on, the glyphs, and the few ANSI attributes ev uses.

use std::io::IsTerminal;

#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub rich: bool,
    pub ascii: bool,
    pub truecolor: bool,
}

impl Style {
    /// Rich iff not `--plain`, `NO_COLOR` unset, and (`--color always`, or `auto` on a TTY).
    pub fn detect(color: Option<&str>, plain: bool) -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some();
        let wants = match color.unwrap_or("auto") {
            "always" => true,
            "never" => false,
            _ => std::io::stdout().is_terminal(),
        };
        let ascii = std::env::var("EV_ASCII").is_ok_and(|v| !v.is_empty() && v != "0");
        Style {
            rich: !plain && !no_color && wants,
            ascii,
            truecolor: std::env::var_os("EV_TRUECOLOR").is_some(),
        }
    }

    pub fn bold(&self, s: &str) -> String {
        format!("\x1b[1m{s}\x1b[0m")
    }
    pub fn dim(&self, s: &str) -> String {
        format!("\x1b[2m{s}\x1b[0m")
    }
    /// An id in full: first 4 characters bold, the rest dim.
    pub fn id(&self, id: &str) -> String {
        let cut = id.char_indices().nth(4).map_or(id.len(), |(i, _)| i);
        format!("{}{}", self.bold(&id[..cut]), self.dim(&id[cut..]))
    }
    /// `●` for human-authored, `○` for agent-proposed.
    pub fn provenance_glyph(&self, agent: bool) -> &'static str {
        match (agent, self.ascii) {
            (true, false) => "○",
            (true, true) => "o",
            (false, false) => "●",
            (false, true) => "*",
        }
    }

    /// A verdict class's hue: attention yellow, clear green, informational bright-black.
    pub fn hue(&self, class: &str, s: &str) -> String {
        let code = match (class, self.truecolor) {
            ("attention", false) => "33",
            ("clear", false) => "32",
            (_, false) => "90",
            ("attention", true) => "38;2;214;160;80",
            ("clear", true) => "38;2;139;164;124",
            (_, true) => "38;2;133;127;117",
        };
        format!("\x1b[{code}m{s}\x1b[0m")
    }
    /// A verdict class's glyph.
    pub fn verdict_glyph(&self, class: &str) -> &'static str {
        match (class, self.ascii) {
            ("attention", false) => "◆",
            ("attention", true) => "*",
            ("clear", false) => "◇",
            ("clear", true) => "o",
            (_, false) => "·",
            (_, true) => ".",
        }
    }
}

impl Style {
    /// A verdict label's glyph and hue by its display class (attention, clear, informational).
    pub fn verdict(&self, label: &str) -> String {
        let (glyph, ascii, named, rgb) = match label {
            "green" => ("◇", "o", "32", "139;164;124"),
            "exempt" | "memo" | "n/a" => ("·", ".", "90", "133;127;117"),
            _ => ("◆", "*", "33", "214;160;80"),
        };
        let hue = if std::env::var_os("EV_TRUECOLOR").is_some() {
            format!("38;2;{rgb}")
        } else {
            named.to_string()
        };
        let glyph = if self.ascii { ascii } else { glyph };
        format!("{glyph} \x1b[{hue}m{label}\x1b[0m")
    }
    /// The informational glyph alone (`·`, ASCII `.`).
    pub fn dot(&self) -> &'static str {
        if self.ascii {
            "."
        } else {
            "·"
        }
    }
}
