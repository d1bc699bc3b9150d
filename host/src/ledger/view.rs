//! The read-only view of a ledger: what `detectors list`, `verify` and the
//! watch API read while a scan may be writing: issues, health, bookkeeping,
//! pages of the fire log and of the issues, newest first, and the fire log's
//! entries counted by detector and type from a sequence number on.
//!
//! It owns a connection opened with `SQLITE_OPEN_READONLY` on a store in WAL
//! mode, so it never blocks the writer and the writer never blocks it (a
//! reader sees the last committed scan). It never takes the writer lock,
//! never creates, migrates or repairs anything: a missing store is "no
//! ledger yet", a store of another schema version is read as far as it goes.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

use super::export::issues::{EvidenceRef, IssueLine, read_issue, read_issues};
use super::meta::{self, MetaKey};
use super::store::{check_header, read_health};
use super::{Health, LedgerError, STORE_FILE};
use crate::firelog::{FireEntry, FireType};

/// A read-only view of the ledger of one output folder.
#[derive(Debug)]
pub struct LedgerView {
    db_path: PathBuf,
    conn: Connection,
    /// Whether the fire log's filter indexes are there (a store no writer
    /// has opened since they came is read the old way).
    indexed: bool,
}

impl LedgerView {
    /// Opens the ledger in `dir` for reading; `None` when there is none yet.
    pub fn open(dir: &Path) -> Result<Option<Self>, LedgerError> {
        let db_path = dir.join(STORE_FILE);
        if !std::fs::metadata(&db_path).is_ok_and(|m| m.is_file() && m.len() > 0) {
            return Ok(None);
        }
        check_header(&db_path)?;
        let conn = Connection::open_with_flags(
            &db_path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|source| LedgerError::Store {
            path: db_path.clone(),
            action: "cannot open for reading",
            source,
        })?;
        let indexed = super::fire_filters::has_indexes(&conn).map_err(|source| LedgerError::Store {
            path: db_path.clone(),
            action: "cannot read the store's schema",
            source,
        })?;
        let view = LedgerView { db_path, conn, indexed };
        view.stand_in_for_issue_states()?;
        Ok(Some(view))
    }

    /// A store from before issue states (or their per-day history) has no
    /// `issue_state` (`issue_days`) table until a writer opens it; an empty
    /// one in `temp` (every issue open, no history) stands in, so a read by
    /// a new binary before its first scan still works.
    fn stand_in_for_issue_states(&self) -> Result<(), LedgerError> {
        const TABLES: [(&str, &str); 3] = [
            (
                "issue_state",
                "CREATE TEMP TABLE issue_state(sig TEXT PRIMARY KEY, state TEXT NOT NULL, fixed_at INTEGER, note TEXT)",
            ),
            (
                "issue_days",
                "CREATE TEMP TABLE issue_days(sig TEXT NOT NULL, day INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY(sig, day))",
            ),
            (
                "issue_events",
                "CREATE TEMP TABLE issue_events(sig TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY(sig, seq))",
            ),
        ];
        for (name, create) in TABLES {
            let present: bool = self
                .conn
                .query_row(
                    "SELECT EXISTS(SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?1)",
                    [name],
                    |r| r.get(0),
                )
                .map_err(self.err("cannot read the store's schema"))?;
            if !present {
                self.conn.execute_batch(create).map_err(self.err("cannot stand in for a table of issue states"))?;
            }
        }
        Ok(())
    }

    /// Issue `sig`'s fixes, reopens and regressions, oldest first: each its
    /// fire's sequence number, type and time (the newest `limit`).
    pub fn issue_events(&self, sig: &str, limit: u32) -> Result<Vec<(u64, FireType, i64)>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT seq, type, at FROM issue_events WHERE sig = ?1 ORDER BY seq DESC LIMIT ?2")
            .map_err(self.err("cannot read an issue's history"))?;
        let rows = stmt
            .query_map(params![sig, limit], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))
            .map_err(self.err("cannot read an issue's history"))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, ty, at) = row.map_err(self.err("cannot read an issue's history"))?;
            if let Some(ty) = FireType::parse(&ty) {
                out.push((u64::try_from(seq).unwrap_or(0), ty, at));
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Issue `sig`'s occurrences per UTC day of `days` (days since the
    /// epoch), oldest first: a read of the primary key's range, whatever the
    /// folder's age.
    pub fn issue_days(&self, sig: &str, days: std::ops::RangeInclusive<i64>) -> Result<Vec<u64>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT day, count FROM issue_days WHERE sig = ?1 AND day BETWEEN ?2 AND ?3")
            .map_err(self.err("cannot read an issue's history"))?;
        let mut out = vec![0u64; days.clone().count()];
        let rows = stmt
            .query_map(params![sig, days.start(), days.end()], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .map_err(self.err("cannot read an issue's history"))?;
        for row in rows {
            let (day, n) = row.map_err(self.err("cannot read an issue's history"))?;
            if let Some(slot) = usize::try_from(day - days.start()).ok().and_then(|i| out.get_mut(i)) {
                *slot = u64::try_from(n).unwrap_or(0);
            }
        }
        Ok(out)
    }

    /// Every issue's occurrences per UTC day, with the issue's kind, origin
    /// and tool (the community counts' input: no title, id or evidence).
    pub fn issue_day_counts(&self) -> Result<Vec<IssueDayCount>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT d.sig, i.kind, i.origin, i.tool, d.day, d.count
                 FROM issue_days d JOIN issues i ON i.sig = d.sig ORDER BY d.sig, d.day",
            )
            .map_err(self.err("cannot read the issues' per-day counts"))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(IssueDayCount {
                    sig: r.get(0)?,
                    kind: r.get(1)?,
                    origin: r.get(2)?,
                    tool: r.get(3)?,
                    day: r.get(4)?,
                    count: u64::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
                })
            })
            .map_err(self.err("cannot read the issues' per-day counts"))?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.err("cannot read the issues' per-day counts"))
    }

    /// [`LedgerView::open`] on a folder that may be anyone's: the
    /// connection hardened as the sources harden theirs (defensive mode, an
    /// untrusted schema, capped lengths, no attachments) and every query
    /// interrupted once `budget` has passed since the open.
    pub fn open_untrusted(dir: &Path, budget: std::time::Duration) -> Result<Option<Self>, LedgerError> {
        let Some(mut view) = Self::open(dir)? else { return Ok(None) };
        crate::base::harden::harden(&mut view.conn, budget).map_err(|source| LedgerError::Store {
            path: view.db_path.clone(),
            action: "cannot harden the connection",
            source,
        })?;
        Ok(Some(view))
    }

    fn err(&self, action: &'static str) -> impl FnOnce(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Store { path: self.db_path.clone(), action, source }
    }

    pub fn issues(&self) -> Result<Vec<IssueLine>, LedgerError> {
        read_issues(&self.conn).map_err(self.err("cannot read issues"))
    }

    /// The issue with signature `sig`, if there is one (by its key).
    pub fn issue(&self, sig: &str) -> Result<Option<IssueLine>, LedgerError> {
        read_issue(&self.conn, sig).map_err(self.err("cannot read an issue"))
    }

    pub fn health(&self) -> Result<Vec<Health>, LedgerError> {
        read_health(&self.conn).map_err(self.err("cannot read detector health"))
    }

    /// The fire-log head this ledger last signed (its anchor).
    pub fn fire_head(&self) -> Result<Option<crate::firelog::Head>, LedgerError> {
        meta::read_parsed(&self.conn, &MetaKey::FiresHead, |h| serde_json::from_str(h))
            .map_err(self.err("cannot read the fire log's head"))
    }

    /// The ledger's copy of one fire-log entry's hash.
    pub fn fire_hash(&self, seq: u64) -> Result<Option<String>, LedgerError> {
        use rusqlite::OptionalExtension;
        self.conn
            .query_row("SELECT hash FROM fires WHERE seq = ?1", [seq as i64], |r| r.get(0))
            .optional()
            .map_err(self.err("cannot read the fire log"))
    }

    pub fn meta(&self, key: &MetaKey) -> Result<Option<String>, LedgerError> {
        meta::read_text(&self.conn, key).map_err(self.err("cannot read scan bookkeeping"))
    }

    /// A bookkeeping time, ms.
    pub fn meta_ms(&self, key: &MetaKey) -> Result<Option<i64>, LedgerError> {
        meta::read_parsed(&self.conn, key, str::parse::<i64>).map_err(self.err("cannot read scan bookkeeping"))
    }

    /// The detectors the operator disabled.
    pub fn disabled(&self) -> Result<std::collections::HashSet<String>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT detector FROM detector_admin WHERE disabled")
            .map_err(self.err("cannot read the operator's settings"))?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(self.err("cannot read the operator's settings"))?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.err("cannot read the operator's settings"))
    }

    /// Fire-log entries, newest first: those before `before` (a sequence
    /// number; `None`: from the newest), at most `limit`, matching the
    /// filter. One filter is read from its index (the page costs what it
    /// returns); with more, the others are compared on at most
    /// [`PAGE_SCAN`] entries of the first one's index
    /// ([`super::fire_filters::PageRead`]). With the page's entries comes
    /// where the read stopped when entries before it were left unread: the
    /// cursor of the next page even when this one is not full.
    pub fn fires_page(
        &self,
        before: Option<u64>,
        limit: u32,
        filter: &FireFilter,
    ) -> Result<(Vec<FireEntry>, Option<u64>), LedgerError> {
        let before = before.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
        let read = super::fire_filters::PageRead::new(filter, self.indexed);
        let (sql, values) = read.page(before, limit);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(self.err("cannot read the fire log"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(values.iter()), |r| r.get::<_, String>(0))
            .map_err(self.err("cannot read the fire log"))?;
        let items = self.entries(rows)?;
        if read.exact() {
            return Ok((items, None));
        }
        let (sql, values) = read.counted(before);
        let (read, lowest): (i64, Option<i64>) = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut s| s.query_row(rusqlite::params_from_iter(values.iter()), |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(self.err("cannot read the fire log"))?;
        let left_unread = read == i64::from(PAGE_SCAN) && lowest.is_some_and(|l| l > 1);
        Ok((items, lowest.filter(|_| left_unread).and_then(|l| u64::try_from(l).ok())))
    }

    /// Fire-log entries after `seq`, oldest first, at most `limit` (what the
    /// dispatcher delivers next).
    pub fn fires_after(&self, seq: u64, limit: u32) -> Result<Vec<FireEntry>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT line FROM fires WHERE seq > ?1 ORDER BY seq LIMIT ?2")
            .map_err(self.err("cannot read the fire log"))?;
        let rows = stmt
            .query_map(params![i64::try_from(seq).unwrap_or(i64::MAX), limit], |r| r.get::<_, String>(0))
            .map_err(self.err("cannot read the fire log"))?;
        self.entries(rows)
    }

    fn entries(&self, rows: impl Iterator<Item = rusqlite::Result<String>>) -> Result<Vec<FireEntry>, LedgerError> {
        let mut out = Vec::new();
        for line in rows {
            let line = line.map_err(self.err("cannot read the fire log"))?;
            // An entry the store holds is one the writer sealed; one that does
            // not parse is skipped here and reported by the chain check.
            if let Ok(entry) = serde_json::from_str(&line) {
                out.push(entry);
            }
        }
        Ok(out)
    }

    /// The newest fire-log entries after `after_seq`, newest first, at most
    /// `limit`: each entry's sequence number with its detector, time and
    /// type (`None` for an entry that lacks one; the chain check reports it).
    pub fn fire_samples(&self, after_seq: i64, limit: u32) -> Result<Vec<FireSample>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT seq, json_extract(line, '$.detector'), json_extract(line, '$.recordedAt'), json_extract(line, '$.type')
                 FROM fires WHERE seq > ?1 ORDER BY seq DESC LIMIT ?2",
            )
            .map_err(self.err("cannot read the fire log"))?;
        let mut rows = stmt.query(params![after_seq, limit]).map_err(self.err("cannot read the fire log"))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(self.err("cannot read the fire log"))? {
            let seq: i64 = r.get(0).map_err(self.err("cannot read the fire log"))?;
            let (detector, at, kind): (Option<String>, Option<i64>, Option<String>) =
                (r.get(1).ok().flatten(), r.get(2).ok().flatten(), r.get(3).ok().flatten());
            let fact = match (detector, at, kind.as_deref().and_then(FireType::parse)) {
                (Some(detector), Some(at), Some(fire_type)) => Some(FireFact { detector, at, fire_type }),
                _ => None,
            };
            out.push(FireSample { seq, fact });
        }
        Ok(out)
    }

    /// The newest fire's sequence number (0 for an empty log).
    pub fn last_fire_seq(&self) -> Result<i64, LedgerError> {
        self.conn
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM fires", [], |r| r.get(0))
            .map_err(self.err("cannot read the fire log"))
    }

    /// Fire-log entries counted by detector and type, over the entries
    /// after `after_seq` and at most `limit` of them (oldest first), with
    /// the last sequence number counted (`after_seq` when none was): what
    /// `/metrics` adds to its running totals, so a scrape reads only what
    /// was committed since the last one. An entry without a detector or a
    /// known type is counted under `None`.
    pub fn fire_tally(&self, after_seq: i64, limit: u32) -> Result<(Vec<FireTallyRow>, i64), LedgerError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT json_extract(line, '$.detector'), json_extract(line, '$.type'), COUNT(*), MAX(seq)
                 FROM (SELECT seq, line FROM fires WHERE seq > ?1 ORDER BY seq LIMIT ?2) GROUP BY 1, 2",
            )
            .map_err(self.err("cannot read the fire log"))?;
        let mut rows = stmt.query(params![after_seq, limit]).map_err(self.err("cannot read the fire log"))?;
        let (mut out, mut last) = (Vec::new(), after_seq);
        while let Some(r) = rows.next().map_err(self.err("cannot read the fire log"))? {
            let detector: Option<String> = r.get(0).ok().flatten();
            let kind: Option<String> = r.get(1).ok().flatten();
            let count: i64 = r.get(2).map_err(self.err("cannot read the fire log"))?;
            let max: i64 = r.get(3).map_err(self.err("cannot read the fire log"))?;
            last = last.max(max);
            let fire_type = kind.as_deref().and_then(FireType::parse);
            out.push(FireTallyRow { detector, fire_type, count: u64::try_from(count).unwrap_or(0) });
        }
        Ok((out, last))
    }

    /// Issues, newest first by row id: those before `before`, at most
    /// `limit`, of one of `kinds` when given, of `kind` when given: read by
    /// row id, or per kind from the index of the kind ([`issue_ids`]).
    pub fn issues_page(
        &self,
        before: Option<i64>,
        limit: u32,
        kinds: Option<&[String]>,
        kind: Option<&str>,
    ) -> Result<Vec<(i64, IssueLine)>, LedgerError> {
        let Some((ids, values)) = issue_ids(before.unwrap_or(i64::MAX), limit, kinds, kind) else {
            return Ok(Vec::new());
        };
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT i.rowid, i.sig, kind, title, origin, severity, tool, bot_id, thread_id, turn_id, first_at,
                        last_at, count, wasted_turns, evidence_source, evidence_id, grouping_version, probation,
                        s.state, s.fixed_at, s.note
                 FROM issues i LEFT JOIN issue_state s ON s.sig = i.sig WHERE i.rowid IN ({ids})
                 ORDER BY i.rowid DESC"
            ))
            .map_err(self.err("cannot read issues"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(values.iter()), |r| {
                Ok((
                    r.get(0)?,
                    IssueLine {
                        sig: r.get(1)?,
                        kind: r.get(2)?,
                        title: r.get(3)?,
                        origin: r.get(4)?,
                        severity: r.get(5)?,
                        tool: r.get(6)?,
                        bot_id: r.get(7)?,
                        thread_id: r.get(8)?,
                        turn_id: r.get(9)?,
                        first_at: r.get(10)?,
                        last_at: r.get(11)?,
                        count: r.get(12)?,
                        wasted_turns: r.get(13)?,
                        evidence_ref: EvidenceRef { source: r.get(14)?, id: r.get(15)? },
                        grouping_version: r.get(16)?,
                        probation: r.get(17)?,
                        state: crate::ledger::IssueState::from_column(18, r.get(18)?)?,
                        fixed_at: r.get(19)?,
                        fix_note: r.get(20)?,
                    },
                ))
            })
            .map_err(self.err("cannot read issues"))?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.err("cannot read issues"))
    }
}

/// One issue's occurrences on one UTC day ([`LedgerView::issue_day_counts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueDayCount {
    pub sig: String,
    pub kind: String,
    pub origin: String,
    pub tool: Option<String>,
    /// Days since 1970-01-01.
    pub day: i64,
    pub count: u64,
}

/// The row ids of a page of issues (newest first, before `before`, at most
/// `limit`) and their values: by row id with no kind given; else each kind
/// of `kinds` that is `kind` (when given) read newest first from the index
/// of the kind, at most `limit` each, and the newest `limit` of those
/// (`None`: no kind can match). A page costs what it returns, times the
/// kinds asked for, whatever the number of issues.
fn issue_ids(
    before: i64,
    limit: u32,
    kinds: Option<&[String]>,
    kind: Option<&str>,
) -> Option<(String, Vec<Box<dyn rusqlite::ToSql>>)> {
    let wanted: Option<Vec<&str>> = match (kinds, kind) {
        (Some(ks), Some(k)) => Some(ks.iter().map(String::as_str).filter(|x| *x == k).take(1).collect()),
        (Some(ks), None) => {
            let mut ks: Vec<&str> = ks.iter().map(String::as_str).collect();
            ks.sort_unstable();
            ks.dedup();
            Some(ks)
        }
        (None, Some(k)) => Some(vec![k]),
        (None, None) => None,
    };
    let mut values: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
    let Some(wanted) = wanted else {
        values.extend([Box::new(before) as Box<dyn rusqlite::ToSql>, Box::new(limit)]);
        return Some(("SELECT rowid FROM issues WHERE rowid < ? ORDER BY rowid DESC LIMIT ?".to_owned(), values));
    };
    if wanted.is_empty() {
        return None;
    }
    let mut arms = Vec::new();
    for k in wanted {
        arms.push(
            // `issues_by_kind` when the store has it (a writer made it; a
            // store no writer has opened since is read by row id).
            "SELECT * FROM (SELECT rowid AS id FROM issues WHERE kind = ? AND rowid < ? ORDER BY rowid DESC LIMIT ?)",
        );
        values.extend([Box::new(k.to_owned()) as Box<dyn rusqlite::ToSql>, Box::new(before), Box::new(limit)]);
    }
    values.push(Box::new(limit));
    Some((format!("SELECT id FROM ({}) ORDER BY id DESC LIMIT ?", arms.join(" UNION ALL ")), values))
}

/// One fire-log entry as the heat counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireSample {
    pub seq: i64,
    /// `None` for an entry without a detector, a time or a known type.
    pub fact: Option<FireFact>,
}

/// Who fired, when (ms) and what kind of fact it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireFact {
    pub detector: String,
    pub at: i64,
    pub fire_type: FireType,
}

/// How many fire-log entries one detector recorded of one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireTallyRow {
    pub detector: Option<String>,
    pub fire_type: Option<FireType>,
    pub count: u64,
}

/// What a page of fires is narrowed to.
#[derive(Debug, Clone, Default)]
pub struct FireFilter {
    pub detector: Option<String>,
    /// The occurrence's kind.
    pub kind: Option<String>,
    /// The fire's type.
    pub fire_type: Option<FireType>,
}

/// Entries one page of fires reads at most, newest first (fewer in tests,
/// so that they reach it).
pub const PAGE_SCAN: u32 = if cfg!(test) { 8 } else { 20_000 };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::tests::obs;
    use crate::ledger::{Ledger, ScanCommit};
    use crate::model::observation::Observation;

    #[test]
    fn a_page_of_issues_of_some_kinds_is_read_per_kind_from_its_index_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        // Twelve issues, their kinds in turn a, b, c: row ids 1..=12.
        for i in 0..12 {
            let kind = ["a", "b", "c"][i % 3];
            let o = Observation { kind: kind.into(), ..obs(&format!("o{i}"), &format!("s{i}"), "t", i as i64) };
            l.commit(ScanCommit { observations: std::slice::from_ref(&o), ..Default::default() }).unwrap();
        }
        let view = LedgerView::open(dir.path()).unwrap().unwrap();
        let ids = |before: Option<i64>, kinds: Option<&[String]>, kind: Option<&str>| -> Vec<i64> {
            view.issues_page(before, 3, kinds, kind).unwrap().into_iter().map(|(id, _)| id).collect()
        };
        let ac = ["a".to_owned(), "c".to_owned(), "a".to_owned()];
        assert_eq!(ids(None, Some(&ac), None), [12, 10, 9]);
        assert_eq!(ids(Some(9), Some(&ac), None), [7, 6, 4]);
        assert_eq!(ids(None, None, Some("b")), [11, 8, 5]);
        assert_eq!(ids(None, Some(&ac), Some("c")), [12, 9, 6], "the sentinel's kinds and `kind`: both");
        assert!(ids(None, Some(&ac), Some("b")).is_empty(), "no kind is both");
        assert_eq!(ids(Some(3), None, None), [2, 1]);
        let (sql, values) = issue_ids(i64::MAX, 3, Some(&ac), None).unwrap();
        let mut stmt = view.conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let plan: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(values.iter()), |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            plan.iter().filter(|p| p.contains("INDEX issues_by_kind (kind=? AND rowid<?)")).count(),
            2,
            "{plan:?}"
        );
    }
}
