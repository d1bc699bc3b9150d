//! The stock sentinels: which shipped detectors they are, the roles each one
//! reads, and which kind of configured source may fill each role.
//!
//! It owns the table of the eight (their detector names, the spec's spelling,
//! whether they are experimental, their cadence class), as data: the rules of binding a
//! role to a source are [`super::binding`]'s, `sources` builds the sources,
//! `scan::plan` reports what is unbound. It imports nothing of the config,
//! never reads a source or the data dir, and never guesses a binding.

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

/// The spec's cadence classes: polling and deep sentinels tick on their
/// cooldown (every scan without one); a fast one does not tick at all, it
/// runs when kicked (the inbox watcher), and under a schedule, where
/// nothing can kick, each run is the kick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Polling,
    /// Polling over long windows of statistics (the windowed two).
    Deep,
    Fast,
}

impl Class {
    pub fn label(self) -> &'static str {
        match self {
            Class::Polling => "polling",
            Class::Deep => "deep",
            Class::Fast => "fast",
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
    /// Its cadence class (a fast one is kicked when its source stirs).
    pub class: Class,
    /// It sums or rates rows per window, so its SQLite sources must read
    /// each row once: a `cursor`, no `reread` (checked with the config).
    pub windowed: bool,
    pub roles: &'static [Role],
}

use SourceKind as K;

/// The eight.
pub const STOCK: &[Stock] = &[
    Stock {
        name: "file_inbox_watch",
        spec_name: "file-inbox-watch",
        experimental: false,
        class: Class::Fast,
        windowed: false,
        roles: &[Role { name: "inbox", kinds: &[K::Directory] }],
    },
    Stock {
        name: "silence_watch",
        spec_name: "silence-watch",
        experimental: false,
        class: Class::Polling,
        windowed: false,
        roles: &[
            Role { name: "audit", kinds: &[K::Directory, K::Digest] },
            Role { name: "backlog", kinds: &[K::Directory] },
        ],
    },
    Stock {
        name: "queue_depth_watch",
        spec_name: "queue-depth-watch",
        experimental: false,
        class: Class::Polling,
        windowed: false,
        roles: &[Role { name: "queue", kinds: &[K::Http] }],
    },
    Stock {
        name: "watch_health_watch",
        spec_name: "watch-health-watch",
        experimental: false,
        class: Class::Polling,
        windowed: false,
        roles: &[Role { name: "health", kinds: &[K::Host] }],
    },
    Stock {
        name: "ledger_delta_watch",
        spec_name: "ledger-delta-watch",
        experimental: true,
        class: Class::Deep,
        windowed: true,
        roles: &[Role { name: "spend", kinds: &[K::Sqlite] }],
    },
    Stock {
        name: "anomaly_watch",
        spec_name: "anomaly-watch",
        experimental: true,
        class: Class::Deep,
        windowed: true,
        roles: &[Role { name: "escalations", kinds: &[K::Sqlite] }],
    },
    Stock {
        name: "completion_verify_watch",
        spec_name: "completion-verify-watch",
        experimental: false,
        class: Class::Polling,
        windowed: false,
        roles: &[Role { name: "outbox", kinds: &[K::Sqlite] }],
    },
    Stock {
        name: "precedent_integrity_watch",
        spec_name: "precedent-integrity-watch",
        experimental: false,
        class: Class::Polling,
        windowed: false,
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
        let windowed: Vec<&str> = STOCK.iter().filter(|s| s.windowed).map(|s| s.name).collect();
        assert_eq!(windowed, ["ledger_delta_watch", "anomaly_watch"]);
    }
}
