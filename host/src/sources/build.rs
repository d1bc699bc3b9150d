//! Building the sources a [`Config`] describes.
//!
//! It owns the host's fixed order (reference data first, then the reference
//! layout, then the configured sources) and reading a source bound to a
//! role under the role's name, once per role. It never opens a source (the
//! scan reads them) and never checks the config (it was checked when read).

use std::path::PathBuf;
use std::time::Duration;

use super::{
    BotsSource, DigestSource, DirectorySource, EventsSource, HttpSource, MessagesSource, QuerySource, QueueSource,
    Source,
};
use crate::config::{Config, DirectoryConfig, EventsConfig, FileConfig, HttpConfig, QueryConfig, parse_duration};
use crate::model::record::parse_column_type;

impl Config {
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
            out.push(Box::new(events_source(s.events.as_ref())));
        }
        if on(&s.runtime) {
            out.push(Box::new(QueueSource { file: file(&s.runtime, "runtime.db") }));
        }
        out.extend(self.configured_sources());
        out
    }

    /// The `[[sources.*]]` tables. A source bound to a role is read under
    /// the role's name (the sentinel subscribes to the role), once per role;
    /// its own name is then only the config's handle for it, so it is not
    /// read twice.
    fn configured_sources(&self) -> Vec<Box<dyn Source>> {
        let s = &self.sources;
        let bindings = self.bindings();
        let names = |name: &str| -> Vec<String> {
            let roles: Vec<String> = bindings.iter().filter(|(_, s)| *s == name).map(|(r, _)| r.clone()).collect();
            if roles.is_empty() { vec![name.to_owned()] } else { roles }
        };
        let mut out: Vec<Box<dyn Source>> = Vec::new();
        for d in &s.directory {
            out.extend(names(&d.name).into_iter().map(|n| Box::new(directory_source(n, d)) as Box<dyn Source>));
        }
        for d in &s.digest {
            for name in names(&d.name) {
                out.push(Box::new(DigestSource { name, path: PathBuf::from(&d.path) }));
            }
        }
        for h in &s.http {
            out.extend(names(&h.name).into_iter().map(|n| Box::new(http_source(n, h)) as Box<dyn Source>));
        }
        for q in &s.sqlite {
            out.extend(names(&q.name).into_iter().map(|n| Box::new(query_source(n, q)) as Box<dyn Source>));
        }
        out
    }
}

fn events_source(e: Option<&EventsConfig>) -> EventsSource {
    let mut events = EventsSource::default();
    if let Some(e) = e {
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
    events
}

fn directory_source(name: String, d: &DirectoryConfig) -> DirectorySource {
    let mut source = DirectorySource::new(name, &d.path);
    if let Some(ignore) = &d.ignore {
        source.ignore.clone_from(ignore);
    }
    source.hidden = d.hidden;
    if let Some(ms) = d.settle.as_deref().and_then(parse_duration) {
        source.settle = Duration::from_millis(ms);
    }
    source
}

fn http_source(name: String, h: &HttpConfig) -> HttpSource {
    let source = HttpSource::new(name, h.url.clone(), Duration::from_millis(h.timeout_ms), h.max_bytes);
    // Checked when the file was read.
    match h.jsonpath.as_deref().and_then(|p| serde_json_path::JsonPath::parse(p).ok()) {
        Some(path) => source.with_jsonpath(path),
        None => source,
    }
}

fn query_source(name: String, q: &QueryConfig) -> QuerySource {
    QuerySource {
        name,
        file: PathBuf::from(&q.file),
        kind: q.kind.clone(),
        query: q.query.clone(),
        cursor: q.cursor.clone(),
        reread_ms: q.reread.as_deref().and_then(parse_duration).map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
        columns: q.columns.iter().filter_map(|(k, v)| Some((k.clone(), parse_column_type(v)?))).collect(),
        max_rows: q.max_rows,
    }
}
