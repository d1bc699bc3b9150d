"""The application's writer for the WAL end-to-end test (tests/e2e/sources.rs).

Not a test: a process of its own, started by
`wal_checkpoints_are_never_blocked_and_rows_only_in_the_wal_are_counted`
as `python3 wal_writer.py DATA_DIR CTL_DIR`. It writes the way an
application would (another process, another SQLite build: Python's), into
messages.db and runtime.db, checkpointing with TRUNCATE every
CHECKPOINT_EVERY rows, until CTL_DIR/stop appears; then it writes
HELD_FAILED failed rows that no checkpoint moves out of the -wal and holds
its connections open until CTL_DIR/exit appears. After every row it saves
what it did in CTL_DIR/status.json (the fields of `WriterStatus`).

Never blocked is checked structurally (no wall-clock bound): every insert
runs with a busy timeout of 0, so any lock the reader held would fail it at
once with "database is locked" and end this process; a checkpoint that
reports busy (a reader inside a query at that instant) is retried until it
completes, and its retries are counted.
"""

import json
import os
import sqlite3
import sys
import time

CHECKPOINT_EVERY = int(os.environ.get("WRITER_CHECKPOINT_EVERY", "20"))
HELD_FAILED = int(os.environ.get("WRITER_HELD_FAILED", "15"))
WRITER_START_MS = 1_800_000_000_000
# A bound on the child's life whatever the parent does: a hang, not a threshold.
LIFETIME_S = 300


def connect(path):
    # isolation_level=None: no implicit transactions; BEGIN/COMMIT are ours.
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal", f"datagen makes WAL databases, {path} is {mode}"
    # Only our own checkpoints move rows out of the -wal.
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("PRAGMA busy_timeout=0")
    return conn


class Writer:
    def __init__(self, data, ctl):
        self.ctl = ctl
        self.messages = connect(os.path.join(data, "messages.db"))
        self.runtime = connect(os.path.join(data, "runtime.db"))
        self.st = {
            "rows": 0,
            "failed": 0,
            "runtime_rows": 0,
            "rows_at_checkpoint": 0,
            "attempts": 0,
            "checkpoints": 0,
            "busy_retries": 0,
            "held": False,
        }

    def save(self):
        tmp = os.path.join(self.ctl, "status.tmp")
        with open(tmp, "w") as f:
            json.dump(self.st, f)
        os.replace(tmp, os.path.join(self.ctl, "status.json"))

    def write_row(self):
        st = self.st
        i = st["rows"]
        failed = i % 4 != 3
        at = WRITER_START_MS + i * 1000
        if failed:
            tool = {"name": "mcp__agents__send_message", "ok": False, "output": f"queue {i} is full"}
        else:
            tool = {"name": "Read", "ok": True, "output": "fine"}
        data = {"turnId": f"turn-w-{i // 4}", "from": {"botId": "bot-w"}, "tool": tool}
        self.messages.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?, 'th-w', ?, 'activity', ?)",
            (f"w{i:06d}", at, json.dumps(data)),
        )
        assignment = f"as-w-{i:06d}"
        self.runtime.execute("BEGIN IMMEDIATE")
        for event, when in (("enqueued", at), ("started", at + 500)):
            self.runtime.execute(
                "INSERT INTO assignment_events(assignment_id, thread_id, bot_id, event, at)"
                " VALUES(?, 'th-w', 'bot-w', ?, ?)",
                (assignment, event, when),
            )
        self.runtime.execute("COMMIT")
        st["rows"] += 1
        st["runtime_rows"] += 2
        st["failed"] += int(failed)

    def checkpoint(self, conn):
        """TRUNCATE until it completes (busy = 0); the retries are counted."""
        st = self.st
        st["attempts"] += 1
        while True:
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                busy = 1
            if busy == 0:
                break
            st["busy_retries"] += 1
            time.sleep(0.001)
        st["checkpoints"] += 1

    def run(self):
        deadline = time.monotonic() + LIFETIME_S
        st = self.st
        stop = os.path.join(self.ctl, "stop")
        while not os.path.exists(stop) and time.monotonic() < deadline:
            self.write_row()
            if st["rows"] % CHECKPOINT_EVERY == 0:
                self.checkpoint(self.messages)
                st["rows_at_checkpoint"] = st["rows"]
                self.checkpoint(self.runtime)
            self.save()
            time.sleep(0.002)
        failed_before = st["failed"]
        while st["failed"] - failed_before < HELD_FAILED:
            self.write_row()
        st["held"] = True
        self.save()
        exit_file = os.path.join(self.ctl, "exit")
        while not os.path.exists(exit_file) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.messages.close()
        self.runtime.close()


if __name__ == "__main__":
    data_dir, ctl_dir = sys.argv[1], sys.argv[2]
    Writer(data_dir, ctl_dir).run()
