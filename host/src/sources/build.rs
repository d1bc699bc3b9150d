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
use crate::config::{Config, FileConfig, parse_duration};
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
            out.push(Box::new(QueueSource { file: file(&s.runtime, "runtime.db") }));
        }
        // A source bound to a role is read under the role's name (the
        // sentinel subscribes to the role), once per role; its own name is
        // then only the config's handle for it, so it is not read twice.
        let bindings = self.bindings();
        let names = |name: &str| -> Vec<String> {
            let roles: Vec<String> = bindings.iter().filter(|(_, s)| *s == name).map(|(r, _)| r.clone()).collect();
            if roles.is_empty() { vec![name.to_owned()] } else { roles }
        };
        for d in &s.directory {
            for name in names(&d.name) {
                let mut source = DirectorySource::new(name, &d.path);
                if let Some(ignore) = &d.ignore {
                    source.ignore.clone_from(ignore);
                }
                source.hidden = d.hidden;
                if let Some(ms) = d.settle.as_deref().and_then(parse_duration) {
                    source.settle = Duration::from_millis(ms);
                }
                out.push(Box::new(source));
            }
        }
        for d in &s.digest {
            for name in names(&d.name) {
                out.push(Box::new(DigestSource { name, path: PathBuf::from(&d.path) }));
            }
        }
        for h in &s.http {
            for name in names(&h.name) {
                let mut source = HttpSource::new(name, h.url.clone(), Duration::from_millis(h.timeout_ms), h.max_bytes);
                // Checked when the file was read.
                if let Some(path) = h.jsonpath.as_deref().and_then(|p| serde_json_path::JsonPath::parse(p).ok()) {
                    source = source.with_jsonpath(path);
                }
                out.push(Box::new(source));
            }
        }
        for q in &s.sqlite {
            for name in names(&q.name) {
                out.push(Box::new(QuerySource {
                    name,
                    file: PathBuf::from(&q.file),
                    kind: q.kind.clone(),
                    query: q.query.clone(),
                    cursor: q.cursor.clone(),
                    reread_ms: q
                        .reread
                        .as_deref()
                        .and_then(parse_duration)
                        .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
                    columns: q.columns.iter().filter_map(|(k, v)| Some((k.clone(), parse_column_type(v)?))).collect(),
                    max_rows: q.max_rows,
                }));
            }
        }
        out
    }
}
