//! Staging: the observations of the scan in flight, kept out of memory until
//! its commit.
//!
//! It owns the temporary table a scan's observations wait in (a private
//! temporary file of the ledger's connection, never the store) and dropping a
//! failed detector's part of it. Nothing staged reaches the store until
//! [`Ledger::commit`](crate::ledger::Ledger::commit): a scan's tally
//! ([`super::tally`]) counts each observation as it is staged, into
//! temporary tables too, and a dropped part abandons the tally so that the
//! commit counts what is left. The staging dies with the connection, so a
//! crash leaves nothing of it. A caller that stages many times in a row (the
//! scan's staging thread) does it in one [`StagingRun`]: one transaction of
//! temporary tables, instead of one per call.

use rusqlite::params;

use super::rule::{issue_sig, occurrence_key};
use crate::ledger::{Ledger, LedgerError};
use crate::model::observation::{ObservationRef, Origin, Severity};

/// The staging table: observations of the scan in flight, as the ledger
/// will count them (hashes instead of grouping keys and occurrences), kept
/// out of memory until the commit. A temporary table: it lives in a private
/// temporary file, never in the store, and dies with the connection.
///
/// No index on `detector`: each row would pay for it, and only a failed
/// detector's [`Ledger::unstage`] looks rows up by it. Its journal is kept
/// in memory: a temporary table needs a rollback, never crash safety.
const STAGING: &str = "
PRAGMA temp_store = FILE;
PRAGMA temp.journal_mode = MEMORY;
CREATE TEMP TABLE IF NOT EXISTS staged(
    seq INTEGER PRIMARY KEY, detector TEXT NOT NULL, kind TEXT NOT NULL, sig TEXT NOT NULL, occ TEXT NOT NULL,
    title TEXT NOT NULL, origin TEXT NOT NULL, severity TEXT NOT NULL, tool TEXT,
    bot_id TEXT, thread_id TEXT, turn_id TEXT, at INTEGER NOT NULL,
    evidence_source TEXT NOT NULL, evidence_id TEXT NOT NULL, wasted_turns INTEGER NOT NULL,
    grouping_version INTEGER NOT NULL, probation INTEGER NOT NULL DEFAULT 0);
DELETE FROM temp.staged;
";

/// One observation on its way into the counts.
pub(in crate::ledger) struct Incoming {
    pub(in crate::ledger) kind: String,
    pub(in crate::ledger) sig: String,
    pub(in crate::ledger) occ: String,
    pub(in crate::ledger) title: String,
    pub(in crate::ledger) origin: Origin,
    pub(in crate::ledger) severity: Severity,
    pub(in crate::ledger) tool: Option<String>,
    pub(in crate::ledger) bot_id: Option<String>,
    pub(in crate::ledger) thread_id: Option<String>,
    pub(in crate::ledger) turn_id: Option<String>,
    pub(in crate::ledger) at: i64,
    pub(in crate::ledger) evidence_source: String,
    pub(in crate::ledger) evidence_id: String,
    pub(in crate::ledger) wasted_turns: u32,
    pub(in crate::ledger) grouping_version: u32,
    pub(in crate::ledger) detector: String,
    pub(in crate::ledger) probation: bool,
}

/// Stored text that is not the value it was written from.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a value this column holds")]
struct NotAValue(String);

/// Column `i` of `r`, text read back through `parse` (an origin, a
/// severity); text `parse` refuses is an error of the read.
fn typed<T>(r: &rusqlite::Row<'_>, i: usize, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(NotAValue(text)))
    })
}

impl Incoming {
    /// An observation being staged, with its issue signature and occurrence
    /// key.
    pub(in crate::ledger) fn of(o: ObservationRef<'_>, sig: String, occ: String) -> Self {
        Incoming {
            kind: o.kind.to_owned(),
            sig,
            occ,
            title: o.title.to_owned(),
            origin: o.origin,
            severity: o.severity,
            tool: o.tool.map(str::to_owned),
            bot_id: o.bot_id.map(str::to_owned),
            thread_id: o.thread_id.map(str::to_owned),
            turn_id: o.turn_id.map(str::to_owned),
            at: o.at,
            evidence_source: o.evidence_source.to_owned(),
            evidence_id: o.evidence_id.to_owned(),
            wasted_turns: o.wasted_turns,
            grouping_version: o.grouping_version,
            detector: o.detector.to_owned(),
            probation: o.probation,
        }
    }

    /// A row of `temp.staged`, selected in [`Ledger::commit`]'s column order.
    pub(in crate::ledger) fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Incoming {
            kind: r.get(0)?,
            sig: r.get(1)?,
            occ: r.get(2)?,
            title: r.get(3)?,
            origin: typed(r, 4, Origin::parse)?,
            severity: typed(r, 5, Severity::parse)?,
            tool: r.get(6)?,
            bot_id: r.get(7)?,
            thread_id: r.get(8)?,
            turn_id: r.get(9)?,
            at: r.get(10)?,
            evidence_source: r.get(11)?,
            evidence_id: r.get(12)?,
            wasted_turns: r.get(13)?,
            grouping_version: r.get(14)?,
            detector: r.get(15)?,
            probation: r.get(16)?,
        })
    }
}

impl Ledger {
    /// Stages observations of the scan in flight for its commit, so they
    /// need not be held in memory, and tallies them when the scan counts as
    /// it goes ([`Ledger::begin_scan`]). Nothing reaches the store until
    /// [`Ledger::commit`]; the staging dies with the connection. One
    /// transaction of its own: a caller that stages many times in a row
    /// uses a [`StagingRun`].
    pub fn stage<'o>(&mut self, observations: impl IntoIterator<Item = ObservationRef<'o>>) -> Result<(), LedgerError> {
        let mut observations = observations.into_iter().peekable();
        if observations.peek().is_none() {
            return Ok(());
        }
        let mut run = self.staging_run()?;
        run.stage(observations)?;
        run.finish()
    }

    /// Starts a run of staging calls in one transaction (the scan's staging
    /// thread holds one while records flow), so that each call does not
    /// write the temporary tables' pages out again.
    pub fn staging_run(&mut self) -> Result<StagingRun<'_>, LedgerError> {
        if !self.staging {
            self.conn.execute_batch(STAGING).map_err(self.err("cannot stage observations"))?;
            self.staging = true;
        }
        self.conn.execute_batch("BEGIN").map_err(self.err("cannot stage observations"))?;
        Ok(StagingRun { ledger: self, open: true })
    }
    /// Drops everything staged: what a scan that stopped before its commit
    /// left (a scan starts with this, so it never counts another's).
    pub fn clear_staged(&mut self) -> Result<(), LedgerError> {
        if self.staging {
            self.conn.execute("DELETE FROM temp.staged", []).map_err(self.err("cannot clear staged observations"))?;
        }
        Ok(())
    }

    /// Drops what `detector` staged this scan: it failed, and a failed
    /// detector's partial report is not counted.
    pub fn unstage(&mut self, detector: &str) -> Result<(), LedgerError> {
        if !self.staging {
            return Ok(());
        }
        let dropped = self
            .conn
            .execute("DELETE FROM temp.staged WHERE detector = ?1", [detector])
            .map_err(self.err("cannot unstage"))?;
        if dropped > 0 {
            // What the tally counted of its part cannot be told from the
            // rest: the commit counts what is left itself.
            self.tally = None;
        }
        Ok(())
    }
}

/// Staging calls in one transaction of the ledger's connection, which only
/// temporary tables are written in: [`StagingRun::finish`] commits it, and
/// dropping an unfinished run rolls it back (the scan it served failed, and
/// the next one starts by clearing the staging anyway).
pub struct StagingRun<'l> {
    ledger: &'l mut Ledger,
    open: bool,
}

impl StagingRun<'_> {
    /// Stages observations, as [`Ledger::stage`] does, in this run's transaction.
    pub fn stage<'o>(&mut self, observations: impl IntoIterator<Item = ObservationRef<'o>>) -> Result<(), LedgerError> {
        let ledger = &mut *self.ledger;
        let path = ledger.db_path.clone();
        let e = move |source| LedgerError::Store { path: path.clone(), action: "cannot stage observations", source };
        let mut stmt = ledger
            .conn
            .prepare_cached(
                "INSERT INTO temp.staged(detector, kind, sig, occ, title, origin, severity, tool, bot_id, thread_id,
                                         turn_id, at, evidence_source, evidence_id, wasted_turns, grouping_version,
                                         probation)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            )
            .map_err(&e)?;
        for o in observations {
            let (sig, occ) = (issue_sig(o.kind, o.grouping_version, o.signature), occurrence_key(o.kind, o.occurrence));
            stmt.execute(params![
                o.detector,
                o.kind,
                sig,
                occ,
                o.title,
                o.origin.as_str(),
                o.severity.as_str(),
                o.tool,
                o.bot_id,
                o.thread_id,
                o.turn_id,
                o.at,
                o.evidence_source,
                o.evidence_id,
                o.wasted_turns,
                o.grouping_version,
                o.probation
            ])
            .map_err(&e)?;
            if let Some(tally) = &mut ledger.tally {
                let incoming = Incoming::of(o, sig, occ);
                if tally.can_count(&incoming) {
                    tally.count(&ledger.conn, incoming).map_err(&e)?;
                } else {
                    // The commit moves a count floor first: it counts.
                    ledger.tally = None;
                }
            }
        }
        Ok(())
    }

    /// Drops what `detector` staged, as [`Ledger::unstage`] does, in this run's transaction.
    pub fn unstage(&mut self, detector: &str) -> Result<(), LedgerError> {
        self.ledger.unstage(detector)
    }

    /// Commits the run.
    pub fn finish(mut self) -> Result<(), LedgerError> {
        self.open = false;
        self.ledger.conn.execute_batch("COMMIT").map_err(self.ledger.err("cannot stage observations"))
    }
}

impl Drop for StagingRun<'_> {
    fn drop(&mut self) {
        if self.open {
            // Nothing of the store is written in a run: a failed rollback
            // leaves only temporary rows, which the next scan clears.
            let _ = self.ledger.conn.execute_batch("ROLLBACK");
        }
    }
}
