//! Shell completions and man pages, generated from the clap definitions in main.rs plus the
//! stream flags of `grammar::STREAM_FLAGS`, so neither can drift from what evctl accepts.

use std::path::{Path, PathBuf};

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, Command};
use clap_complete::aot::Shell;
use proto::rpc::Refusal;

use crate::grammar::{self, STREAM_FLAGS};
use crate::render::{self, Out};

/// Give decide, propose and supersede their hand-read stream flags as clap arguments.
///
/// clap never parses these verbs (main.rs hands their tokens to `grammar` first); the arguments
/// are there so that `--help`, the man pages and the completions describe the real stream.
pub fn with_stream_flags(cmd: Command) -> Command {
    cmd.mut_subcommand("decide", |c| add_stream_flags(c, grammar::DECIDE))
        .mut_subcommand("propose", |c| add_stream_flags(c, grammar::PROPOSE))
        .mut_subcommand("supersede", |c| {
            add_stream_flags(c, grammar::OVERTURN | grammar::RETAG)
        })
}

fn add_stream_flags(mut cmd: Command, verbs: u8) -> Command {
    for f in STREAM_FLAGS.iter().filter(|f| f.verbs & verbs != 0) {
        let long = f.name.trim_start_matches("--");
        let mut arg = Arg::new(long)
            .long(long)
            .help(f.help)
            .help_heading(f.level.heading());
        arg = match f.value {
            None => arg.action(ArgAction::SetTrue),
            Some(v) => arg
                .value_name(v)
                .action(if f.repeats {
                    ArgAction::Append
                } else {
                    ArgAction::Set
                })
                // A value is the next token whatever it looks like, as the walk reads it.
                .allow_hyphen_values(true),
        };
        if !f.choices.is_empty() {
            arg = arg.value_parser(PossibleValuesParser::new(f.choices.iter().copied()));
        }
        cmd = cmd.arg(arg);
    }
    cmd
}

/// `evctl completions <shell>`: the script on stdout.
pub fn completions(mut cmd: Command, shell: Shell) -> Out {
    let mut buf = Vec::new();
    clap_complete::aot::generate(shell, &mut cmd, "evctl", &mut buf);
    Out::raw(String::from_utf8_lossy(&buf).into_owned())
}

/// `evctl man`: evctl(1) on stdout. `evctl man --dir DIR`: evctl.1 and one evctl-<verb>.1 per
/// subcommand written into DIR (created if missing), each path printed as it is written.
pub fn man(cmd: Command, dir: Option<PathBuf>, json: bool) -> Out {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let Some(dir) = dir else {
        let mut buf = Vec::new();
        return match clap_mangen::Man::new(cmd).render(&mut buf) {
            Ok(()) => Out::raw(String::from_utf8_lossy(&buf).into_owned()),
            Err(e) => cannot_write(Path::new("stdout"), &e, json),
        };
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return cannot_write(&dir, &e, json);
    }
    let mut pages = vec![cmd.clone()];
    let mut i = 0;
    while let Some(page) = pages.get(i) {
        let subs: Vec<Command> = page
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .cloned()
            .collect();
        pages.extend(subs);
        i += 1;
    }
    let mut out = Out::default();
    for page in pages {
        let man = clap_mangen::Man::new(page);
        let path = dir.join(man.get_filename());
        let mut buf = Vec::new();
        let written = man
            .render(&mut buf)
            .and_then(|()| std::fs::write(&path, &buf));
        if let Err(e) = written {
            return cannot_write(&path, &e, json);
        }
        out.line(path.display().to_string());
    }
    if let Some(hint) = manpath_hint(&dir) {
        out.err(hint);
    }
    out
}

/// When `man` would not look where the pages were written (`dir`, a `man1` directory), the line
/// that says how to make it: `man` searches the `MANPATH` it reports (`manpath`), which a fresh
/// shell may not derive from `PATH` for a directory under the home.
fn manpath_hint(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let base = if dir.file_name().is_some_and(|n| n == "man1") {
        dir.parent()?.to_path_buf()
    } else {
        dir.clone()
    };
    let searched = evd::api::shared::child::output(
        std::process::Command::new("manpath").arg("-q"),
        std::time::Duration::from_secs(5),
    )
    .ok()
    .filter(|o| o.status.success())
    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let found = searched.as_deref().is_some_and(|paths| {
        paths
            .split(':')
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .any(|p| p == base)
    });
    (!found).then(|| {
        format!(
            "evctl: `man` does not look in {} yet: run `export MANPATH=\"{}:$(manpath -q)\"` (and put it in your shell's startup file), then `man evctl`",
            base.display(),
            base.display()
        )
    })
}

fn cannot_write(path: &Path, e: &std::io::Error, json: bool) -> Out {
    render::refusal(
        &Refusal::io(format!("cannot write {}: {e}", path.display())),
        json,
    )
}
