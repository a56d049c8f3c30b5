//! The worked examples in docs/*.md are run, so the docs cannot drift from the tools.
//!
//! In a page, every fenced block whose info string is `console` is an example. A line starting
//! with `$ ` is a command, run by bash (stderr merged into stdout) in a fresh git repository
//! made for that page; state carries across the blocks of one page. A command line ending in a
//! heredoc (`<<'EOF'` or `<<EOF`) takes the following lines up to the terminator as its body.
//! The lines after a command, up to the next command or the end of the block, are its exact
//! expected output; a line `...` stands for any number of lines.

use std::path::{Path, PathBuf};

use evd_e2e::{target_dir, workspace_root, Repo, World};

#[derive(Debug)]
struct Example {
    command: String,
    expected: Vec<String>,
    line: usize,
}

fn examples(page: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut in_block = false;
    let mut heredoc: Option<String> = None;
    for (n, line) in page.lines().enumerate() {
        if !in_block {
            in_block = line.trim() == "```console";
            continue;
        }
        if let Some(term) = &heredoc {
            let ex = out.last_mut().expect("a heredoc follows its command");
            ex.command.push('\n');
            ex.command.push_str(line);
            if line.trim() == term {
                heredoc = None;
            }
            continue;
        }
        if line.trim_start().starts_with("```") {
            in_block = false;
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            heredoc = cmd
                .rsplit_once("<<")
                .map(|(_, t)| t.trim().trim_matches(|c| c == '\'' || c == '"').to_string())
                .filter(|t| !t.is_empty());
            out.push(Example {
                command: cmd.to_string(),
                expected: Vec::new(),
                line: n + 1,
            });
        } else if let Some(ex) = out.last_mut() {
            ex.expected.push(line.to_string());
        }
    }
    out
}

/// Does `got` match `want`, where a `...` line in `want` matches any run of lines?
fn matches(want: &[String], got: &[&str]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((w, rest)) if w == "..." => (0..=got.len()).any(|k| matches(rest, &got[k..])),
        Some((w, rest)) => got.first().is_some_and(|g| g == w) && matches(rest, &got[1..]),
    }
}

fn run_page(path: &Path) -> usize {
    let page = std::fs::read_to_string(path).expect("read page");
    let exs = examples(&page);
    if exs.is_empty() {
        return 0;
    }
    let w = World::new();
    let repo = Repo::new();
    let bin_dir: PathBuf = target_dir();
    let path_var = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for ex in &exs {
        let out = w
            .command("bash")
            .arg("-c")
            .arg(format!("{{\n{}\n}} 2>&1", ex.command))
            .current_dir(repo.path())
            .env("PATH", &path_var)
            .env("NO_COLOR", "1")
            .output()
            .expect("bash");
        let text = String::from_utf8_lossy(&out.stdout);
        let got: Vec<&str> = text.lines().collect();
        assert!(
            matches(&ex.expected, &got),
            "{}:{}: `{}`\n--- expected\n{}\n--- got\n{}",
            path.display(),
            ex.line,
            ex.command,
            ex.expected.join("\n"),
            got.join("\n")
        );
    }
    exs.len()
}

#[test]
fn every_console_example_in_the_docs_runs_as_written() {
    let dir = workspace_root().join("docs");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    let ran: usize = pages.iter().map(|p| run_page(p)).sum();
    assert!(ran > 0, "the docs hold runnable examples");
}

#[test]
fn the_example_format_is_read_as_documented() {
    let page = "x\n```console\n$ echo a\na\n...\n$ cat > f <<'EOF'\nline\nEOF\n```\n";
    let exs = examples(page);
    assert_eq!(exs.len(), 2);
    assert_eq!(exs[0].expected, vec!["a", "..."]);
    assert_eq!(exs[1].command, "cat > f <<'EOF'\nline\nEOF");
    assert!(matches(&exs[0].expected, &["a", "b", "c"]));
    assert!(matches(&exs[0].expected, &["a"]));
    assert!(!matches(&exs[0].expected, &["b"]));
}
