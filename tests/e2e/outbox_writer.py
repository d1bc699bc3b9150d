"""The application's outbox writer for the rows-acked-in-place test (tests/e2e/stock.rs).

Not a test: a process of its own, started by
`rows_acked_in_place_in_a_rollback_journal_outbox_fire_once_each_while_the_writer_commits`
as `python3 outbox_writer.py DB CTL_DIR PHASES`. The outbox is a rollback-journal
database (journal_mode=DELETE), written in place as an application would (another
process, another SQLite build: Python's).

In each phase P it inserts ROWS_PER_PHASE rows `pending` (one transaction each) and acks,
in transactions of their own, the rows of phase P-1 that are to be acked: row i gets
`VerifiedExact` when i % 4 == 0, `Inferred` when 1, no provenance when 2, and is never
acked when 3. Then it writes CTL_DIR/phase-P and, until the test answers with
CTL_DIR/scanned-P, keeps committing to a `heartbeat` table, so the scans read while the
writer commits. After the last phase it acks the last phase's rows, writes
CTL_DIR/done with the ids whose ack must fire, and exits.

The writer's busy timeout is long: a reader's shared lock makes a commit wait (that is the
lock doing its job), never fail.
"""

import json
import os
import sqlite3
import sys
import time

ROWS_PER_PHASE = 5
# A bound on the child's life whatever the parent does: a hang, not a threshold.
LIFETIME_S = 300
PROVENANCE = {0: "VerifiedExact", 1: "Inferred", 2: None}


def now_ms():
    return time.time_ns() // 1_000_000


def main(db_path, ctl, phases):
    deadline = time.monotonic() + LIFETIME_S
    conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
    mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
    assert mode == "delete", mode
    conn.execute(
        "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, status TEXT NOT NULL,"
        " worker_provenance TEXT, updated_at INTEGER NOT NULL)"
    )
    conn.execute("CREATE TABLE IF NOT EXISTS heartbeat (n INTEGER)")

    def ack(rows):
        for i in rows:
            if i % 4 == 3:
                continue
            conn.execute(
                "UPDATE outbox SET status = 'acked', worker_provenance = ?, updated_at = ? WHERE id = ?",
                (PROVENANCE[i % 4], now_ms(), i),
            )

    previous = []
    beats = 0
    for phase in range(phases):
        rows = list(range(phase * ROWS_PER_PHASE + 1, (phase + 1) * ROWS_PER_PHASE + 1))
        for i in rows:
            conn.execute("INSERT INTO outbox VALUES (?, 'pending', NULL, ?)", (i, now_ms()))
        ack(previous)
        previous = rows
        open(os.path.join(ctl, f"phase-{phase}"), "w").close()
        answer = os.path.join(ctl, f"scanned-{phase}")
        while not os.path.exists(answer) and time.monotonic() < deadline:
            conn.execute("INSERT INTO heartbeat VALUES (?)", (beats,))
            beats += 1
            time.sleep(0.005)
    ack(previous)
    conn.close()
    last = phases * ROWS_PER_PHASE
    fire = [i for i in range(1, last + 1) if i % 4 in (1, 2)]
    tmp = os.path.join(ctl, "done.tmp")
    with open(tmp, "w") as f:
        json.dump({"fire": fire, "beats": beats}, f)
    os.replace(tmp, os.path.join(ctl, "done"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
