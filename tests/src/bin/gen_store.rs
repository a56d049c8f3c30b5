//! gen_store: write a synthetic, upstream-compatible `.evolving/` store by hand — the same
//! generator the tests and evbench use.
//!
//! ```text
//! cargo run --release -p evd-e2e --bin gen_store -- DIR --ticks N [--seed S]
//!     [--test-bound F] [--receipts-per-test R] [--commits K] [--now RFC3339]
//!     [--no-upstream] [--force]
//! ```
//!
//! DIR becomes a git repository with a short history when it has no commits. A one-line JSON
//! summary (head id, a sample id, a `why` selector, counts) goes to stdout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use evd_e2e::store_gen::{generate, Options};

const USAGE: &str = "usage: gen_store DIR --ticks N [--seed S] [--test-bound F] \
[--receipts-per-test R] [--commits K] [--now RFC3339] [--no-upstream] [--force]";

fn parse(args: &[String]) -> Result<(PathBuf, Options), String> {
    let mut opts = Options::default();
    let mut dir = None;
    let mut ticks = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        let number = |name: &str, v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{name} wants a whole number, got {v:?}"))
        };
        match a.as_str() {
            "--ticks" => ticks = Some(number("--ticks", value("--ticks")?)? as usize),
            "--seed" => opts.seed = number("--seed", value("--seed")?)?,
            "--commits" => opts.commits = number("--commits", value("--commits")?)? as usize,
            "--receipts-per-test" => {
                opts.receipts_per_test =
                    number("--receipts-per-test", value("--receipts-per-test")?)? as usize
            }
            "--test-bound" => {
                let v = value("--test-bound")?;
                opts.test_bound = v
                    .parse()
                    .map_err(|_| format!("--test-bound wants a share in 0..=1, got {v:?}"))?;
            }
            "--now" => opts.now = value("--now")?,
            "--no-upstream" => opts.upstream = false,
            "--force" => opts.force = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            s if s.starts_with('-') => return Err(format!("unknown option {s:?}\n{USAGE}")),
            s if dir.is_none() => dir = Some(PathBuf::from(s)),
            s => return Err(format!("unexpected argument {s:?}\n{USAGE}")),
        }
    }
    opts.ticks = ticks.ok_or_else(|| format!("--ticks is required\n{USAGE}"))?;
    let dir = dir.ok_or_else(|| format!("DIR is required\n{USAGE}"))?;
    Ok((dir, opts))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, opts) = match parse(&args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let start = Instant::now();
    match generate(&dir, &opts) {
        Ok(summary) => {
            println!("{}", summary.to_json());
            eprintln!(
                "gen_store: {} ticks in {:.2} s",
                opts.ticks,
                start.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
