//! The shape of the house, kept by a test: evd's layers import only the layers below them (the
//! table at the top of docs/architecture.md, read from there, is the rule), no file of evd,
//! evctl or proto imports itself in a circle, evctl reaches evd through its one door
//! (`evd::api`), and platform `cfg`s live only in evd's `sys/` layer.
//!
//! It reads the sources as text: comments, string literals and `#[cfg(test)]` items are set
//! aside (a test module may reach anywhere to build its fixtures), then every `crate::`,
//! `super::`, `self::` and child-module path (and `evd::` from evctl) is resolved to the module
//! it names. It does not compile anything and must not depend on the build.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)
            .expect("list a source folder")
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The module path of a source file under `src` (`a/b.rs` and `a/b/mod.rs` are `a::b`; the
/// crate root is the empty path).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

/// `text` with comments blanked and string and char literals emptied, so that only code is
/// left to read (line structure kept).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == b'\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            // A raw string: r"…", r#"…"#, …
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&b'#')) {
                    j += 1 + hashes;
                    break;
                }
                if b[j] == b'\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                } else if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a), kept as it is.
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if let Some(len) = std::str::from_utf8(&b[i + 1..])
                .ok()
                .and_then(|s| s.chars().next())
                .map(char::len_utf8)
                .filter(|&l| b.get(i + 1 + l) == Some(&b'\''))
            {
                i += len + 2;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            let ch = text[i..].chars().next().expect("a char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// `code` without its `#[cfg(test)]` items (a test module may import anything).
fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let b = after.as_bytes();
        let brace = after.find('{');
        let semi = after.find(';');
        let end = match (brace, semi) {
            (Some(o), s) if s.is_none_or(|s| o < s) => {
                let mut depth = 0;
                let mut j = o;
                loop {
                    match b.get(j) {
                        Some(b'{') => depth += 1,
                        Some(b'}') => {
                            depth -= 1;
                            if depth == 0 {
                                break j + 1;
                            }
                        }
                        None => break j,
                        _ => {}
                    }
                    j += 1;
                }
            }
            (_, Some(s)) => s + 1,
            _ => after.len(),
        };
        out.extend(after[..end].chars().filter(|&c| c == '\n'));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every path that starts at `at` in `code`: `a::b::c`, or a group `a::{b, c::d}` expanded.
fn paths_at(code: &str, at: usize) -> Vec<Vec<String>> {
    fn walk(b: &[u8], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut segs = prefix;
        loop {
            while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
                i += 1;
            }
            if b.get(i) == Some(&b'{') {
                // A group: each comma-separated member continues the path.
                i += 1;
                loop {
                    while b
                        .get(i)
                        .is_some_and(|c| c.is_ascii_whitespace() || *c == b',')
                    {
                        i += 1;
                    }
                    match b.get(i) {
                        Some(b'}') | None => return,
                        _ => {}
                    }
                    let start = i;
                    walk(b, i, segs.clone(), out);
                    // Skip this member (balanced braces) up to its comma or the group's end.
                    let mut depth = 0;
                    while let Some(&c) = b.get(i) {
                        match c {
                            b'{' => depth += 1,
                            b'}' if depth == 0 => break,
                            b'}' => depth -= 1,
                            b',' if depth == 0 => break,
                            _ => {}
                        }
                        i += 1;
                    }
                    if i == start {
                        return;
                    }
                }
            }
            let start = i;
            while b.get(i).copied().is_some_and(is_ident) {
                i += 1;
            }
            if i == start {
                out.push(segs);
                return;
            }
            segs.push(String::from_utf8_lossy(&b[start..i]).into_owned());
            if b.get(i) == Some(&b':') && b.get(i + 1) == Some(&b':') {
                i += 2;
            } else {
                out.push(segs);
                return;
            }
        }
    }
    let mut out = Vec::new();
    walk(code.as_bytes(), at, Vec::new(), &mut out);
    out
}

/// The modules of one crate and the modules each one's code names.
struct Crate {
    /// Module path → the file that holds it.
    files: BTreeMap<String, PathBuf>,
    /// Module path → the modules its code (tests aside) names.
    edges: BTreeMap<String, BTreeSet<String>>,
    /// Module path → its code (comments, strings and tests aside).
    code: BTreeMap<String, String>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut files = BTreeMap::new();
        let mut code = BTreeMap::new();
        for f in rust_files(src) {
            // The binary root is a crate of its own; it is read, but named "main".
            let m = if f == src.join("main.rs") && src.join("lib.rs").exists() {
                "main".to_string()
            } else {
                module_of(src, &f)
            };
            let text = std::fs::read_to_string(&f).expect("read a source file");
            code.insert(m.clone(), without_tests(&code_only(&text)));
            files.insert(m, f);
        }
        let mut c = Crate {
            files,
            edges: BTreeMap::new(),
            code,
        };
        c.edges = c
            .code
            .iter()
            .map(|(m, text)| (m.clone(), c.names(m, text)))
            .collect();
        c
    }

    fn parent(m: &str) -> String {
        m.rsplit_once("::").map_or(String::new(), |(p, _)| p.into())
    }

    fn join(a: &str, b: &[String]) -> Vec<String> {
        let mut v: Vec<String> = if a.is_empty() {
            Vec::new()
        } else {
            a.split("::").map(str::to_string).collect()
        };
        v.extend(b.iter().cloned());
        v
    }

    /// The longest module prefix of `segs`, when it is a module of this crate.
    fn module(&self, segs: &[String]) -> Option<String> {
        (1..=segs.len())
            .rev()
            .map(|k| segs[..k].join("::"))
            .find(|p| self.files.contains_key(p))
    }

    /// The modules `m`'s code names (itself and the crate root aside).
    fn names(&self, m: &str, text: &str) -> BTreeSet<String> {
        let b = text.as_bytes();
        let children: BTreeSet<String> = self
            .files
            .keys()
            .filter(|k| !k.is_empty() && Crate::parent(k) == m && *k != m)
            .map(|k| k.rsplit("::").next().unwrap_or(k).to_string())
            .collect();
        let mut out = BTreeSet::new();
        let mut i = 0;
        while i < b.len() {
            let starts_word = i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b':');
            if !starts_word || !is_ident(b[i]) {
                i += 1;
                continue;
            }
            let mut j = i;
            while j < b.len() && is_ident(b[j]) {
                j += 1;
            }
            let word = &text[i..j];
            if b.get(j) == Some(&b':') && b.get(j + 1) == Some(&b':') {
                let base = match word {
                    "crate" => Some(String::new()),
                    "super" => Some(Crate::parent(if m == "main" { "" } else { m })),
                    "self" => Some(m.to_string()),
                    "evd" if m == "main" => Some(String::new()),
                    w if children.contains(w) => Some(m.to_string()),
                    _ => None,
                };
                if let Some(base) = base {
                    let from = if children.contains(word) { i } else { j + 2 };
                    for p in paths_at(text, from) {
                        if let Some(t) = self.module(&Crate::join(&base, &p)) {
                            if t != m && !t.is_empty() {
                                out.insert(t);
                            }
                        }
                    }
                }
            }
            i = j;
        }
        out
    }

    /// Every circle among this crate's modules (each as its members, sorted).
    fn circles(&self) -> Vec<Vec<String>> {
        // Tarjan's strongly connected components, iteratively small enough to recurse.
        struct T<'a> {
            g: &'a BTreeMap<String, BTreeSet<String>>,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on: BTreeSet<&'a str>,
            out: Vec<Vec<String>>,
        }
        fn visit<'a>(t: &mut T<'a>, v: &'a str) {
            let n = t.index.len();
            t.index.insert(v, n);
            t.low.insert(v, n);
            t.stack.push(v);
            t.on.insert(v);
            let g = t.g;
            for w in g.get(v).into_iter().flatten() {
                if !t.index.contains_key(w.as_str()) {
                    visit(t, w);
                    let lw = t.low[w.as_str()];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(lw));
                } else if t.on.contains(w.as_str()) {
                    let iw = t.index[w.as_str()];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(iw));
                }
            }
            if t.low[v] == t.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = t.stack.pop() {
                    t.on.remove(w);
                    comp.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    t.out.push(comp);
                }
            }
        }
        let mut t = T {
            g: &self.edges,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on: BTreeSet::new(),
            out: Vec::new(),
        };
        for v in self.edges.keys() {
            if !t.index.contains_key(v.as_str()) {
                visit(&mut t, v);
            }
        }
        t.out
    }
}

/// The layer table at the top of docs/architecture.md: each layer (bottom first) with the
/// layers it may import.
fn layer_table() -> Vec<(String, BTreeSet<String>)> {
    let doc = std::fs::read_to_string(workspace().join("docs/architecture.md"))
        .expect("docs/architecture.md");
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in doc.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if !line.trim_start().starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        if !in_table {
            in_table = cells
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case("layer"));
            continue;
        }
        if cells
            .iter()
            .all(|c| c.chars().all(|x| x == '-' || x == ':'))
        {
            continue;
        }
        assert!(
            cells.len() >= 3,
            "a layer row has three cells (layer | owns | may import): {line}"
        );
        let name = cells[0]
            .trim_matches('`')
            .trim_end_matches('/')
            .trim_end_matches(".rs")
            .to_string();
        let may: BTreeSet<String> = cells[cells.len() - 1]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|s| s.trim_end_matches('/').trim_end_matches(".rs").to_string())
            .collect();
        rows.push((name, may));
    }
    assert!(
        !rows.is_empty(),
        "docs/architecture.md has no layer table (a table whose first column is `layer`)"
    );
    rows
}

#[test]
fn the_layer_table_points_down_and_names_every_folder_of_evd() {
    let table = layer_table();
    let mut seen = BTreeSet::new();
    for (name, may) in &table {
        for m in may {
            assert!(
                seen.contains(m),
                "layer {name} may import {m}, which is not below it in the table: arrows point down"
            );
        }
        seen.insert(name.clone());
    }
    let evd = Crate::read(&workspace().join("evd/src"));
    let top: BTreeSet<String> = evd
        .files
        .keys()
        .filter(|m| !m.is_empty() && *m != "main")
        .map(|m| m.split("::").next().unwrap_or(m).to_string())
        .collect();
    assert_eq!(
        top, seen,
        "evd/src's top-level folders and files are exactly the layers of docs/architecture.md"
    );
}

#[test]
fn no_layer_of_evd_imports_one_above_it() {
    let table: BTreeMap<String, BTreeSet<String>> = layer_table().into_iter().collect();
    let evd = Crate::read(&workspace().join("evd/src"));
    let mut wrong = Vec::new();
    for (m, to) in &evd.edges {
        if m == "main" {
            continue;
        }
        let layer = m.split("::").next().unwrap_or(m);
        let Some(may) = table.get(layer) else {
            continue; // the test above says so
        };
        for t in to {
            let other = t.split("::").next().unwrap_or(t);
            if other != layer && !may.contains(other) {
                wrong.push(format!("{m} ({layer}) imports {t} ({other})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "layers import only what docs/architecture.md's table allows:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_file_imports_itself_in_a_circle() {
    for krate in ["evd/src", "evctl/src", "proto/src"] {
        let c = Crate::read(&workspace().join(krate));
        let circles = c.circles();
        assert!(
            circles.is_empty(),
            "{krate}: modules that import each other in a circle: {circles:?}"
        );
    }
}

#[test]
fn evctl_reaches_evd_through_one_door() {
    let mut used = BTreeSet::new();
    for f in rust_files(&workspace().join("evctl/src")) {
        let text = std::fs::read_to_string(&f).expect("read");
        let code = code_only(&text);
        let b = code.as_bytes();
        let mut from = 0;
        while let Some(at) = code[from..].find("evd::") {
            let i = from + at;
            from = i + 5;
            if i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b':') {
                continue;
            }
            for p in paths_at(&code, i + 5) {
                if let Some(first) = p.first() {
                    used.insert(first.clone());
                }
            }
        }
    }
    assert_eq!(
        used,
        BTreeSet::from(["api".to_string()]),
        "evctl names evd's engine door (evd::api) and nothing else of evd"
    );
}

#[test]
fn platform_conditions_live_in_evd_sys_only() {
    let sys = workspace().join("evd/src/sys");
    let mut found = Vec::new();
    for krate in ["evd/src", "evctl/src", "proto/src"] {
        for f in rust_files(&workspace().join(krate)) {
            if f.starts_with(&sys) {
                continue;
            }
            let text = std::fs::read_to_string(&f).expect("read");
            let code = code_only(&text);
            for (n, line) in code.lines().enumerate() {
                if ["target_os", "target_family", "target_vendor", "target_env"]
                    .iter()
                    .any(|k| line.contains(k))
                {
                    found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "platform conditions belong in evd/src/sys/:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reader_sees_through_comments_strings_groups_and_tests() {
    let text = r#"
//! crate::doc::comment
use crate::{a::b, c::{d, e::f}};
let s = "crate::in::a::string";
let c = '"'; fn g<'a>(x: &'a str) { crate::h::i(x) }
#[cfg(test)]
mod tests { use crate::j; }
"#;
    let code = without_tests(&code_only(text));
    assert!(!code.contains("doc") && !code.contains("in::a") && !code.contains("crate::j"));
    let mut all = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::") {
        all.extend(paths_at(&code, from + at + 7));
        from += at + 7;
    }
    let all: Vec<String> = all.iter().map(|p| p.join("::")).collect();
    assert_eq!(all, ["a::b", "c::d", "c::e::f", "h::i"]);
}
