//! The floors under the raw read: what SQLite and the disk allow.
//!
//! Owns two baselines for the sources' raw read: the `sqlite3` shell
//! running the same selections of the same rows and fields (failed tool
//! calls from `messages.db`, assignment events from `runtime.db`), its
//! output thrown away, and a plain line count of the NDJSON event logs
//! (read in 64 KiB blocks, newlines counted). Their sum is the floor the
//! reader is compared with. Never reads through the host's sources, and
//! never runs the shell in the data dir: even `-readonly`, it creates
//! `-wal` and `-shm` files beside a WAL database (which would also end the
//! next scan's fast path), so it reads copies ([`copy_databases`]).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The rows and fields the messages source reads (its paging left out).
const MESSAGES: &str = "SELECT id, thread_id, at, json_extract(data, '$.turnId'), json_extract(data, '$.from.botId'), \
     json_extract(data, '$.tool.name'), json_extract(data, '$.tool.output'), json_extract(data, '$.tool.exitCode') \
     FROM messages WHERE type = 'activity' AND json_valid(data) AND json_extract(data, '$.tool.ok') = 0 \
     ORDER BY at, id;";

/// The rows and fields the runtime source reads.
const RUNTIME: &str = "SELECT id, assignment_id, thread_id, bot_id, event, at FROM assignment_events ORDER BY id;";

/// Whether the `sqlite3` shell can be run.
pub fn sqlite_shell_available() -> bool {
    Command::new("sqlite3")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Copies the databases of `data_dir` (with their `-wal` files) into a
/// scratch folder for [`sqlite_shell`].
pub fn copy_databases(data_dir: &Path) -> Result<tempfile::TempDir> {
    let copy = tempfile::tempdir()?;
    for db in ["messages.db", "runtime.db"] {
        for file in [db.to_owned(), format!("{db}-wal")] {
            let from = data_dir.join(&file);
            if from.exists() {
                std::fs::copy(&from, copy.path().join(&file))
                    .with_context(|| format!("cannot copy {}", from.display()))?;
            }
        }
    }
    Ok(copy)
}

/// The `sqlite3` shell reading both databases of `dir` (a copy of the data
/// dir's, [`copy_databases`]), read-only.
pub fn sqlite_shell(dir: &Path) -> Result<Duration> {
    let started = Instant::now();
    for db in ["messages.db", "runtime.db"] {
        sqlite_shell_one(dir, db)?;
    }
    Ok(started.elapsed())
}

/// The `sqlite3` shell running `db`'s selection in `dir` (nothing when the
/// database is absent): its time.
pub fn sqlite_shell_one(dir: &Path, db: &str) -> Result<Duration> {
    let query = if db == "messages.db" { MESSAGES } else { RUNTIME };
    let path = dir.join(db);
    let started = Instant::now();
    if !path.exists() {
        return Ok(started.elapsed());
    }
    let out = Command::new("sqlite3")
        .arg("-readonly")
        .arg(&path)
        .arg(query)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("cannot run sqlite3")?;
    if !out.status.success() {
        bail!("sqlite3 on {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(started.elapsed())
}

/// Counts the lines of every `events/*.ndjson` of `data_dir`: the time and the count.
pub fn line_count(data_dir: &Path) -> Result<(Duration, u64)> {
    let started = Instant::now();
    let mut lines = 0u64;
    let dir = data_dir.join("events");
    let mut buf = vec![0u8; 64 * 1024];
    for entry in std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "ndjson") {
            continue;
        }
        let mut f = std::fs::File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        }
    }
    Ok((started.elapsed(), lines))
}
