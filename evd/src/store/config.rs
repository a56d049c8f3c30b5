//! The `.evolving/config` reader: not TOML, a flat scan where the first `key = value` line whose
//! key matches wins; anything missing or unparseable falls back to the default.

/// The exact bytes `init` writes.
pub const DEFAULT_CONFIG: &str = "schema_version = 1\n\n[runner]\ntemplate = \"pytest {selector}\"\ngreen_exit_code = 0\n\n[liveness]\nplatforms = [\"linux-ci\", \"mac\", \"ship-image\"]\nstaleness_days = 7\nnot_run_lookback_commits = 20\nstaleness_ref = \"live-origin\"\n";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub schema_version: u64,
    pub staleness_days: u64,
    pub green_exit_code: i32,
    pub staleness_ref: String,
    pub brief_limit: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            schema_version: 1,
            staleness_days: 7,
            green_exit_code: 0,
            staleness_ref: "live-origin".into(),
            brief_limit: 10,
        }
    }
}

fn lookup<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

impl Config {
    /// Parse config text; `None` (a missing file) gives every default.
    pub fn parse(text: Option<&str>) -> Config {
        let d = Config::default();
        let Some(text) = text else { return d };
        let num = |k: &str, dflt: u64| lookup(text, k).and_then(|v| v.parse().ok()).unwrap_or(dflt);
        let staleness_ref = lookup(text, "staleness_ref")
            .map(|v| {
                v.strip_prefix('"')
                    .and_then(|s| s.strip_suffix('"'))
                    .unwrap_or(v)
                    .to_string()
            })
            .unwrap_or(d.staleness_ref);
        Config {
            schema_version: num("schema_version", d.schema_version),
            staleness_days: num("staleness_days", d.staleness_days),
            green_exit_code: lookup(text, "green_exit_code")
                .and_then(|v| v.parse().ok())
                .unwrap_or(d.green_exit_code),
            staleness_ref,
            brief_limit: num("brief_limit", d.brief_limit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_file_reads_as_the_defaults() {
        assert_eq!(Config::parse(Some(DEFAULT_CONFIG)), Config::default());
    }

    #[test]
    fn first_match_wins_sections_are_ignored_and_bad_values_fall_back() {
        let c = Config::parse(Some(
            "[x]\nstaleness_days = 3\nstaleness_days = 9\ngreen_exit_code = -2\nbrief_limit = 4 # c\nstaleness_ref = \"none\"\n",
        ));
        assert_eq!(c.staleness_days, 3);
        assert_eq!(c.green_exit_code, -2);
        assert_eq!(c.brief_limit, 10);
        assert_eq!(c.staleness_ref, "none");
    }
}
