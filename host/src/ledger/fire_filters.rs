//! The fire log's filter columns: each `fires` row's detector, kind and type
//! beside its line, with an index of each by sequence number, so that a
//! filtered page of fires (`/v1/fires?sentinel=`, `kind=`, `type=`) reads
//! the entries it returns, not the whole log.
//!
//! It owns the columns' and indexes' definitions, the migration that gives a
//! store from before them the columns (filled from the lines it already
//! holds) and the indexes, and the query of one page of fires. The columns
//! are plain columns written with each row, never generated and never an
//! index of the JSON: the tally's temporary table has the same columns and
//! indexes, so its fires still move into the store as records, not decoded
//! ([`super::count::tally`]). It never writes a line, and never reads one
//! except to fill the columns of a store from before them.

use rusqlite::{Connection, ToSql};

use crate::firelog::FireType;
use crate::ledger::view::FireFilter;

/// The filter columns, in the order they follow `seq, hash, line` (the
/// order `ALTER TABLE ... ADD COLUMN` gives an older store).
pub(super) const COLUMNS: [&str; 3] = ["detector", "kind", "type"];

/// The indexes of `table` (in `schema`) by each filter column and sequence
/// number: the store's and the tally's must match for the move of the
/// tally's fires to copy records.
pub(super) fn indexes(schema: &str, table: &str) -> String {
    COLUMNS
        .iter()
        .map(|c| format!("CREATE INDEX IF NOT EXISTS {schema}.{table}_by_{c} ON {table}({c}, seq);"))
        .collect()
}

/// Whether `schema.table` has the filter columns.
pub(super) fn has_columns(conn: &Connection, schema: &str, table: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        &format!("SELECT COUNT(*) = 3 FROM pragma_table_info('{table}', '{schema}') WHERE name IN ('detector', 'kind', 'type')"),
        [],
        |r| r.get(0),
    )
}

/// Whether the store's `fires` has its filter indexes (a store not yet
/// migrated is read the old way, by scanning).
pub(super) fn has_indexes(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) = 3 FROM main.sqlite_master WHERE type = 'index' AND name IN
            ('fires_by_detector', 'fires_by_kind', 'fires_by_type')",
        [],
        |r| r.get(0),
    )
}

/// Gives a store from before the filter columns its columns, filled from
/// each line, and its indexes, in one transaction; returns how many rows
/// were filled (0 for a store that had them). A one-time cost: one pass over
/// the lines, then the indexes' sort.
pub(super) fn migrate(conn: &mut Connection) -> rusqlite::Result<u64> {
    let tx = conn.transaction()?;
    let mut filled = 0;
    if !has_columns(&tx, "main", "fires")? {
        for c in COLUMNS {
            tx.execute_batch(&format!("ALTER TABLE main.fires ADD COLUMN {c} TEXT"))?;
        }
        filled = tx.execute(
            "UPDATE main.fires SET detector = json_extract(line, '$.detector'), kind = json_extract(line, '$.kind'),
                type = json_extract(line, '$.type')",
            [],
        )? as u64;
    }
    tx.execute_batch(&indexes("main", "fires"))?;
    tx.commit()?;
    Ok(filled)
}

/// One page's read of the fire log: where its entries come from (the
/// driving filter's index, or the log by sequence number) and the filters
/// compared on what that read returns.
#[derive(Debug)]
pub(super) struct PageRead {
    /// The filter read from its index: its column and value.
    driving: Option<(&'static str, String)>,
    /// The other filters: their column and value.
    rest: Vec<(&'static str, String)>,
    indexed: bool,
}

impl PageRead {
    /// With the indexes (`indexed`), the first filter given (detector, then
    /// kind, then type) is read from its index, newest first; with no other
    /// filter that is the page itself. Other filters are compared on the
    /// columns of at most [`super::view::PAGE_SCAN`] entries of that read,
    /// so a page costs at most that whatever the log's size. Without the
    /// indexes (a store not yet migrated), the newest entries are read and
    /// filtered on their lines, as before the columns.
    pub(super) fn new(filter: &FireFilter, indexed: bool) -> Self {
        let given: Vec<(&'static str, String)> = [
            ("detector", filter.detector.clone()),
            ("kind", filter.kind.clone()),
            ("type", filter.fire_type.map(|t: FireType| t.as_str().to_owned())),
        ]
        .into_iter()
        .filter_map(|(c, v)| v.map(|v| (c, v)))
        .collect();
        let mut rest = given.into_iter();
        let driving = if indexed { rest.next() } else { None };
        PageRead { driving, rest: rest.collect(), indexed }
    }

    /// Whether the page is exactly what the read returns (no filter is
    /// left to compare, so a short page is the last one).
    pub(super) fn exact(&self) -> bool {
        self.rest.is_empty()
    }

    /// The read's source (its `columns`), newest first, at most
    /// [`super::view::PAGE_SCAN`] when `bounded`, with its values (in the
    /// order of their `?`).
    fn source(&self, columns: &str, before: i64, bounded: bool) -> (String, Vec<Box<dyn ToSql>>) {
        let mut values: Vec<Box<dyn ToSql>> = Vec::new();
        let mut sql = match &self.driving {
            Some((column, value)) => {
                values.push(Box::new(value.clone()));
                format!("SELECT {columns} FROM fires INDEXED BY fires_by_{column} WHERE {column} = ? AND seq < ?")
            }
            None => format!("SELECT {columns} FROM fires WHERE seq < ?"),
        };
        values.push(Box::new(before));
        sql.push_str(" ORDER BY seq DESC");
        if bounded {
            sql.push_str(" LIMIT ?");
            values.push(Box::new(super::view::PAGE_SCAN));
        }
        (sql, values)
    }

    /// The page: entries before `before`, newest first, at most `limit`.
    pub(super) fn page(&self, before: i64, limit: u32) -> (String, Vec<Box<dyn ToSql>>) {
        let (source, mut values) = self.source("*", before, !self.exact());
        let mut sql = format!("SELECT line FROM ({source}) WHERE 1");
        for (column, value) in &self.rest {
            values.push(Box::new(value.clone()));
            let of = if self.indexed { (*column).to_owned() } else { format!("json_extract(line, '$.{column}')") };
            sql.push_str(&format!(" AND {of} = ?"));
        }
        sql.push_str(" ORDER BY seq DESC LIMIT ?");
        values.push(Box::new(limit));
        (sql, values)
    }

    /// How many entries the page's bounded read went through, and the
    /// lowest sequence number among them.
    pub(super) fn counted(&self, before: i64) -> (String, Vec<Box<dyn ToSql>>) {
        let (source, values) = self.source("seq", before, true);
        (format!("SELECT COUNT(*), MIN(seq) FROM ({source})"), values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::tests::obs;
    use crate::ledger::{Ledger, LedgerView, ScanCommit};
    use crate::model::observation::Observation;

    fn by(detector: &str, occurrence: &str, at: i64) -> Observation {
        Observation { detector: detector.into(), ..obs(occurrence, &format!("s-{detector}"), occurrence, at) }
    }

    /// A folder with one fire of `rare`, then twenty of `busy`.
    fn ledger(dir: &std::path::Path) -> Ledger {
        let mut l = Ledger::open(dir).unwrap();
        let mut all = vec![by("rare", "r1", 1)];
        all.extend((0..20).map(|i| by("busy", &format!("b{i}"), 2 + i)));
        for one in all {
            l.commit(ScanCommit { observations: std::slice::from_ref(&one), ..Default::default() }).unwrap();
        }
        l
    }

    fn page(dir: &std::path::Path, detector: &str) -> (Vec<u64>, Option<u64>) {
        let view = LedgerView::open(dir).unwrap().unwrap();
        let filter = FireFilter { detector: Some(detector.into()), ..Default::default() };
        let (items, cursor) = view.fires_page(None, 50, &filter).unwrap();
        (items.iter().map(|f| f.seq).collect(), cursor)
    }

    /// One row's sequence number and its detector, kind and type columns.
    type Columns = (i64, Option<String>, Option<String>, Option<String>);

    /// What each row's filter columns hold, by sequence number.
    fn columns(l: &Ledger) -> Vec<Columns> {
        let mut stmt = l.conn.prepare("SELECT seq, detector, kind, type FROM fires ORDER BY seq").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn a_sentinels_old_fire_is_found_through_its_index_past_any_stretch_of_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let l = ledger(dir.path());
        // Twenty entries after it, more than PAGE_SCAN (8 in tests).
        assert_eq!(page(dir.path(), "rare"), (vec![1], None));
        assert_eq!(page(dir.path(), "busy").0, (2..=21).rev().collect::<Vec<u64>>());
        let plan: Vec<String> = {
            let (sql, values) =
                PageRead::new(&FireFilter { detector: Some("rare".into()), ..Default::default() }, true)
                    .page(i64::MAX, 50);
            let mut stmt = l.conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            stmt.query_map(rusqlite::params_from_iter(values.iter()), |r| r.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert!(plan.iter().any(|p| p.contains("INDEX fires_by_detector (detector=? AND seq<?)")), "{plan:?}");
        assert!(!plan.iter().any(|p| p.contains("TEMP B-TREE")), "read in the index's order, no sort: {plan:?}");
    }

    #[test]
    fn a_store_from_before_the_filter_columns_gains_them_filled_and_keeps_moving_records() {
        let dir = tempfile::tempdir().unwrap();
        let l = ledger(dir.path());
        let written = columns(&l);
        assert!(written.iter().all(|(_, d, k, t)| d.is_some() && k.as_deref() == Some("tool_error") && t.is_some()));
        // The store as the release before the columns left it: `fires` of three columns, no index.
        l.conn
            .execute_batch(
                "DROP INDEX fires_by_detector; DROP INDEX fires_by_kind; DROP INDEX fires_by_type;
                 ALTER TABLE fires DROP COLUMN type; ALTER TABLE fires DROP COLUMN kind;
                 ALTER TABLE fires DROP COLUMN detector;",
            )
            .unwrap();
        drop(l);
        // A reader before any writer reopens it reads it the old way.
        assert_eq!(page(dir.path(), "busy").0, (14..=21).rev().collect::<Vec<u64>>(), "the newest PAGE_SCAN, filtered");
        let mut l = Ledger::open(dir.path()).unwrap();
        assert_eq!(columns(&l), written, "filled from the lines, as a new store writes them");
        assert_eq!(page(dir.path(), "rare"), (vec![1], None));
        // The tally's fires still move as records into the migrated table.
        l.begin_scan(1000, [("busy".to_owned(), "1.0.0".to_owned())].into()).unwrap();
        let mut stmt = l.conn.prepare("EXPLAIN INSERT INTO main.fires SELECT * FROM temp.tally_fires").unwrap();
        let ops: Vec<String> = stmt.query_map([], |r| r.get(1)).unwrap().collect::<Result<_, _>>().unwrap();
        drop(stmt);
        assert!(ops.iter().any(|op| op == "RowCell") && !ops.iter().any(|op| op == "Column"), "{ops:?}");
        l.stage([by("busy", "b-new", 40)].iter().map(Observation::view)).unwrap();
        let versions = [("busy".to_owned(), "1.0.0".to_owned())].into();
        l.commit(ScanCommit { scan_time: 1000, versions, ..Default::default() }).unwrap();
        assert_eq!(page(dir.path(), "busy").0.first(), Some(&22), "the tallied fire is found through the index");
        assert!(crate::ledger::verify_out_dir(dir.path(), None).ok);
    }
}
