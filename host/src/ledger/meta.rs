//! The store's bookkeeping between scans (the `meta` table): every key named
//! once, every value read back as the type it was written from.
//!
//! It owns [`MetaKey`] (the key's text in the store), [`MetaEntry`] (what a
//! scan commits beside its counts) and the typed reads; a value that does not
//! read back as its type is an error of the read, never passed over. It never
//! decides what is kept: the scan, the commit and the export do.

use std::borrow::Cow;

use rusqlite::{Connection, OptionalExtension, params};

/// A bookkeeping key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaKey {
    /// The fast path's digest of everything a scan reads (text).
    FastStamp,
    /// When queued work or a cadence next wakes a scan, ms.
    NextWake,
    /// The last committed scan's time, ms.
    LastScan,
    /// Set in a commit, cleared once `issues.jsonl` is written.
    ExportPending,
    /// Fire log segments exported closed (a count).
    FiresClosed,
    /// The fire log head this ledger last signed (JSON).
    FiresHead,
    /// What the fire log's files looked like after this ledger's export (text).
    FiresFiles,
    /// A detector's last run, for its cadence, ms.
    Cadence(String),
    /// A detector's next due time as the last scan planned it, ms.
    Due(String),
    /// Where the last daily digest's period ended, ms.
    DigestUntil,
    /// A detector build's regression case already run (`<build sha256>.<sig>`;
    /// the value: `pass`, `never` when no build had produced it yet, or
    /// `fire:<seq>` of the warning that it no longer does).
    RegressionChecked(String),
    /// The first detector build that produced a regression case's signature
    /// (by the signature): from then on, a build that does not is warned about.
    RegressionProduced(String),
}

impl MetaKey {
    /// The key as the store holds it.
    pub fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            MetaKey::FastStamp => "fast_stamp",
            MetaKey::NextWake => "next_wake",
            MetaKey::LastScan => "last_scan",
            MetaKey::ExportPending => "export_pending",
            MetaKey::FiresClosed => "fires_closed",
            MetaKey::FiresHead => "fires_head",
            MetaKey::FiresFiles => "fires_files",
            MetaKey::DigestUntil => "digest_until",
            MetaKey::Cadence(detector) => return Cow::Owned(format!("cadence.{detector}")),
            MetaKey::Due(detector) => return Cow::Owned(format!("due.{detector}")),
            MetaKey::RegressionChecked(key) => return Cow::Owned(format!("regression_checked.{key}")),
            MetaKey::RegressionProduced(sig) => return Cow::Owned(format!("regression_produced.{sig}")),
        })
    }
}

/// A value a scan commits: `None` deletes the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaEntry {
    FastStamp(Option<String>),
    NextWake(Option<i64>),
    LastScan(i64),
    Cadence { detector: String, last_run: i64 },
    Due { detector: String, at: i64 },
}

impl MetaEntry {
    pub fn key(&self) -> MetaKey {
        match self {
            MetaEntry::FastStamp(_) => MetaKey::FastStamp,
            MetaEntry::NextWake(_) => MetaKey::NextWake,
            MetaEntry::LastScan(_) => MetaKey::LastScan,
            MetaEntry::Cadence { detector, .. } => MetaKey::Cadence(detector.clone()),
            MetaEntry::Due { detector, .. } => MetaKey::Due(detector.clone()),
        }
    }

    /// The value as the store holds it.
    pub fn text(&self) -> Option<String> {
        match self {
            MetaEntry::FastStamp(stamp) => stamp.clone(),
            MetaEntry::NextWake(at) => at.map(|at| at.to_string()),
            MetaEntry::LastScan(at) | MetaEntry::Cadence { last_run: at, .. } | MetaEntry::Due { at, .. } => {
                Some(at.to_string())
            }
        }
    }
}

/// A stored value that is not of its key's type.
#[derive(Debug, thiserror::Error)]
#[error("bookkeeping `{key}` holds `{value}`, which does not read as its type: {reason}")]
pub struct BadMeta {
    key: String,
    value: String,
    reason: String,
}

/// A value as text, read by the writer and the view alike.
pub(super) fn read_text(conn: &Connection, key: &MetaKey) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key.name()], |r| r.get(0)).optional()
}

/// A value read back through `parse`; a value it refuses is an error.
pub(super) fn read_parsed<T, E: std::fmt::Display>(
    conn: &Connection,
    key: &MetaKey,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> rusqlite::Result<Option<T>> {
    let Some(value) = read_text(conn, key)? else { return Ok(None) };
    parse(&value).map(Some).map_err(|e| {
        let bad = BadMeta { key: key.name().into_owned(), value, reason: e.to_string() };
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(bad))
    })
}

/// Writes `value` under `key`, or deletes the key for `None`.
pub(super) fn write(conn: &Connection, key: &MetaKey, value: Option<&str>) -> rusqlite::Result<()> {
    match value {
        Some(v) => conn.execute(
            "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            params![key.name(), v],
        ),
        None => conn.execute("DELETE FROM meta WHERE key = ?1", [key.name()]),
    }
    .map(drop)
}
