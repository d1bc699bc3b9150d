//! Sources: the application's data, read strictly read-only, as batches.
//!
//! A source knows one kind of file in the data dir (a SQLite database, a JSON
//! file, ...), reads it without ever writing, creating or locking anything
//! there, and streams what it finds as bounded [`Batch`]es. It may keep a
//! cursor (an opaque string the ledger persists) so the next scan reads only
//! what is new. A missing file is reported, never fatal; a broken row is
//! skipped and counted. Sources know nothing of detectors.
//!
//! The folder follows the kind of file read: [`files`] (JSON, NDJSON,
//! folders, the entries that may be opened at all), [`sqlite`] (hardened
//! read-only handles, `messages.db`, `runtime.db`'s queue, configured
//! queries), [`http`] (a local JSON endpoint) and [`health`] (the host's own
//! record of its detectors, for watch-health-watch); `build` makes the
//! configured sources from a [`Config`](crate::config::Config).

mod build;
pub mod files;
pub mod health;
pub mod http;
pub mod sqlite;

use std::path::{Path, PathBuf};

pub use files::bots::BotsSource;
pub use files::digest::DigestSource;
pub use files::directory::DirectorySource;
pub use files::events::EventsSource;
pub use health::HealthSource;
pub use http::HttpSource;
pub use sqlite::messages::MessagesSource;
pub use sqlite::query::QuerySource;
pub use sqlite::queue::QueueSource;

use crate::model::record::Batch;

/// What a source needs to know for one read.
#[derive(Debug, Clone)]
pub struct ReadContext<'a> {
    pub data_dir: &'a Path,
    pub scan_time_ms: i64,
    /// Rows per batch, at most.
    pub batch_rows: usize,
    /// The cursor this source returned last time, if any.
    pub cursor: Option<&'a str>,
}

/// How a read went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceReport {
    pub records: u64,
    /// Rows that could not be read (counted, never fatal).
    pub skipped: u64,
    /// The file this source expected was not there.
    pub missing: bool,
    /// The cursor to store for the next scan.
    pub cursor: Option<String>,
    /// When each piece of work still waiting was queued (queue sources), ms.
    pub open_since: Vec<i64>,
    /// Entries passed over that the operator should hear of (a FIFO or a
    /// symbolic link where a file was expected), one line each, unsanitized.
    pub warnings: Vec<String>,
}

impl SourceReport {
    /// The file or folder a source reads is not there: nothing read, and the
    /// cursor kept for when it comes back.
    pub fn missing(ctx: &ReadContext<'_>) -> Self {
        SourceReport { missing: true, cursor: ctx.cursor.map(str::to_owned), ..SourceReport::default() }
    }
}

/// A source that could not be read at all. The scan goes on without it.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("source {source_name}: cannot open {path}")]
    Open {
        source_name: String,
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("source {source_name}: cannot read {path}")]
    Read {
        source_name: String,
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("source {source_name}: the receiver stopped the read: {reason}")]
    Stopped { source_name: String, reason: String },
}

/// Where batches go. Returning an error stops the read.
pub type Sink<'s> = dyn FnMut(Batch) -> Result<(), String> + 's;

/// One source of records. Sources are read on a thread of their own while
/// detectors run, so a source must be `Send + Sync`.
pub trait Source: Send + Sync {
    /// The name detectors subscribe to, such as `messages`.
    fn name(&self) -> &str;
    /// The record kinds it produces.
    fn kinds(&self) -> &'static [&'static str];
    /// Reference sources are read before all others.
    fn is_reference(&self) -> bool {
        false
    }
    /// The files whose size and modification time tell whether this source
    /// can have anything new (the unchanged-data fast path). `None` means it
    /// cannot tell (an HTTP endpoint), so every run reads it.
    fn watch(&self, data_dir: &Path) -> Option<Vec<PathBuf>> {
        let _ = data_dir;
        None
    }
    /// The columns whose value an observation's evidence reference names
    /// a record of this source by, most telling first (`id` unless the
    /// source says otherwise): how a fixed issue's record is found again.
    fn evidence_columns(&self) -> &'static [&'static str] {
        &["id"]
    }
    /// Streams every batch to `sink`.
    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError>;
}

/// The sources of the reference data-dir layout, in the host's fixed order:
/// reference data first.
pub fn default_sources() -> Vec<Box<dyn Source>> {
    vec![
        Box::new(BotsSource::default()),
        Box::new(MessagesSource::default()),
        Box::new(EventsSource::default()),
        Box::new(QueueSource::default()),
    ]
}
