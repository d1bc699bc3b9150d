//! Loading the config: finding the files, parsing them into one schema,
//! merging them and checking what they say.
//!
//! It owns where the files are looked for (`--config`, the default TOML path,
//! `SENTINELS_CONFIG_PATH` and its default), parsing TOML and YAML into the
//! same [`Config`], the merge (a section in both files is an error naming it)
//! and every check, each error naming the file, and the key's line where it
//! can. It never builds a source and never reads the data dir.

use std::path::{Path, PathBuf};

use super::{Config, ConfigError, LimitsConfig, QueryConfig, parse_duration, to_config_value};
use crate::model::record::parse_column_type;

/// The variable naming the sentinels file.
pub const SENTINELS_ENV: &str = "SENTINELS_CONFIG_PATH";
/// Where the sentinels file is looked for when the variable is not set.
pub const SENTINELS_DEFAULT: &str = "/etc/gateway/sentinels.yaml";

/// The sentinels file: the variable's path (which must then exist), else the
/// default path when a file is there.
pub fn sentinels_path() -> Option<PathBuf> {
    match std::env::var_os(SENTINELS_ENV).filter(|v| !v.is_empty()) {
        Some(p) => Some(PathBuf::from(p)),
        None => Some(PathBuf::from(SENTINELS_DEFAULT)).filter(|p| p.is_file()),
    }
}

/// The line (from 1) where `key` is written: first as a key (`key:`,
/// `key =`, `[...key]`), else as a value, else anywhere.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let as_key = |l: &str| {
        let t = l.trim_start().trim_start_matches("- ").trim_start_matches(['"', '\'', '[']);
        t.strip_prefix(key)
            .is_some_and(|rest| rest.trim_start_matches(['"', '\'', ']']).trim_start().starts_with([':', '=']))
    };
    let as_value = |l: &str| {
        let t = l.trim_end().trim_end_matches(['"', '\'']);
        t.ends_with(key)
            && t[..t.len() - key.len()].trim_end().trim_end_matches(['"', '\'']).trim_end().ends_with([':', '='])
    };
    let find = |f: &dyn Fn(&str) -> bool| text.lines().position(f).map(|i| i + 1);
    find(&as_key).or_else(|| find(&as_value)).or_else(|| find(&|l: &str| l.contains(key)))
}

/// The default location, when it exists.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    let path = base.join(crate::base::out_dir::APP_DIR).join("config.toml");
    path.is_file().then_some(path)
}

impl Config {
    /// Loads `path`, or the default file when there is one, or the defaults;
    /// then the sentinels file ([`sentinels_path`]) when there is one.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with(path, sentinels_path().as_deref())
    }

    /// [`Config::load`] with the sentinels file given.
    pub fn load_with(path: Option<&Path>, sentinels: Option<&Path>) -> Result<Self, ConfigError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })
        };
        let toml = match path.map(Path::to_owned).or_else(default_path) {
            Some(path) => Some(Self::parse(&read(&path)?, &path)?),
            None => None,
        };
        let (yaml, yaml_text) = match sentinels {
            Some(path) => {
                let text = read(path)?;
                (Some(Self::parse_yaml_alone(&text, path)?), text)
            }
            None => (None, String::new()),
        };
        match (toml, yaml) {
            (None, None) => Ok(Config::default()),
            (Some(c), None) => Ok(c),
            (None, Some(y)) => {
                y.check_sentinels(&yaml_text)?;
                Ok(y)
            }
            (Some(t), Some(y)) => t.merge(y, &yaml_text),
        }
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Config =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
        config.finish(text, path, true)
    }

    /// The sentinels file's format: the same schema in YAML. serde_yaml_ng
    /// names the line and column of a syntax error, an unknown key or a
    /// value of the wrong type.
    pub fn parse_yaml(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config = Self::parse_yaml_alone(text, path)?;
        config.check_sentinels(text)?;
        Ok(config)
    }

    /// The YAML file checked except for its roles, which may name sources of
    /// the TOML file (checked once both are merged).
    fn parse_yaml_alone(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Config = if text.trim().is_empty() {
            Config::default()
        } else {
            serde_yaml_ng::from_str(text)
                .map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?
        };
        config.finish(text, path, false)
    }

    fn finish(mut self, text: &str, path: &Path, roles: bool) -> Result<Self, ConfigError> {
        self.path = Some(path.to_owned());
        self.digest = {
            use sha2::{Digest, Sha256};
            crate::base::hex(&Sha256::digest(text.as_bytes())[..8])
        };
        self.check(text)?;
        if roles {
            self.check_sentinels(text)?;
        }
        Ok(self)
    }

    /// The TOML file's settings and the sentinels file's, together. A
    /// reference-layout source, `[limits]`, or one detector's or sentinel's
    /// table set in both is an error naming both files.
    fn merge(mut self, other: Config, other_text: &str) -> Result<Self, ConfigError> {
        let both = |what: &str| ConfigError::Invalid {
            path: other.path.clone().unwrap_or_default(),
            message: format!(
                "`{what}` is set both here and in {}; set it in one file",
                self.path.as_deref().unwrap_or(Path::new("?")).display()
            ),
        };
        let (a, b) = (&mut self.sources, other.sources);
        for (mine, theirs, name) in [
            (&mut a.messages, b.messages, "sources.messages"),
            (&mut a.runtime, b.runtime, "sources.runtime"),
            (&mut a.bots, b.bots, "sources.bots"),
        ] {
            if theirs.is_some() {
                if mine.is_some() {
                    return Err(both(name));
                }
                *mine = theirs;
            }
        }
        if b.events.is_some() {
            if a.events.is_some() {
                return Err(both("sources.events"));
            }
            a.events = b.events;
        }
        a.directory.extend(b.directory);
        a.digest.extend(b.digest);
        a.http.extend(b.http);
        a.sqlite.extend(b.sqlite);
        for (k, v) in other.detectors {
            if self.detectors.insert(k.clone(), v).is_some() {
                return Err(both(&format!("detectors.{k}")));
            }
        }
        for (k, v) in other.sentinels {
            if self.sentinels.insert(k.clone(), v).is_some() {
                return Err(both(&format!("sentinels.{k}")));
            }
        }
        if format!("{:?}", other.limits) != format!("{:?}", LimitsConfig::default()) {
            if format!("{:?}", self.limits) != format!("{:?}", LimitsConfig::default()) {
                return Err(both("limits"));
            }
            self.limits = other.limits;
        }
        if other.fire_log.is_some() {
            if self.fire_log.is_some() {
                return Err(both("fire_log"));
            }
            self.fire_log = other.fire_log;
        }
        if other.community.is_some() {
            if self.community.is_some() {
                return Err(both("community"));
            }
            self.community = other.community;
        }
        self.digest = format!("{}+{}", self.digest, other.digest);
        let toml_path = std::mem::replace(&mut self.path, other.path.clone());
        // Names across both files, and the roles with the sentinels file's lines.
        self.check("")?;
        self.check_sentinels(other_text)?;
        self.path = toml_path;
        Ok(self)
    }

    pub(crate) fn invalid(&self, message: String) -> ConfigError {
        ConfigError::Invalid { path: self.path.clone().unwrap_or_default(), message }
    }

    /// An error about `key`, with the line of `text` that mentions it.
    pub(crate) fn invalid_at(&self, text: &str, key: &str, message: String) -> ConfigError {
        match line_of(text, key) {
            Some(line) => self.invalid(format!("line {line}: {message}")),
            None => self.invalid(message),
        }
    }

    fn check(&self, text: &str) -> Result<(), ConfigError> {
        self.check_report(text)?;
        if let Some(c) = self.community.as_ref().filter(|c| c.enabled)
            && c.nats.is_none()
            && self.fleet.is_none()
        {
            let message = "community.enabled needs a server: `[community] nats` or `[fleet] nats`".to_owned();
            return Err(self.invalid_at(text, "enabled", message));
        }
        self.check_source_names()?;
        let s = &self.sources;
        for d in &s.directory {
            if d.settle.as_deref().is_some_and(|t| parse_duration(t).is_none()) {
                let message = format!("sources.directory `{}`: `settle` is a duration like \"500ms\"", d.name);
                return Err(self.invalid_at(text, "settle", message));
            }
        }
        for q in &s.sqlite {
            self.check_sqlite(text, q)?;
        }
        for h in &s.http {
            if !h.url.starts_with("http://") {
                return Err(self.invalid(format!("sources.http `{}`: only plain http:// URLs can be fetched", h.name)));
            }
            if let Some(path) = &h.jsonpath
                && let Err(e) = serde_json_path::JsonPath::parse(path)
            {
                return Err(self.invalid_at(
                    text,
                    path,
                    format!("sources.http `{}`: jsonpath `{path}` is not an RFC 9535 JSONPath: {e}", h.name),
                ));
            }
        }
        self.check_values(text)
    }

    /// `[report]`: the digest's hour and the threshold rule.
    fn check_report(&self, text: &str) -> Result<(), ConfigError> {
        let Some(r) = &self.report else { return Ok(()) };
        if let Some(hour) = r.daily_at_hour.filter(|h| *h > 23) {
            let message = format!("report.daily_at_hour is {hour}: an hour of the day, 0 to 23");
            return Err(self.invalid_at(text, "daily_at_hour", message));
        }
        let window = parse_duration(&r.threshold_window);
        if !window.is_some_and(|ms| ms % 3_600_000 == 0 && (3_600_000..=168 * 3_600_000).contains(&ms)) {
            let message = format!("report.threshold_window is `{}`: whole hours, 1h to 168h", r.threshold_window);
            return Err(self.invalid_at(text, "threshold_window", message));
        }
        if [r.threshold_count, r.threshold_wasted_turns].iter().flatten().any(|n| *n < 1) {
            let message = "report.threshold_count and threshold_wasted_turns are at least 1".to_owned();
            return Err(self.invalid_at(text, "threshold_", message));
        }
        Ok(())
    }

    /// Source names: letters, digits, `_` or `-`, each used once.
    fn check_source_names(&self) -> Result<(), ConfigError> {
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
        Ok(())
    }

    /// One `[[sources.sqlite]]`: a SELECT, its cursor and reread, its column types.
    fn check_sqlite(&self, text: &str, q: &QueryConfig) -> Result<(), ConfigError> {
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
        if let Some(reread) = &q.reread {
            let problem = if q.cursor.is_none() {
                Some("`reread` moves a cursor back: it needs a `cursor` column (a change time in ms)")
            } else if parse_duration(reread).is_none() {
                Some("`reread` is a duration like \"10m\"")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(self.invalid_at(text, "reread", format!("sources.sqlite `{}`: {problem}", q.name)));
            }
        }
        for (col, ty) in &q.columns {
            if parse_column_type(ty).is_none() {
                return Err(self.invalid(format!(
                    "sources.sqlite `{}`: column `{col}` has type `{ty}`; use text, int, float or boolean",
                    q.name
                )));
            }
        }
        Ok(())
    }

    /// `[detectors.*]` and `[sentinels.*.values]`: values a detector can take.
    fn check_values(&self, text: &str) -> Result<(), ConfigError> {
        let detectors = self.detectors.iter().map(|(n, c)| (format!("detectors.{n}"), c));
        let sentinels = self.sentinels.iter().map(|(n, c)| (format!("sentinels.{n}.values"), &c.values));
        for (table, keys) in detectors.chain(sentinels) {
            for (key, value) in keys {
                if to_config_value(value).is_none() {
                    return Err(self.invalid_at(
                        text,
                        key,
                        format!("{table}.{key}: use a boolean, number, string or duration string like \"30s\""),
                    ));
                }
            }
        }
        Ok(())
    }
}
