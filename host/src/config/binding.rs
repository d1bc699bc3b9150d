//! Binding the stock sentinels' roles to configured sources: the rules, as
//! checks and queries on the parsed [`Config`].
//!
//! It owns what may fill a role (the config's `roles`, or a source named
//! exactly like it, of a kind the role takes), the checks of
//! `[sentinels.NAME]` tables, and what the rest of the host asks of the
//! bindings (which sentinels are off, whether the health role is bound, the
//! fast sentinels' folders). It never reads a source or the data dir, and
//! never guesses a binding.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::stock::{Class, Role, STOCK, SourceKind, Stock, find};
use super::{Config, ConfigError, SentinelConfig};

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
            if let Some(problem) = cooldown_problem(stock, sc) {
                return Err(self.invalid_at(text, "cooldown", format!("sentinels.{name}.cooldown: {problem}")));
            }
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
        self.check_windowed(text)
    }

    /// A windowed sentinel (sums, rates) counts each row it reads: a SQLite
    /// source filling its role must read each row once, so one without a
    /// `cursor` (every scan reads every row again) or with a `reread` is
    /// refused, naming the source's line.
    fn check_windowed(&self, text: &str) -> Result<(), ConfigError> {
        for stock in STOCK.iter().filter(|s| s.windowed) {
            if self.sentinel_off(stock.name).is_some() {
                continue;
            }
            let sc = self.sentinel(stock.name);
            for role in stock.roles {
                let source = sc.and_then(|c| c.roles.get(role.name)).map_or(role.name, String::as_str);
                let Some(q) = self.sources.sqlite.iter().find(|q| q.name == source) else { continue };
                let problem = if q.cursor.is_none() {
                    "has no `cursor`, so every scan would read every row again"
                } else if q.reread.is_some() {
                    "has a `reread`, so rows would be read again"
                } else {
                    continue;
                };
                return Err(self.invalid_at(
                    text,
                    source,
                    format!(
                        "sources.sqlite `{source}` {problem}: {} counts each row it reads, give the source a \
                         `cursor` (an id, WHERE id > :cursor) and no `reread`",
                        stock.spec_name
                    ),
                ));
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

    /// The cadence `detector` ticks on, in seconds: the sentinels file's
    /// `cooldown` for a stock sentinel, else what the detector declares
    /// (none: every scan).
    pub fn cooldown_seconds(&self, detector: &str, declared: Option<u32>) -> Option<u32> {
        let set = self.sentinel(detector).and_then(|sc| sc.cooldown.as_deref()).and_then(crate::config::parse_duration);
        set.map(|ms| u32::try_from(ms / 1000).unwrap_or(u32::MAX)).or(declared)
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
        for stock in STOCK.iter().filter(|s| s.class == Class::Fast) {
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

/// What is wrong with a sentinel's `cooldown`, if anything: a duration of
/// whole seconds, at least one, and none for a fast sentinel.
fn cooldown_problem(stock: &Stock, sc: &SentinelConfig) -> Option<String> {
    let text = sc.cooldown.as_deref()?;
    if stock.class == Class::Fast {
        return Some(format!("{} is fast: it runs when kicked and has no cooldown", stock.spec_name));
    }
    match crate::config::parse_duration(text) {
        Some(ms) if ms >= 1000 && ms % 1000 == 0 && ms / 1000 <= u64::from(u32::MAX) => None,
        _ => Some(format!("`{text}` is not a duration of whole seconds, at least 1 s (\"60s\", \"5m\")")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cooldown_sets_the_cadence_and_a_fast_sentinel_has_none() {
        let parse = |text: &str| Config::parse_yaml(text, std::path::Path::new("sentinels.yaml"));
        let c = parse("sentinels:\n  queue-depth-watch:\n    cooldown: 5m\n").unwrap();
        assert_eq!(c.cooldown_seconds("queue_depth_watch", None), Some(300));
        assert_eq!(c.cooldown_seconds("silence_watch", Some(60)), Some(60), "declared, when not set");
        let err = parse("sentinels:\n  file-inbox-watch:\n    cooldown: 5m\n").unwrap_err().to_string();
        assert!(err.contains("line 3") && err.contains("is fast"), "{err}");
        let err = parse("sentinels:\n  silence-watch:\n    cooldown: 250ms\n").unwrap_err().to_string();
        assert!(err.contains("line 3") && err.contains("whole seconds"), "{err}");
        assert_eq!(find("file-inbox-watch").unwrap().class, Class::Fast);
        assert_eq!(find("anomaly-watch").unwrap().class, Class::Deep);
    }

    #[test]
    fn a_windowed_sentinel_refuses_a_source_that_reads_rows_again() {
        let yaml = |source: &str| {
            format!(
                "sources:\n  sqlite:\n    - name: gw-spend\n      file: s.db\n{source}\
                 sentinels:\n  ledger-delta-watch:\n    enabled: true\n    roles: {{ spend: gw-spend }}\n"
            )
        };
        let parse = |text: &str| Config::parse_yaml(text, std::path::Path::new("sentinels.yaml"));
        let no_cursor = yaml("      query: \"SELECT at, usd FROM spend\"\n");
        let err = parse(&no_cursor).unwrap_err().to_string();
        assert!(err.contains("line 3") && err.contains("no `cursor`"), "{err}");
        let reread = yaml(
            "      query: \"SELECT id, at, usd FROM spend WHERE id > :cursor\"\n      cursor: id\n      reread: 5m\n",
        );
        let err = parse(&reread).unwrap_err().to_string();
        assert!(err.contains("line 3") && err.contains("`reread`"), "{err}");
        let once = yaml("      query: \"SELECT id, at, usd FROM spend WHERE id > :cursor\"\n      cursor: id\n");
        parse(&once).unwrap();
        // Off, it reads nothing: nothing to refuse.
        parse(&no_cursor.replace("enabled: true", "enabled: false")).unwrap();
    }
}
