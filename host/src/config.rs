//! The config file: where each source's data lives and detector settings.
//!
//! One TOML file, `--config FILE` or else
//! `$XDG_CONFIG_HOME/openmausbot-sentinel/config.toml` when it exists; with
//! no file at all the defaults read the reference data-dir layout. This module
//! parses and checks the file and builds the sources it describes; it never
//! reads the data dir itself. Its format is documented in `docs/config.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::observation::ConfigValue;
use crate::sources::query::{QuerySource, parse_column_type};
use crate::sources::{
    BotsSource, DigestSource, DirectorySource, EventsSource, HttpSource, MessagesSource, RuntimeSource, Source,
};

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
    pub directory: Vec<NamedPath>,
    #[serde(default)]
    pub digest: Vec<NamedPath>,
    #[serde(default)]
    pub http: Vec<HttpConfig>,
    #[serde(default)]
    pub sqlite: Vec<QueryConfig>,
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    pub name: String,
    pub url: String,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
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

/// The default location, when it exists.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    let path = base.join(crate::ledger::out_dir::APP_DIR).join("config.toml");
    path.is_file().then_some(path)
}

impl Config {
    /// Loads `path`, or the default file when there is one, or the defaults.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(path) = path.map(Path::to_owned).or_else(default_path) else {
            return Ok(Config::default());
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
        Self::parse(&text, &path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut config: Config =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
        config.path = Some(path.to_owned());
        config.digest = {
            use sha2::{Digest, Sha256};
            crate::hex(&Sha256::digest(text.as_bytes())[..8])
        };
        config.check()?;
        Ok(config)
    }

    fn invalid(&self, message: String) -> ConfigError {
        ConfigError::Invalid { path: self.path.clone().unwrap_or_default(), message }
    }

    fn check(&self) -> Result<(), ConfigError> {
        let mut names: Vec<&str> = vec!["messages", "runtime", "bots", "events"];
        let s = &self.sources;
        let extra = s
            .directory
            .iter()
            .map(|d| d.name.as_str())
            .chain(s.digest.iter().map(|d| d.name.as_str()))
            .chain(s.http.iter().map(|h| h.name.as_str()))
            .chain(s.sqlite.iter().map(|q| q.name.as_str()));
        for name in extra {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(self.invalid(format!("source name `{name}` must be letters, digits, `_` or `-`")));
            }
            if names.contains(&name) {
                return Err(self.invalid(format!("source name `{name}` is used twice")));
            }
            names.push(name);
        }
        for q in &s.sqlite {
            let lower = q.query.trim_start().to_ascii_lowercase();
            if !(lower.starts_with("select") || lower.starts_with("with")) {
                return Err(self.invalid(format!("sources.sqlite `{}`: the query must be a SELECT", q.name)));
            }
            if q.cursor.is_some() && !q.query.contains(":cursor") {
                return Err(self.invalid(format!(
                    "sources.sqlite `{}`: a `cursor` column needs `:cursor` in the query (WHERE col > :cursor)",
                    q.name
                )));
            }
            for (col, ty) in &q.columns {
                if parse_column_type(ty).is_none() {
                    return Err(self.invalid(format!(
                        "sources.sqlite `{}`: column `{col}` has type `{ty}`; use text, int, float or boolean",
                        q.name
                    )));
                }
            }
        }
        for h in &s.http {
            if !h.url.starts_with("http://") {
                return Err(self.invalid(format!("sources.http `{}`: only plain http:// URLs can be fetched", h.name)));
            }
        }
        for (det, keys) in &self.detectors {
            for (key, value) in keys {
                if to_config_value(value).is_none() {
                    return Err(self.invalid(format!(
                        "detectors.{det}.{key}: use a boolean, number, string or duration string like \"30s\""
                    )));
                }
            }
        }
        Ok(())
    }

    /// The sources this config describes, in the host's fixed order:
    /// reference data first, then the reference layout, then the others.
    pub fn sources(&self) -> Vec<Box<dyn Source>> {
        let s = &self.sources;
        let mut out: Vec<Box<dyn Source>> = Vec::new();
        let on = |f: &Option<FileConfig>| f.as_ref().is_none_or(|f| f.enabled);
        let file = |f: &Option<FileConfig>, default: &str| {
            f.as_ref().and_then(|f| f.file.clone()).unwrap_or_else(|| default.to_owned())
        };
        if on(&s.bots) {
            out.push(Box::new(BotsSource { file: file(&s.bots, "bots.json") }));
        }
        if on(&s.messages) {
            out.push(Box::new(MessagesSource { file: file(&s.messages, "messages.db") }));
        }
        if s.events.as_ref().is_none_or(|e| e.enabled) {
            let mut events = EventsSource::default();
            if let Some(e) = &s.events {
                if let Some(dir) = &e.dir {
                    events.dir = PathBuf::from(dir);
                }
                if let Some(p) = &e.pattern {
                    events.pattern = p.clone();
                }
                if let Some(m) = e.max_line_bytes {
                    events.max_line_bytes = m;
                }
            }
            out.push(Box::new(events));
        }
        if on(&s.runtime) {
            out.push(Box::new(RuntimeSource { file: file(&s.runtime, "runtime.db") }));
        }
        for d in &s.directory {
            out.push(Box::new(DirectorySource { name: d.name.clone(), path: PathBuf::from(&d.path) }));
        }
        for d in &s.digest {
            out.push(Box::new(DigestSource { name: d.name.clone(), path: PathBuf::from(&d.path) }));
        }
        for h in &s.http {
            out.push(Box::new(HttpSource {
                name: h.name.clone(),
                url: h.url.clone(),
                timeout: Duration::from_millis(h.timeout_ms),
                max_bytes: h.max_bytes,
            }));
        }
        for q in &s.sqlite {
            out.push(Box::new(QuerySource {
                name: q.name.clone(),
                file: PathBuf::from(&q.file),
                kind: q.kind.clone(),
                query: q.query.clone(),
                cursor: q.cursor.clone(),
                columns: q.columns.iter().filter_map(|(k, v)| Some((k.clone(), parse_column_type(v)?))).collect(),
                max_rows: q.max_rows,
            }));
        }
        out
    }

    /// `[detectors.NAME]` values as `(detector, key, value)`.
    pub fn detector_values(&self) -> Vec<(String, String, ConfigValue)> {
        let mut out = Vec::new();
        for (det, keys) in &self.detectors {
            for (key, value) in keys {
                if let Some(v) = to_config_value(value) {
                    out.push((det.clone(), key.clone(), v));
                }
            }
        }
        out
    }
}

fn to_config_value(v: &toml::Value) -> Option<ConfigValue> {
    Some(match v {
        toml::Value::Boolean(b) => ConfigValue::Boolean(*b),
        toml::Value::Integer(i) => ConfigValue::Integer(*i),
        toml::Value::Float(f) => ConfigValue::Float(*f),
        toml::Value::String(s) => ConfigValue::Text(s.clone()),
        _ => return None,
    })
}

/// `250ms`, `30s`, `5m`, `2h` as milliseconds.
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
        _ => return None,
    };
    // Too large to be a duration in ms: not a duration.
    n.checked_mul(unit_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn limits_in_the_file_override_the_defaults_key_by_key() {
        let c = Config::parse("[limits]\nmemory_mib = 32\ndeadline_ms = 50\n", Path::new("t.toml")).unwrap();
        let l = c.limits.apply(crate::runtime::Limits::default());
        assert_eq!((l.memory_bytes, l.deadline), (32 << 20, Duration::from_millis(50)));
        assert_eq!(l.fuel_per_call, crate::runtime::Limits::default().fuel_per_call);
        assert!(Config::parse("[limits]\nmemory = 1\n", Path::new("t.toml")).is_err(), "unknown keys are errors");
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
