//! The stock sentinels: which shipped detectors they are, the roles each one
//! reads, and which kind of configured source may fill each role.
//!
//! It owns the table of the eight (their detector names, the spec's spelling,
//! whether they are experimental or fast) and the rules of binding a role to
//! a source, as checks and queries on the parsed [`Config`] (its
//! `[sentinels.NAME]` tables); `config` builds the sources, `scan::plan`
//! reports what is unbound. It never reads a source or the data dir, and
//! never guesses a binding: a role is filled only by the config's `roles` or
//! by a source named exactly like it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::config::{Config, ConfigError, SentinelConfig};

/// The kind of configured source a role takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Directory,
    Digest,
    Http,
    Sqlite,
    /// Made by the host about itself (`health`): never configured.
    Host,
}

impl SourceKind {
    pub fn label(self) -> &'static str {
        match self {
            SourceKind::Directory => "sources.directory",
            SourceKind::Digest => "sources.digest",
            SourceKind::Http => "sources.http",
            SourceKind::Sqlite => "sources.sqlite",
            SourceKind::Host => "the host",
        }
    }
}

/// One role of a stock sentinel and the kinds of source that may fill it.
#[derive(Debug, Clone, Copy)]
pub struct Role {
    pub name: &'static str,
    pub kinds: &'static [SourceKind],
}

/// One stock sentinel.
#[derive(Debug, Clone, Copy)]
pub struct Stock {
    /// The detector's name (`file_inbox_watch`).
    pub name: &'static str,
    /// The spec's spelling (`file-inbox-watch`); the config accepts both.
    pub spec_name: &'static str,
    /// Off unless the config enables it.
    pub experimental: bool,
    /// Kicked when its source stirs (the long-running mode), besides every scan.
    pub fast: bool,
    pub roles: &'static [Role],
}

use SourceKind as K;

/// The eight.
pub const STOCK: &[Stock] = &[
    Stock {
        name: "file_inbox_watch",
        spec_name: "file-inbox-watch",
        experimental: false,
        fast: true,
        roles: &[Role { name: "inbox", kinds: &[K::Directory] }],
    },
    Stock {
        name: "silence_watch",
        spec_name: "silence-watch",
        experimental: false,
        fast: false,
        roles: &[
            Role { name: "audit", kinds: &[K::Directory, K::Digest] },
            Role { name: "backlog", kinds: &[K::Directory] },
        ],
    },
    Stock {
        name: "queue_depth_watch",
        spec_name: "queue-depth-watch",
        experimental: false,
        fast: false,
        roles: &[Role { name: "queue", kinds: &[K::Http] }],
    },
    Stock {
        name: "watch_health_watch",
        spec_name: "watch-health-watch",
        experimental: false,
        fast: false,
        roles: &[Role { name: "health", kinds: &[K::Host] }],
    },
    Stock {
        name: "ledger_delta_watch",
        spec_name: "ledger-delta-watch",
        experimental: true,
        fast: false,
        roles: &[Role { name: "spend", kinds: &[K::Sqlite] }],
    },
    Stock {
        name: "anomaly_watch",
        spec_name: "anomaly-watch",
        experimental: true,
        fast: false,
        roles: &[Role { name: "escalations", kinds: &[K::Sqlite] }],
    },
    Stock {
        name: "completion_verify_watch",
        spec_name: "completion-verify-watch",
        experimental: false,
        fast: false,
        roles: &[Role { name: "outbox", kinds: &[K::Sqlite] }],
    },
    Stock {
        name: "precedent_integrity_watch",
        spec_name: "precedent-integrity-watch",
        experimental: false,
        fast: false,
        roles: &[Role { name: "precedents", kinds: &[K::Digest] }],
    },
];

/// The stock sentinel of that name, in either spelling.
pub fn find(name: &str) -> Option<&'static Stock> {
    STOCK.iter().find(|s| s.name == name || s.spec_name == name)
}

/// The host-made source watch-health-watch reads.
pub const HEALTH_ROLE: &str = "health";

impl Stock {
    pub fn role(&self, name: &str) -> Option<&'static Role> {
        self.roles.iter().find(|r| r.name == name)
    }

    /// Whether it runs, given the config's `enabled` (absent: stock ones
    /// run, experimental ones do not).
    pub fn enabled(&self, configured: Option<bool>) -> bool {
        configured.unwrap_or(!self.experimental)
    }
}

impl Config {
    /// The kind of the generic source named `name`, if one is configured.
    pub(crate) fn generic_kind(&self, name: &str) -> Option<SourceKind> {
        let s = &self.sources;
        if s.directory.iter().any(|d| d.name == name) {
            Some(SourceKind::Directory)
        } else if s.digest.iter().any(|d| d.name == name) {
            Some(SourceKind::Digest)
        } else if s.http.iter().any(|h| h.name == name) {
            Some(SourceKind::Http)
        } else if s.sqlite.iter().any(|q| q.name == name) {
            Some(SourceKind::Sqlite)
        } else {
            None
        }
    }

    /// `[sentinels.NAME]`: a stock sentinel, roles it has, bound to a
    /// configured source of a kind that fits; one role bound to one source.
    pub(crate) fn check_sentinels(&self, text: &str) -> Result<(), ConfigError> {
        let mut bound: BTreeMap<&str, &str> = BTreeMap::new();
        for (name, sc) in &self.sentinels {
            let Some(stock) = find(name) else {
                let known: Vec<&str> = STOCK.iter().map(|s| s.spec_name).collect();
                return Err(self.invalid_at(
                    text,
                    name,
                    format!("sentinels.{name}: not a stock sentinel (one of {})", known.join(", ")),
                ));
            };
            for (role, source) in &sc.roles {
                let key = format!("sentinels.{name}.roles.{role}");
                let problem = self.binding_problem(stock, role, source).or_else(|| match bound.insert(role, source) {
                    Some(other) if other != source => {
                        Some(format!("role `{role}` is bound both to `{other}` and to `{source}`"))
                    }
                    _ => None,
                });
                if let Some(problem) = problem {
                    return Err(self.invalid_at(text, role, format!("{key}: {problem}")));
                }
            }
        }
        Ok(())
    }

    /// What is wrong with binding `stock`'s `role` to `source`, if anything.
    fn binding_problem(&self, stock: &Stock, role: &str, source: &str) -> Option<String> {
        let kinds = |r: &Role| r.kinds.iter().map(|k| k.label()).collect::<Vec<_>>().join(" or ");
        let Some(r) = stock.role(role) else {
            let roles: Vec<&str> = stock.roles.iter().map(|r| r.name).collect();
            return Some(format!("{} has no role `{role}` (its roles: {})", stock.spec_name, roles.join(", ")));
        };
        if r.kinds == [SourceKind::Host] {
            return Some(format!("the `{role}` source is made by the host; leave it out"));
        }
        let Some(kind) = self.generic_kind(source) else {
            return Some(format!("no source named `{source}` (bind it to a name from {})", kinds(r)));
        };
        if !r.kinds.contains(&kind) {
            return Some(format!("`{source}` is in {}, the role takes {}", kind.label(), kinds(r)));
        }
        if kind == SourceKind::Http && self.sources.http.iter().any(|h| h.name == source && h.jsonpath.is_none()) {
            return Some(format!("sources.http `{source}` needs a `jsonpath` (for example \"$.active_total\")"));
        }
        if role != source && self.generic_kind(role).is_some() {
            return Some(format!("another source is already named `{role}`; bind that one or rename it"));
        }
        None
    }

    /// The stock sentinel `detector`'s settings, if the config has any.
    pub(crate) fn sentinel(&self, detector: &str) -> Option<&SentinelConfig> {
        let stock = find(detector)?;
        self.sentinels.get(stock.name).or_else(|| self.sentinels.get(stock.spec_name))
    }

    /// Why the config keeps `detector` from running, if it does: a stock
    /// sentinel set `enabled: false`, or an experimental one not enabled
    /// while the config speaks of it. (With no entry at all an experimental
    /// sentinel has no role bound, so it is inert rather than off.)
    pub fn sentinel_off(&self, detector: &str) -> Option<String> {
        let stock = find(detector)?;
        let sc = self.sentinel(detector)?;
        if stock.enabled(sc.enabled) {
            return None;
        }
        Some(if stock.experimental && sc.enabled.is_none() {
            format!("{}: experimental, off unless `enabled: true` in the sentinels config", stock.spec_name)
        } else {
            format!("{}: `enabled: false` in the sentinels config", stock.spec_name)
        })
    }

    /// Whether the host makes the `health` source: watch-health-watch is
    /// in the config and enabled.
    pub fn health_bound(&self) -> bool {
        self.sentinel("watch_health_watch").is_some() && self.sentinel_off("watch_health_watch").is_none()
    }

    /// The directories the fast sentinels read (relative to the data dir
    /// unless absolute): an enabled fast sentinel's roles, through their
    /// bindings, to configured directory sources.
    pub fn fast_dirs(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for stock in STOCK.iter().filter(|s| s.fast) {
            let sc = self.sentinel(stock.name);
            if sc.is_none() || self.sentinel_off(stock.name).is_some() {
                continue;
            }
            for role in stock.roles {
                let source = sc.and_then(|c| c.roles.get(role.name)).map_or(role.name, String::as_str);
                if let Some(d) = self.sources.directory.iter().find(|d| d.name == source) {
                    out.push(PathBuf::from(&d.path));
                }
            }
        }
        out
    }

    /// Role bindings to build, `(role, source)`, for enabled sentinels whose
    /// role is not already the source's own name.
    pub(crate) fn bindings(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (name, sc) in &self.sentinels {
            if self.sentinel_off(name).is_some() {
                continue;
            }
            for (role, source) in &sc.roles {
                if role != source {
                    out.insert(role.clone(), source.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_sentinels_two_experimental_roles_unique() {
        assert_eq!(STOCK.len(), 8);
        assert_eq!(STOCK.iter().filter(|s| s.experimental).count(), 2);
        let mut roles: Vec<&str> = STOCK.iter().flat_map(|s| s.roles.iter().map(|r| r.name)).collect();
        let n = roles.len();
        roles.sort();
        roles.dedup();
        assert_eq!(roles.len(), n, "no two sentinels share a role name");
        assert_eq!(find("file-inbox-watch").unwrap().name, "file_inbox_watch");
        assert!(!find("anomaly_watch").unwrap().enabled(None));
        assert!(find("silence-watch").unwrap().enabled(None));
    }
}
