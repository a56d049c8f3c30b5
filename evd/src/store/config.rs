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
    /// Which signers a host's notes commits must be signed by for its receipts to count
    /// (`trusted_signers`, evd's own key).
    pub signers: Signers,
}

/// The `trusted_signers` key: `["HOST=KEY", …]`. A host named there counts only for notes
/// commits git reports a good signature on (`%G?` `G` or `U`) whose key fingerprint, primary
/// key fingerprint, key id or signer (`%GF`, `%GP`, `%GK`, `%GS`) is one of its keys. Absent,
/// no signature is asked for; present but unreadable, no publisher counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Signers {
    #[default]
    Unset,
    Only(std::collections::BTreeMap<String, Vec<String>>),
    Unreadable(String),
}

impl Signers {
    /// The keys `host`'s notes commits must be signed with, if any are asked for.
    pub fn required(&self, host: &str) -> Option<&[String]> {
        match self {
            Signers::Only(m) => m.get(host).map(Vec::as_slice),
            _ => None,
        }
    }

    /// Whether anything at all is asked of signatures.
    pub fn any(&self) -> bool {
        !matches!(self, Signers::Unset)
    }

    /// Whether a notes commit by `host`, signed as `signature` says (`None`: not looked at or
    /// no good signature), counts.
    pub fn allows(&self, host: &str, signature: Option<&[String]>) -> bool {
        match self {
            Signers::Unset => true,
            Signers::Unreadable(_) => false,
            Signers::Only(m) => match m.get(host) {
                None => true,
                Some(keys) => signature.is_some_and(|sig| sig.iter().any(|k| keys.contains(k))),
            },
        }
    }

    /// As the config line holds them: `HOST=KEY` each, sorted.
    pub fn entries(&self) -> Vec<String> {
        match self {
            Signers::Only(m) => m
                .iter()
                .flat_map(|(h, keys)| keys.iter().map(move |k| format!("{h}={k}")))
                .collect(),
            _ => Vec::new(),
        }
    }

    pub fn parse(value: Option<&str>) -> Signers {
        let Some(v) = value else {
            return Signers::Unset;
        };
        let bad = || {
            Signers::Unreadable(format!(
                "{TRUSTED_SIGNERS} = {v} is not a list of quoted \"HOST=KEY\" entries: no published receipt is trusted until it is fixed"
            ))
        };
        let Ok(entries) = serde_json::from_str::<Vec<String>>(v) else {
            return bad();
        };
        let mut m: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for e in entries {
            let Some((h, k)) = e.split_once('=') else {
                return bad();
            };
            let (h, k) = (h.trim(), k.trim());
            if h.is_empty() || k.is_empty() {
                return bad();
            }
            let keys = m.entry(h.to_string()).or_default();
            if !keys.iter().any(|x| x == k) {
                keys.push(k.to_string());
            }
        }
        for keys in m.values_mut() {
            keys.sort();
        }
        Signers::Only(m)
    }
}

/// The config key [`Signers`] is read from.
pub const TRUSTED_SIGNERS: &str = "trusted_signers";

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
            signers: Signers::Unset,
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
            signers: Signers::parse(lookup(text, TRUSTED_SIGNERS)),
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
        let c = Config::parse(Some(
            "trusted_signers = [\"ci-1=SHA256:b\", \"ci-1=SHA256:a\", \"ci-2=ci@x\"]\n",
        ));
        assert_eq!(
            c.signers.entries(),
            ["ci-1=SHA256:a", "ci-1=SHA256:b", "ci-2=ci@x"]
        );
        let good = vec!["SHA256:a".to_string(), "ci@y".to_string()];
        assert!(c.signers.allows("ci-1", Some(&good)));
        assert!(!c.signers.allows("ci-1", None), "unsigned");
        assert!(!c.signers.allows("ci-2", Some(&good)), "another key");
        assert!(c.signers.allows("dev-3", None), "no signature asked of it");
        for bad in ["[\"ci-1\"]", "ci-1=x", "[\"=x\"]"] {
            let c = Config::parse(Some(&format!("trusted_signers = {bad}\n")));
            assert!(matches!(c.signers, Signers::Unreadable(_)), "{bad}");
            assert!(!c.signers.allows("dev-3", None));
        }
        assert!(!broken.trust.allows("ci-1"));
    }
}
