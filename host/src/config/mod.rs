//! The config file: where each source's data lives and detector settings.
//!
//! One TOML file, `--config FILE` or else
//! `$XDG_CONFIG_HOME/openmausbot-sentinel/config.toml` when it exists, and the
//! sentinels file, YAML, at `$SENTINELS_CONFIG_PATH` (else
//! `/etc/gateway/sentinels.yaml` when it exists): one schema, read into the
//! same structure and merged (a section in both is an error naming it). With
//! no file at all the defaults read the reference data-dir layout. This
//! module owns the schema; `load` finds, parses, merges and checks
//! the files, `binding` binds the stock sentinels' roles ([`stock`]) to
//! configured sources. It never builds a source (`sources` does, from the
//! parsed config) and never reads the data dir. Its format is documented in
//! `docs/config.md`.

mod binding;
mod load;
pub mod stock;

pub use load::{SENTINELS_DEFAULT, SENTINELS_ENV, default_path, sentinels_path};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::model::observation::ConfigValue;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl ConfigError {
    /// Whether the line breaks in this message are a layout of ours: a parse
    /// error quotes the parser's caret diagram (`TOML parse error at line 1,
    /// column 7`, the line, a `^` under the column), printed as lines
    /// ([`crate::base::errors::for_terminal`]).
    pub fn keeps_its_lines(&self) -> bool {
        matches!(self, ConfigError::Parse { .. })
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub sources: SourcesConfig,
    /// `[detectors.NAME]` tables of config values.
    #[serde(default)]
    pub detectors: BTreeMap<String, BTreeMap<String, toml::Value>>,
    /// `[limits]`: the sandbox's caps (docs/sandbox.md).
    #[serde(default)]
    pub limits: LimitsConfig,
    /// `[sentinels.NAME]`: the stock sentinels, enabled or not, their roles
    /// bound to configured sources, and their values.
    #[serde(default)]
    pub sentinels: BTreeMap<String, SentinelConfig>,
    /// `[fleet]`: ship the fire log to NATS JetStream (docs/fleet.md); off when absent.
    #[serde(default)]
    pub fleet: Option<FleetConfig>,
    /// `[report]`: the daily digest, written at a local hour; off when absent.
    #[serde(default)]
    pub report: Option<ReportConfig>,
    /// `[fire_log]`: where the fire log's signing key lives (docs/fire-log.md).
    #[serde(default)]
    pub fire_log: Option<FireLogConfig>,
    /// `[community]`: opt-in community counts (docs/community.md); off when
    /// absent or `enabled = false`.
    #[serde(default)]
    pub community: Option<CommunityConfig>,
    /// Where the file came from, if anywhere.
    #[serde(skip)]
    pub path: Option<PathBuf>,
    /// A hash of its text, so a changed config is never taken for unchanged data.
    #[serde(skip)]
    pub digest: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesConfig {
    pub messages: Option<FileConfig>,
    pub runtime: Option<FileConfig>,
    pub bots: Option<FileConfig>,
    pub events: Option<EventsConfig>,
    #[serde(default)]
    pub directory: Vec<DirectoryConfig>,
    #[serde(default)]
    pub digest: Vec<NamedPath>,
    #[serde(default)]
    pub http: Vec<HttpConfig>,
    #[serde(default)]
    pub sqlite: Vec<QueryConfig>,
}

/// One stock sentinel's settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SentinelConfig {
    /// Absent: stock sentinels run, experimental ones do not.
    pub enabled: Option<bool>,
    /// Role → the name of a configured source.
    #[serde(default)]
    pub roles: BTreeMap<String, String>,
    /// Its config values, as `[detectors.NAME]` takes them.
    #[serde(default)]
    pub values: BTreeMap<String, toml::Value>,
    /// How often a polling or deep sentinel ticks (a duration, `"5m"`);
    /// absent: what the detector declares, else every scan.
    pub cooldown: Option<String>,
}

/// `[fire_log]`: the fire log's signing key.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FireLogConfig {
    /// The key file (a relative path is taken from the config file's
    /// folder); absent: the output folder's default key file.
    pub key_file: Option<PathBuf>,
}

impl Config {
    /// The key file the config file names, resolved against its folder.
    pub fn key_file(&self) -> Option<PathBuf> {
        let file = self.fire_log.as_ref()?.key_file.as_ref()?;
        let base = self.path.as_deref().and_then(std::path::Path::parent).unwrap_or(std::path::Path::new(""));
        Some(base.join(file))
    }
}

/// Every limit of the sandbox; an absent key keeps its default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub fuel_per_call: Option<u64>,
    pub deadline_ms: Option<u64>,
    pub memory_mib: Option<usize>,
    pub table_elements: Option<usize>,
    pub instances: Option<usize>,
    pub tables: Option<usize>,
    pub memories: Option<usize>,
    pub wasm_stack_kib: Option<usize>,
    pub observations_per_call: Option<usize>,
    pub observations_per_scan: Option<usize>,
    pub fires_per_scan: Option<usize>,
    pub log_bytes_per_scan: Option<usize>,
    pub stdio_bytes: Option<usize>,
    pub component_mib: Option<u64>,
    pub state_bytes: Option<usize>,
}

impl LimitsConfig {
    /// `base` with every key this file sets.
    pub fn apply(&self, mut base: crate::runtime::Limits) -> crate::runtime::Limits {
        let set = |dst: &mut usize, v: Option<usize>| {
            if let Some(v) = v {
                *dst = v;
            }
        };
        if let Some(v) = self.fuel_per_call {
            base.fuel_per_call = v;
        }
        if let Some(v) = self.deadline_ms {
            base.deadline = Duration::from_millis(v);
        }
        // Saturating: a huge value means "no cap from the file", never a wrap to a tiny one.
        set(&mut base.memory_bytes, self.memory_mib.map(|m| m.saturating_mul(1 << 20)));
        set(&mut base.table_elements, self.table_elements);
        set(&mut base.instances, self.instances);
        set(&mut base.tables, self.tables);
        set(&mut base.memories, self.memories);
        set(&mut base.max_wasm_stack, self.wasm_stack_kib.map(|k| k.saturating_mul(1 << 10)));
        set(&mut base.observations_per_call, self.observations_per_call);
        set(&mut base.observations_per_scan, self.observations_per_scan);
        set(&mut base.fires_per_scan, self.fires_per_scan);
        set(&mut base.log_bytes_per_scan, self.log_bytes_per_scan);
        set(&mut base.stdio_bytes, self.stdio_bytes);
        set(&mut base.state_bytes, self.state_bytes);
        if let Some(v) = self.component_mib {
            base.component_bytes = v.saturating_mul(1 << 20);
        }
        base
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub file: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsConfig {
    pub dir: Option<String>,
    pub pattern: Option<String>,
    pub max_line_bytes: Option<usize>,
    #[serde(default = "yes")]
    pub enabled: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedPath {
    pub name: String,
    pub path: String,
}

/// `[[sources.directory]]`: a directory listing, without the noise.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectoryConfig {
    pub name: String,
    pub path: String,
    /// Names left out (`*` matches any run of characters); absent: the
    /// editors' and uploaders' temporaries, [`crate::sources::files::directory::DEFAULT_IGNORE`].
    pub ignore: Option<Vec<String>>,
    /// List dot-files too (default: they are left out).
    #[serde(default)]
    pub hidden: bool,
    /// How long a new or changed file must keep its size and mtime before it
    /// is listed (a duration; default `500ms`; `0ms` lists at once).
    pub settle: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    pub name: String,
    pub url: String,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
    /// An RFC 9535 JSONPath evaluated on each body: the column `value`.
    pub jsonpath: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryConfig {
    pub name: String,
    pub file: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    pub query: String,
    /// An integer column whose highest value is kept; the query reads only
    /// newer rows by using `:cursor`.
    pub cursor: Option<String>,
    /// A trailing window (a duration, `"10m"`) the cursor is moved back by
    /// before each read, for rows that change in place: the cursor is then a
    /// change column in ms (`updated_at`), and the rows changed within the
    /// window are read again (their detectors' occurrence keys count each
    /// state once).
    pub reread: Option<String>,
    /// Column types (`text`, `int`, `float`, `boolean`); others are text.
    #[serde(default)]
    pub columns: BTreeMap<String, String>,
    #[serde(default = "default_max_rows")]
    pub max_rows: usize,
}

fn yes() -> bool {
    true
}
fn default_timeout_ms() -> u64 {
    2_000
}
fn default_max_bytes() -> usize {
    1 << 20
}
fn default_kind() -> String {
    "row".into()
}
fn default_max_rows() -> usize {
    10_000
}

impl Config {
    /// `[detectors.NAME]` values, then each sentinel's `values` (under its
    /// detector name), as `(detector, key, value)`.
    pub fn detector_values(&self) -> Vec<(String, String, ConfigValue)> {
        let mut out = Vec::new();
        let sentinels = self.sentinels.iter().map(|(n, c)| (stock::find(n).map_or(n.as_str(), |s| s.name), &c.values));
        for (det, keys) in self.detectors.iter().map(|(d, k)| (d.as_str(), k)).chain(sentinels) {
            for (key, value) in keys {
                if let Some(v) = to_config_value(value) {
                    out.push((det.to_owned(), key.clone(), v));
                }
            }
        }
        out
    }
}

pub(crate) fn to_config_value(v: &toml::Value) -> Option<ConfigValue> {
    Some(match v {
        toml::Value::Boolean(b) => ConfigValue::Boolean(*b),
        toml::Value::Integer(i) => ConfigValue::Integer(*i),
        toml::Value::Float(f) => ConfigValue::Float(*f),
        toml::Value::String(s) => ConfigValue::Text(s.clone()),
        _ => return None,
    })
}

/// `250ms`, `30s`, `5m`, `2h`, `3d` as milliseconds.
pub fn parse_duration(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let unit_ms: u64 = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    // Too large to be a duration in ms: not a duration.
    n.checked_mul(unit_ms)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn community_is_off_by_default_and_takes_the_fleets_server_unless_it_names_its_own() {
        let parse = |t: &str| Config::parse(t, Path::new("c.toml"));
        assert_eq!(parse("").unwrap().community_server(), None, "absent: off");
        let fleet = "[fleet]\nnats = \"nats://f:1\"\ntoken_file = \"/t\"\n";
        assert_eq!(parse(&format!("{fleet}[community]\n")).unwrap().community_server(), None, "enabled unset: off");
        let on = parse(&format!("{fleet}[community]\nenabled = true\n")).unwrap().community_server().unwrap();
        assert_eq!((on.nats.as_str(), on.token_file.as_deref()), ("nats://f:1", Some(Path::new("/t"))));
        let own = parse(&format!("{fleet}[community]\nenabled = true\nnats = \"nats://c:2\"\n")).unwrap();
        let own = own.community_server().unwrap();
        assert_eq!((own.nats.as_str(), own.token_file), ("nats://c:2", None), "its own server, its own auth");
        let err = parse("[community]\nenabled = true\n").unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("needs a server"), "{err}");
    }

    #[test]
    fn no_file_means_the_reference_layout() {
        let names: Vec<String> = Config::default().sources().iter().map(|s| s.name().to_owned()).collect();
        assert_eq!(names, ["bots", "messages", "events", "runtime"]);
    }

    #[test]
    fn a_full_file_builds_every_source() {
        let text = r#"
            [sources.messages]
            file = "chat.db"
            [sources.runtime]
            enabled = false
            [sources.events]
            dir = "logs"
            pattern = "*.jsonl"
            [[sources.directory]]
            name = "inbox"
            path = "/srv/inbox"
            [[sources.digest]]
            name = "precedents"
            path = "council/index.jsonl"
            [[sources.http]]
            name = "queue"
            url = "http://127.0.0.1:9/metrics"
            [[sources.sqlite]]
            name = "outbox"
            file = "outbox.db"
            query = "SELECT id, status FROM outbox WHERE id > :cursor ORDER BY id"
            cursor = "id"
            columns = { id = "int" }
            [detectors.cost]
            cost = 7.5
        "#;
        let c = Config::parse(text, Path::new("t.toml")).unwrap();
        let names: Vec<String> = c.sources().iter().map(|s| s.name().to_owned()).collect();
        assert_eq!(names, ["bots", "messages", "events", "inbox", "precedents", "queue", "outbox"]);
        assert_eq!(c.detector_values(), vec![("cost".into(), "cost".into(), ConfigValue::Float(7.5))]);
    }

    #[test]
    fn mistakes_are_named_with_the_file() {
        let bad = [
            ("[sources.mesages]\nfile = \"x\"", "mesages"),
            ("[[sources.sqlite]]\nname = \"q\"\nfile = \"a.db\"\nquery = \"DELETE FROM t\"", "must be a SELECT"),
            ("[[sources.http]]\nname = \"h\"\nurl = \"https://x\"", "http://"),
            ("[[sources.digest]]\nname = \"messages\"\npath = \"x\"", "used twice"),
            ("[sources\n", "t.toml"),
        ];
        for (text, needle) in bad {
            let err = Config::parse(text, Path::new("t.toml")).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains("t.toml"), "{err}");
        }
    }

    #[test]
    fn only_a_parse_error_keeps_its_lines() {
        // The parser's diagram: the quoted line and its caret, on lines of their own.
        let parse = Config::parse("[fleet\n", Path::new("t.toml")).unwrap_err();
        assert!(parse.keeps_its_lines() && parse.to_string().contains("1 | [fleet\n"), "{parse}");
        let invalid = Config::parse("[[sources.http]]\nname = \"h\"\nurl = \"https://x\"", Path::new("t.toml"));
        assert!(!invalid.unwrap_err().keeps_its_lines());
    }

    #[test]
    fn the_key_file_is_taken_from_the_config_files_folder_and_set_in_one_file_only() {
        let c = Config::parse("[fire_log]\nkey_file = \"keys/k.ed25519\"\n", Path::new("/etc/s/c.toml")).unwrap();
        assert_eq!(c.key_file(), Some(PathBuf::from("/etc/s/keys/k.ed25519")));
        let absolute = Config::parse("[fire_log]\nkey_file = \"/k.ed25519\"\n", Path::new("/etc/s/c.toml")).unwrap();
        assert_eq!(absolute.key_file(), Some(PathBuf::from("/k.ed25519")));
        assert_eq!(Config::default().key_file(), None);
        assert!(Config::parse("[fire_log]\nkey = \"x\"\n", Path::new("t.toml")).is_err(), "unknown keys are errors");
        let tmp = tempfile::tempdir().unwrap();
        let (toml, yaml) = (tmp.path().join("c.toml"), tmp.path().join("s.yaml"));
        std::fs::write(&toml, "[fire_log]\nkey_file = \"k.ed25519\"\n").unwrap();
        std::fs::write(&yaml, "fire_log:\n  key_file: /other.ed25519\n").unwrap();
        let err = Config::load_with(Some(&toml), Some(&yaml)).unwrap_err().to_string();
        assert!(err.contains("fire_log") && err.contains("one file"), "{err}");
    }

    #[test]
    fn limits_in_the_file_override_the_defaults_key_by_key() {
        let c = Config::parse("[limits]\nmemory_mib = 32\ndeadline_ms = 50\n", Path::new("t.toml")).unwrap();
        let l = c.limits.apply(crate::runtime::Limits::default());
        assert_eq!((l.memory_bytes, l.deadline), (32 << 20, Duration::from_millis(50)));
        assert_eq!(l.fuel_per_call, crate::runtime::Limits::default().fuel_per_call);
        assert!(Config::parse("[limits]\nmemory = 1\n", Path::new("t.toml")).is_err(), "unknown keys are errors");
    }

    const YAML: &str = r#"
sources:
  directory:
    - name: gw-inbox
      path: inbox
  http:
    - name: gw-queue
      url: http://127.0.0.1:9/metrics
      jsonpath: $.active_total
sentinels:
  file-inbox-watch:
    roles:
      inbox: gw-inbox
  queue-depth-watch:
    roles:
      queue: gw-queue
    values:
      threshold: 25
  anomaly-watch:
    enabled: false
"#;

    #[test]
    fn the_sentinels_yaml_binds_roles_to_configured_sources() {
        let c = Config::parse_yaml(YAML, Path::new("s.yaml")).unwrap();
        let names: Vec<String> = c.sources().iter().map(|s| s.name().to_owned()).collect();
        assert_eq!(names, ["bots", "messages", "events", "runtime", "inbox", "queue"], "each read once, as its role");
        assert!(c.detector_values().contains(&(
            "queue_depth_watch".into(),
            "threshold".into(),
            ConfigValue::Integer(25)
        )));
        assert_eq!(c.sentinel_off("file_inbox_watch"), None);
        assert!(c.sentinel_off("anomaly_watch").unwrap().contains("enabled: false"));
        assert_eq!(c.sentinel_off("ledger_delta_watch"), None, "not in the file: inert, not off");
        assert!(!c.health_bound());
        assert_eq!(c.fast_dirs(), [PathBuf::from("inbox")]);
        let c = Config::parse_yaml("sentinels:\n  watch-health-watch: {}\n", Path::new("s.yaml")).unwrap();
        assert!(c.health_bound());
    }

    #[test]
    fn yaml_mistakes_name_the_key_and_the_line() {
        let bad = [
            ("sentinels:\n  file-inbox-watch:\n    enabeld: true\n", "line 3", "enabeld"),
            ("sentinels:\n  nosuch-watch: {}\n", "line 2", "not a stock sentinel"),
            (
                "sources:\n  directory:\n    - name: a\n      path: x\nsentinels:\n  file-inbox-watch:\n    roles:\n      outbox: a\n",
                "line 8",
                "has no role `outbox`",
            ),
            (
                "sentinels:\n  file-inbox-watch:\n    roles:\n      inbox: nowhere\n",
                "line 4",
                "no source named `nowhere`",
            ),
            (
                "sources:\n  digest:\n    - name: d\n      path: x\nsentinels:\n  file-inbox-watch:\n    roles:\n      inbox: d\n",
                "line 8",
                "the role takes sources.directory",
            ),
            (
                "sources:\n  http:\n    - name: q\n      url: http://127.0.0.1:9/\n      jsonpath: $.[oops\n",
                "line 5",
                "RFC 9535",
            ),
            (
                "sources:\n  http:\n    - name: q\n      url: http://127.0.0.1:9/\nsentinels:\n  queue-depth-watch:\n    roles:\n      queue: q\n",
                "line 8",
                "needs a `jsonpath`",
            ),
            (
                "sentinels:\n  silence-watch:\n    values:\n      threshold_hours: [1]\n",
                "line 4",
                "sentinels.silence-watch.values.threshold_hours",
            ),
            ("sentinels: [\n", "line", "s.yaml"),
        ];
        for (text, line, needle) in bad {
            let err = Config::parse_yaml(text, Path::new("s.yaml")).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains(line) && err.contains("s.yaml"), "{needle}: {err}");
        }
    }

    #[test]
    fn the_toml_file_and_the_sentinels_file_merge_and_a_section_in_both_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let toml_path = dir.path().join("config.toml");
        let yaml_path = dir.path().join("sentinels.yaml");
        std::fs::write(&toml_path, "[[sources.directory]]\nname = \"gw-inbox\"\npath = \"inbox\"\n").unwrap();
        std::fs::write(&yaml_path, "sentinels:\n  file-inbox-watch:\n    roles:\n      inbox: gw-inbox\n").unwrap();
        let c = Config::load_with(Some(&toml_path), Some(&yaml_path)).unwrap();
        assert!(c.sources().iter().any(|s| s.name() == "inbox"), "bound across the two files");
        std::fs::write(&toml_path, "[limits]\nmemory_mib = 32\n").unwrap();
        std::fs::write(&yaml_path, "limits:\n  memory_mib: 64\n").unwrap();
        let err = Config::load_with(Some(&toml_path), Some(&yaml_path)).unwrap_err().to_string();
        assert!(err.contains("`limits` is set both"), "{err}");
        let missing = dir.path().join("nope.yaml");
        let err = Config::load_with(Some(&toml_path), Some(&missing)).unwrap_err().to_string();
        assert!(err.contains("nope.yaml"), "an explicit path that is not there is an error: {err}");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms"), Some(250));
        assert_eq!(parse_duration("5m"), Some(300_000));
        assert_eq!(parse_duration("5 parsecs"), None);
    }

    #[test]
    fn an_overflowing_duration_or_limit_is_refused_or_saturated_not_wrapped() {
        assert_eq!(parse_duration("99999999999999999h"), None);
        let c = Config::parse("[limits]\nmemory_mib = 9007199254740993\n", Path::new("t.toml")).unwrap();
        assert_eq!(c.limits.apply(crate::runtime::Limits::default()).memory_bytes, usize::MAX);
    }

    /// Text that looks like a config file: known tables and keys, values of
    /// every TOML type, and junk, in any order.
    fn config_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let table = prop_oneof![
            Just("[limits]"),
            Just("[sources.messages]"),
            Just("[sources.events]"),
            Just("[[sources.sqlite]]"),
            Just("[[sources.http]]"),
            Just("[[sources.digest]]"),
            Just("[detectors.cost]"),
            Just("[sources"),
        ];
        let key = prop_oneof![
            Just("memory_mib"),
            Just("deadline_ms"),
            Just("fuel_per_call"),
            Just("wasm_stack_kib"),
            Just("component_mib"),
            Just("file"),
            Just("name"),
            Just("path"),
            Just("query"),
            Just("cursor"),
            Just("url"),
            Just("enabled"),
            Just("cost"),
            Just("interval"),
            Just("timeout"),
        ];
        let value = prop_oneof![
            any::<u64>().prop_map(|n| n.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| format!("{f:?}")),
            "[a-z0-9 .:/*%]{0,12}".prop_map(|s| format!("{s:?}")),
            "[0-9]{1,22}(ms|s|m|h| parsecs)".prop_map(|s| format!("{s:?}")),
            Just("true".to_owned()),
            Just("{ id = \"int\" }".to_owned()),
            Just("\"SELECT id FROM t WHERE id > :cursor\"".to_owned()),
        ];
        let line = prop_oneof![
            table.prop_map(str::to_owned),
            (key, value).prop_map(|(k, v)| format!("{k} = {v}")),
            "[^\n]{0,20}",
        ];
        proptest::collection::vec(line, 0..16).prop_map(|lines| lines.join("\n"))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        /// Whatever the file holds, parsing ends in a config or an error
        /// naming the file, and a parsed config builds its sources and limits.
        #[test]
        fn any_config_text_parses_or_is_refused_by_name(text in config_text()) {
            match Config::parse(&text, Path::new("p.toml")) {
                Ok(c) => {
                    let _ = c.sources();
                    let _ = c.limits.apply(crate::runtime::Limits::default());
                    let _ = c.detector_values();
                }
                Err(e) => proptest::prop_assert!(e.to_string().contains("p.toml"), "{}", e),
            }
        }

        #[test]
        fn any_duration_text_parses_or_is_refused(s in "\\PC{0,24}") {
            let _ = parse_duration(&s);
        }
    }
}

/// `[report]`: the daily friction digest (docs/cli.md, `report`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReportConfig {
    /// The local hour (0–23) at which a day's digest is due: the first scan
    /// at or after it writes the digest of everything since the last one;
    /// no daily digest when absent.
    #[serde(default)]
    pub daily_at_hour: Option<u8>,
    /// How many of the costliest issues the digest lists.
    #[serde(default = "ReportConfig::default_top")]
    pub top: usize,
    /// A `threshold` fire when an issue has this many occurrences in the window.
    #[serde(default)]
    pub threshold_count: Option<i64>,
    /// A `threshold` fire when an issue has this many wasted turns in the window.
    #[serde(default)]
    pub threshold_wasted_turns: Option<i64>,
    /// The threshold's rolling window, in whole hours (`"1h"` to `"168h"`).
    #[serde(default = "ReportConfig::default_window")]
    pub threshold_window: String,
}

impl ReportConfig {
    fn default_top() -> usize {
        10
    }
    fn default_window() -> String {
        "1h".into()
    }
}

/// `[fleet]`: where the shipper sends the fire log, and the limits of the
/// streams it creates (docs/fleet.md).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    /// `nats://HOST:PORT`.
    pub nats: String,
    /// A file holding the NATS auth token (never the token in the config).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// `SENTINEL_FIRES`' duplicate window, seconds (120 when left out).
    /// Each of the three limits, when set, is also what an existing stream
    /// must give at least (docs/fleet.md); left out, the stream's is taken.
    #[serde(default)]
    pub duplicate_window_secs: Option<u64>,
    /// `SENTINEL_FIRES`' `max_age`, seconds (0: kept for ever, the default).
    #[serde(default)]
    pub max_age_secs: Option<u64>,
    /// `SENTINEL_FIRES`' `max_bytes` (-1: no limit, the default); full, it
    /// refuses (`discard: new`).
    #[serde(default)]
    pub max_bytes: Option<i64>,
    /// Publishes awaiting their ack at most.
    #[serde(default = "FleetConfig::default_in_flight")]
    pub in_flight: usize,
    /// How long `run --once` waits for the shipper after its scan, seconds.
    #[serde(default = "FleetConfig::default_once_budget")]
    pub once_budget_secs: u64,
}

impl FleetConfig {
    /// The defaults, at `nats` (`verify --witness`, which only reads).
    pub fn at(nats: impl Into<String>, token_file: Option<PathBuf>) -> Self {
        FleetConfig {
            nats: nats.into(),
            token_file,
            duplicate_window_secs: None,
            max_age_secs: None,
            max_bytes: None,
            in_flight: Self::default_in_flight(),
            once_budget_secs: Self::default_once_budget(),
        }
    }
    /// The duplicate window a new `SENTINEL_FIRES` gets, seconds.
    pub const DEFAULT_DUPLICATE_WINDOW: u64 = 120;
    fn default_in_flight() -> usize {
        1
    }
    fn default_once_budget() -> u64 {
        10
    }
}

/// `[community]`: the opt-in community counts (docs/community.md).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CommunityConfig {
    /// Off unless `true`: nothing is sent, `community preview` still shows
    /// what would be.
    #[serde(default)]
    pub enabled: bool,
    /// `nats://HOST:PORT` [default: `[fleet] nats`].
    #[serde(default)]
    pub nats: Option<String>,
    /// The NATS auth token's file for `nats` [default: `[fleet] token_file`
    /// when `nats` is not given].
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// How long `run --once` waits for the counts to be put, seconds.
    #[serde(default = "CommunityConfig::default_once_budget")]
    pub once_budget_secs: u64,
}

impl CommunityConfig {
    fn default_once_budget() -> u64 {
        10
    }
}

impl Config {
    /// Where the community counts go when `[community] enabled = true`: its
    /// own `nats` (with its own `token_file`), else the fleet's server and
    /// token. `None`: disabled, or no server (refused by the config check).
    pub fn community_server(&self) -> Option<FleetConfig> {
        let c = self.community.as_ref().filter(|c| c.enabled)?;
        let mut server = match (&c.nats, &self.fleet) {
            (Some(url), _) => FleetConfig::at(url.as_str(), c.token_file.clone()),
            (None, Some(fleet)) => FleetConfig::at(fleet.nats.as_str(), fleet.token_file.clone()),
            (None, None) => return None,
        };
        server.once_budget_secs = c.once_budget_secs;
        Some(server)
    }
}
