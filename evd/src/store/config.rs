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
    /// Whose published receipts may turn a verdict (`trusted_hosts`, evd's own key: upstream
    /// ignores keys it does not read).
    pub trust: Trust,
}

/// The `trusted_hosts` key: absent, every publisher counts (upstream trusts any receipt
/// writer); a list, only those hosts; present but unreadable, no publisher (a typo must not
/// open the gate to everyone).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Trust {
    #[default]
    Everyone,
    Only(Vec<String>),
    Unreadable(String),
}

impl Trust {
    /// Whether receipts published by `host` may turn a verdict.
    pub fn allows(&self, host: &str) -> bool {
        match self {
            Trust::Everyone => true,
            Trust::Only(hosts) => hosts.iter().any(|h| h == host),
            Trust::Unreadable(_) => false,
        }
    }

    fn parse(value: Option<&str>) -> Trust {
        let Some(v) = value else {
            return Trust::Everyone;
        };
        match serde_json::from_str::<Vec<String>>(v) {
            Ok(mut hosts) => {
                hosts.sort();
                hosts.dedup();
                Trust::Only(hosts)
            }
            Err(_) => Trust::Unreadable(format!(
                "trusted_hosts = {v} is not a list of quoted host ids like [\"linux-ci\"]: no published receipt is trusted until it is fixed"
            )),
        }
    }
}

/// The config key [`Trust`] is read from.
pub const TRUSTED_HOSTS: &str = "trusted_hosts";

impl Default for Config {
    fn default() -> Self {
        Config {
            schema_version: 1,
            staleness_days: 7,
            green_exit_code: 0,
            staleness_ref: "live-origin".into(),
            brief_limit: 10,
            trust: Trust::Everyone,
        }
    }
}

pub fn lookup<'a>(text: &'a str, key: &str) -> Option<&'a str> {
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
            trust: Trust::parse(lookup(text, TRUSTED_HOSTS)),
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

    #[test]
    fn trust_is_everyone_by_default_a_list_when_given_and_nobody_when_unreadable() {
        assert!(Config::parse(Some(DEFAULT_CONFIG)).trust.allows("anyone"));
        let c = Config::parse(Some("[receipts]\ntrusted_hosts = [\"ci-2\", \"ci-1\"]\n"));
        assert_eq!(c.trust, Trust::Only(vec!["ci-1".into(), "ci-2".into()]));
        assert!(c.trust.allows("ci-1") && !c.trust.allows("laptop"));
        let broken = Config::parse(Some("trusted_hosts = ci-1\n"));
        assert!(matches!(broken.trust, Trust::Unreadable(_)));
        assert!(!broken.trust.allows("ci-1"));
    }
}
