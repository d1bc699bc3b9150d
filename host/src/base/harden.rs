//! Hardening of a SQLite connection to a database someone else wrote: the
//! watched application's (the sources) or an output folder's ledger opened by
//! `verify` on a folder that may be anyone's.
//!
//! It owns the connection's defensive settings and limits and the per-query
//! wall-clock budget (armed at hardening, re-armed per query on a kept handle); it never opens, reads or decides which database is read.

use std::time::{Duration, Instant};

use rusqlite::Connection;

/// `SQLITE_LIMIT_LENGTH`: the largest string or blob a query may produce,
/// bytes. A larger value is an error of that query, not an allocation.
pub const MAX_VALUE_BYTES: i32 = 16 << 20;
/// `SQLITE_LIMIT_SQL_LENGTH`: the longest statement, bytes.
pub const MAX_SQL_BYTES: i32 = 1 << 20;
/// Virtual machine steps between two looks at the clock.
const PROGRESS_STEPS: i32 = 10_000;

/// Hardens a fresh connection against a hostile schema and bounds each query.
pub fn harden(conn: &mut Connection, budget: Duration) -> rusqlite::Result<()> {
    use rusqlite::config::DbConfig;
    use rusqlite::limits::Limit;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)?;
    conn.set_limit(Limit::SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_BYTES)?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    rearm(conn, budget)?;
    conn.busy_timeout(Duration::from_millis(250))?;
    Ok(())
}

/// Starts the wall-clock budget again from now: on a handle kept across the
/// pages of a read, each page is one query with a budget of its own.
pub fn rearm(conn: &mut Connection, budget: Duration) -> rusqlite::Result<()> {
    let started = Instant::now();
    conn.progress_handler(PROGRESS_STEPS, Some(move || started.elapsed() > budget))
}
