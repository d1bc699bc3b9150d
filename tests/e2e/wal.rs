//! SQLite in WAL mode with a real concurrent writer: rows still in the
//! `-wal` file are read, the writer is never blocked, nothing is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rusqlite::Connection;

use crate::support::*;

#[test]
fn rows_still_in_the_wal_are_read_while_a_writer_keeps_writing() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let db = data.join("messages.db");
    // The schema in WAL mode, created and closed.
    drop(xtask::datagen::messages_db(&data).unwrap());
    // The writer holds its connection open and never checkpoints, so the
    // newest rows live only in messages.db-wal.
    let writer = Connection::open(&db).unwrap();
    writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    let insert = |c: &Connection, i: usize| {
        let data = serde_json::json!({"turnId": format!("t{}", i / 3), "from": {"botId": "b"},
            "tool": {"name": "mcp__agents__send", "ok": false, "output": format!("queue {i} full")}});
        c.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?1, 'th', ?2, 'activity', ?3)",
            rusqlite::params![format!("m{i:05}"), 1_000 + i as i64, data.to_string()],
        )
        .unwrap();
    };
    for i in 0..50 {
        insert(&writer, i);
    }
    assert!(std::fs::metadata(data.join("messages.db-wal")).unwrap().len() > 0);

    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let first = scan(&detectors, &data, &out);
    assert_eq!(first["sources"][1]["records"], 50, "rows in the WAL are read: {first:#}");

    // A second writer thread inserts (and checkpoints) while scans run.
    let written = Arc::new(AtomicUsize::new(50));
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let (written, stop, db) = (written.clone(), stop.clone(), db.clone());
        std::thread::spawn(move || {
            let c = Connection::open(&db).unwrap();
            c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
            let mut i = 50;
            while !stop.load(Ordering::Relaxed) {
                insert(&c, i);
                i += 1;
                written.store(i, Ordering::SeqCst);
                if i % 25 == 0 {
                    // A checkpoint must never be blocked for long by the reader.
                    c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())).unwrap();
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            i
        })
    };
    for _ in 0..3 {
        scan(&detectors, &data, &out);
    }
    stop.store(true, Ordering::Relaxed);
    let total_written = handle.join().unwrap();
    drop(writer);
    scan(&detectors, &data, &out);

    let issues = issues_of(&out, "tool_error");
    assert_eq!(issues.len(), 1, "one signature: queue <n> full");
    assert_eq!(issues[0]["count"].as_u64().unwrap() as usize, total_written, "every row counted exactly once");
}
