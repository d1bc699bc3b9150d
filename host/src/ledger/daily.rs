//! The daily digest's bookkeeping: where the last one's period ended, and
//! the `digest` fire a period that was not quiet records.
//!
//! It owns the `digest_until` key and appending the `digest` entry (with the
//! key, in one transaction, then the log exported), so a digest is recorded
//! once whatever stops the process between its file and its fire. It never
//! computes a digest (that is [`crate::report`]) and never writes its file.

use super::meta::{self, MetaKey};
use super::{Ledger, LedgerError};
use crate::firelog::FireBody;

/// The `detector` a digest fire names: the host itself.
pub const DIGEST_DETECTOR: &str = "sentinel-host";

impl Ledger {
    /// Where the last daily digest's period ended (ms), if one was made.
    pub fn digest_until(&self) -> Result<Option<i64>, LedgerError> {
        meta::read_parsed(&self.conn, &MetaKey::DigestUntil, str::parse::<i64>).map_err(|source| LedgerError::Store {
            path: self.db_path.clone(),
            action: "cannot read the digest's bookkeeping",
            source,
        })
    }

    /// Records that the digest of the period ending at `until` is made, at
    /// `at`: with its `digest` fire (`summary` in its reason) when the period
    /// was not quiet; returns the fire's sequence number.
    pub fn record_digest(&mut self, until: i64, at: i64, summary: Option<String>) -> Result<Option<u64>, LedgerError> {
        let path = self.db_path.clone();
        let e = move |source| LedgerError::Store { path: path.clone(), action: "cannot record the digest", source };
        let tx = self.conn.transaction().map_err(&e)?;
        let mut seq = None;
        if let Some(summary) = summary {
            // The host's own entry, named for the host.
            let body = FireBody::Digest { reason: summary };
            let entry = super::count::fires::fact_fire(DIGEST_DETECTOR, at, None, body);
            let mut appender = super::export::segments::Appender::open(&tx).map_err(&e)?;
            appender.append(&tx, entry.view()).map_err(&e)?;
            appender.flush(&tx).map_err(&e)?;
            seq = Some(appender.count());
        }
        meta::write(&tx, &MetaKey::DigestUntil, Some(&until.to_string())).map_err(&e)?;
        tx.commit().map_err(&e)?;
        if seq.is_some() {
            self.export_fires(at)?;
        }
        Ok(seq)
    }
}
