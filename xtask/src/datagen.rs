//! Generates reference data dirs (the OpenMausBot layout of DESIGN.md) with
//! a known ground truth: the demo, the end-to-end tests and the benchmarks
//! all use it.
//!
//! The data is deterministic for a given seed: SQLite databases in WAL mode
//! (`messages.db`, `runtime.db`), one NDJSON event log per thread and
//! `bots.json`. Failures are drawn from realistic templates whose raw text
//! carries values (paths, numbers, ids, addresses) that must never reach the
//! output; the returned [`Truth`] lists every failed call so a test can check
//! counts exactly.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{Connection, params};

/// How much to generate.
#[derive(Debug, Clone)]
pub struct DataSpec {
    pub seed: u64,
    pub bots: usize,
    pub threads_per_bot: usize,
    pub turns_per_thread: usize,
    /// Tool calls per turn.
    pub calls_per_turn: usize,
    /// Percent of tool calls that fail.
    pub failure_pct: u64,
    /// The time of the first record, ms since the Unix epoch.
    pub start_ms: i64,
}

impl Default for DataSpec {
    /// A few hundred rows: the demo.
    fn default() -> Self {
        DataSpec {
            seed: 7,
            bots: 3,
            threads_per_bot: 2,
            turns_per_thread: 12,
            calls_per_turn: 4,
            failure_pct: 18,
            start_ms: 1_791_895_700_000,
        }
    }
}

/// One failed tool call the generator wrote.
#[derive(Debug, Clone)]
pub struct Failure {
    pub message_id: String,
    pub tool: String,
    pub output: String,
    pub exit_code: Option<i64>,
    pub turn_id: String,
    /// Which template produced it: failures of one template group together.
    pub template: &'static str,
}

/// What was written.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    pub activity_rows: usize,
    /// Records of every kind: activity and text messages, queue events and
    /// turn events.
    pub records: usize,
    /// The time of the last record, ms since the Unix epoch.
    pub end_ms: i64,
    pub failures: Vec<Failure>,
    pub bot_names: Vec<String>,
}

/// A small deterministic generator (xorshift64*): no dependency, same data
/// on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

const BOT_NAMES: &[&str] = &["Marvin", "Ada", "Turing", "Grace", "Linus", "Hopper"];

/// `(template, tool, exit code, output)`: every output carries values the
/// normalizer must remove.
fn failure_template(rng: &mut Rng, bot_name: &str, forced: Option<u64>) -> (&'static str, String, Option<i64>, String) {
    let n = rng.below(900) + 10;
    let m = rng.below(90_000) + 1000;
    let pick = rng.below(8);
    match forced.unwrap_or(pick) {
        0 => ("no-layer", "mcp__agents__load_layer".into(), None, format!("no layer {n} in /srv/projects/p{m}/layers")),
        1 => ("cmd-not-found", "Bash".into(), Some(127), format!("bash: deploy-{m}: command not found")),
        2 => (
            "no-such-file",
            "Bash".into(),
            Some(1),
            format!("cat: /home/user/work/report-{m}.txt: No such file or directory"),
        ),
        3 => (
            "timeout",
            "Bash".into(),
            Some(if n.is_multiple_of(2) { 137 } else { 143 }),
            format!("Command timed out after {m}ms"),
        ),
        4 => (
            "github-502",
            "mcp__github__create_issue".into(),
            None,
            format!("HTTP 502 from https://api.github.com/repos/acme/r{m}/issues"),
        ),
        5 => (
            "send-denied",
            "mcp__agents__send_message".into(),
            None,
            format!("recipient user{m}@example.com rejected token \"sk-live-{m}{n}\""),
        ),
        6 => {
            ("fetch-404", "WebFetch".into(), None, format!("request {m} to https://docs.example.org/p/{n} failed: 404"))
        }
        _ => {
            ("room-timeout", format!("Room turn stopped: {bot_name} ran longer than {n} seconds"), None, String::new())
        }
    }
}

fn open_wal(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).with_context(|| format!("cannot create {}", path.display()))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    Ok(conn)
}

/// Opens (creating it in WAL mode, with the reference schema) `dir/messages.db`.
pub fn messages_db(dir: &Path) -> Result<Connection> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let conn = open_wal(&dir.join("messages.db"))?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS messages(id TEXT PRIMARY KEY, thread_id TEXT, at INTEGER, type TEXT, data TEXT);
         CREATE INDEX IF NOT EXISTS messages_at ON messages(at);",
    )?;
    Ok(conn)
}

/// Writes a data dir at `dir` (created if needed) and returns its truth.
pub fn generate(dir: &Path, spec: &DataSpec) -> Result<Truth> {
    std::fs::create_dir_all(dir.join("events")).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut messages = messages_db(dir)?;
    let mut runtime = open_wal(&dir.join("runtime.db"))?;
    runtime.execute_batch(
        "CREATE TABLE IF NOT EXISTS assignment_events(id INTEGER PRIMARY KEY, assignment_id TEXT, thread_id TEXT,
                                                     bot_id TEXT, event TEXT, at INTEGER);",
    )?;

    let mut bots = Vec::new();
    let tx = messages.transaction()?;
    let rtx = runtime.transaction()?;
    let mut turns = Turns { messages: &tx, runtime: &rtx, rng: Rng::new(spec.seed), truth: Truth::default(), spec };
    let mut at = spec.start_ms;
    for b in 0..spec.bots {
        let bot_id = format!("bot-{b:02}");
        let name = BOT_NAMES[b % BOT_NAMES.len()].to_owned();
        turns.truth.bot_names.push(name.clone());
        let mut threads = Vec::new();
        for t in 0..spec.threads_per_bot {
            let thread_id = format!("th-{b:02}-{t:03}");
            threads.push(thread_id.clone());
            let mut log =
                std::io::BufWriter::new(std::fs::File::create(dir.join("events").join(format!("{thread_id}.ndjson")))?);
            for turn in 0..spec.turns_per_thread {
                let who = Who {
                    bot_id: &bot_id,
                    name: &name,
                    thread_id: &thread_id,
                    place: format!("{b:02}-{t:03}-{turn:04}"),
                };
                at = turns.write(&mut log, &who, at)?;
            }
            log.flush()?;
        }
        bots.push(serde_json::json!({"id": bot_id, "name": name, "threads": threads}));
    }
    let mut truth = turns.truth;
    tx.commit()?;
    rtx.commit()?;
    truth.end_ms = at;
    std::fs::write(dir.join("bots.json"), serde_json::to_vec_pretty(&serde_json::json!({"bots": bots}))?)?;
    Ok(truth)
}

/// Who a turn is: its bot, the bot's name, its thread, and its place
/// (`bot-thread-turn`, what its ids are made of).
struct Who<'a> {
    bot_id: &'a str,
    name: &'a str,
    thread_id: &'a str,
    place: String,
}

/// What a data dir's turns are written with, one after the other: both
/// databases' transactions, the generator (its draws in the order they
/// have always been made) and the truth so far.
struct Turns<'a> {
    messages: &'a rusqlite::Transaction<'a>,
    runtime: &'a rusqlite::Transaction<'a>,
    rng: Rng,
    truth: Truth,
    spec: &'a DataSpec,
}

impl Turns<'_> {
    /// Writes one turn from `at`: its queue events, its question and tool
    /// calls, its two turn events in `log`; returns when it ended.
    fn write(&mut self, log: &mut impl Write, who: &Who<'_>, mut at: i64) -> Result<i64> {
        let (thread_id, bot_id) = (who.thread_id, who.bot_id);
        let turn_id = format!("turn-{}", who.place);
        let assignment = format!("as-{}", who.place);
        let wait = if self.rng.below(10) == 0 { 400_000 } else { 2_000 + self.rng.below(20_000) as i64 };
        self.runtime.execute(
            "INSERT INTO assignment_events(assignment_id, thread_id, bot_id, event, at) VALUES(?1, ?2, ?3, 'enqueued', ?4)",
            params![assignment, thread_id, bot_id, at],
        )?;
        self.runtime.execute(
            "INSERT INTO assignment_events(assignment_id, thread_id, bot_id, event, at) VALUES(?1, ?2, ?3, 'started', ?4)",
            params![assignment, thread_id, bot_id, at + wait],
        )?;
        at += wait;
        self.truth.records += 2 + 1 + self.spec.calls_per_turn + 2;
        self.messages.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?1, ?2, ?3, 'text', ?4)",
            params![format!("msg-{turn_id}-q"), thread_id, at, r#"{"text":"please do the thing"}"#],
        )?;
        // Now and then a turn retries one failing call over and over:
        // the same template each time, with other values.
        let looping = (self.rng.below(12) == 0).then(|| self.rng.below(8));
        for call in 0..self.spec.calls_per_turn {
            at += 1_000 + self.rng.below(5_000) as i64;
            self.call(who, &turn_id, call, looping, at)?;
        }
        let ok = self.rng.below(10) != 0;
        let stop =
            if ok { "end_turn" } else { ["max_tokens", "error", "room_timeout", "quota"][self.rng.below(4) as usize] };
        let cost = (self.rng.below(700) as f64) / 100.0;
        writeln!(
            log,
            "{}",
            serde_json::json!({"type": "turn.started", "id": format!("ev-{turn_id}-s"),
            "threadId": thread_id, "turnId": turn_id, "botId": bot_id, "createdAt": at - 10})
        )?;
        writeln!(
            log,
            "{}",
            serde_json::json!({"type": "turn.completed", "id": format!("ev-{turn_id}-c"),
            "threadId": thread_id, "turnId": turn_id, "botId": bot_id, "createdAt": at,
            "ok": ok, "stopReason": stop, "cost": cost})
        )?;
        Ok(at)
    }

    /// Writes tool call `call` of turn `turn_id` at `at`: failed (and in the
    /// truth) when the turn loops on one failure or by the failure rate.
    fn call(&mut self, who: &Who<'_>, turn_id: &str, call: usize, looping: Option<u64>, at: i64) -> Result<()> {
        let id = format!("msg-{turn_id}-{call:02}");
        let failed = looping.is_some() || self.rng.below(100) < self.spec.failure_pct;
        let data = if failed {
            let (template, tool, exit_code, output) = failure_template(&mut self.rng, who.name, looping);
            self.truth.failures.push(Failure {
                message_id: id.clone(),
                tool: tool.clone(),
                output: output.clone(),
                exit_code,
                turn_id: turn_id.to_owned(),
                template,
            });
            serde_json::json!({"turnId": turn_id, "from": {"botId": who.bot_id},
                "tool": {"name": tool, "ok": false, "output": output, "exitCode": exit_code}})
        } else {
            serde_json::json!({"turnId": turn_id, "from": {"botId": who.bot_id},
                "tool": {"name": "Read", "ok": true, "output": "fine"}})
        };
        self.messages.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?1, ?2, ?3, 'activity', ?4)",
            params![id, who.thread_id, at, data.to_string()],
        )?;
        self.truth.activity_rows += 1;
        Ok(())
    }
}

/// One activity row, for tests that build data by hand.
#[derive(Debug, Clone, Default)]
pub struct Activity<'a> {
    pub id: &'a str,
    pub at: i64,
    pub turn_id: &'a str,
    pub tool: &'a str,
    /// `None` while the tool is still running.
    pub ok: Option<bool>,
    pub output: &'a str,
    pub exit_code: Option<i64>,
}

impl<'a> Activity<'a> {
    /// A failed call.
    pub fn failed(id: &'a str, at: i64, turn_id: &'a str, tool: &'a str, output: &'a str) -> Self {
        Activity { id, at, turn_id, tool, ok: Some(false), output, exit_code: None }
    }
}

/// Adds (or replaces) one activity row in `dir/messages.db`, creating it in WAL mode.
pub fn insert_activity(dir: &Path, a: &Activity<'_>) -> Result<()> {
    let conn = messages_db(dir)?;
    let data = serde_json::json!({"turnId": a.turn_id, "from": {"botId": "bot-x"},
        "tool": {"name": a.tool, "ok": a.ok, "output": a.output, "exitCode": a.exit_code}});
    conn.execute(
        "INSERT OR REPLACE INTO messages(id, thread_id, at, type, data) VALUES(?1, 'th-x', ?2, 'activity', ?3)",
        params![a.id, a.at, data.to_string()],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a (64 bits) over everything a data dir holds, in a fixed order:
    /// every row of both databases, every event log, `bots.json`, and the
    /// truth returned.
    fn digest(dir: &Path, truth: &Truth) -> u64 {
        let mut text = String::new();
        for (db, sql) in [
            ("messages.db", "SELECT id, thread_id, at, type, data FROM messages ORDER BY rowid"),
            ("runtime.db", "SELECT id, assignment_id, thread_id, bot_id, event, at FROM assignment_events ORDER BY id"),
        ] {
            let conn = Connection::open(dir.join(db)).unwrap();
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            let mut rows = stmt.query([]).unwrap();
            while let Some(row) = rows.next().unwrap() {
                for i in 0..n {
                    text.push_str(&format!("{:?}\u{1f}", row.get::<_, rusqlite::types::Value>(i).unwrap()));
                }
                text.push('\n');
            }
        }
        let mut logs: Vec<_> = std::fs::read_dir(dir.join("events")).unwrap().map(|e| e.unwrap().path()).collect();
        logs.sort();
        for p in logs.iter().chain([&dir.join("bots.json")]) {
            text.push_str(&format!(
                "{}\n{}",
                p.file_name().unwrap().to_string_lossy(),
                std::fs::read_to_string(p).unwrap()
            ));
        }
        text.push_str(&format!("{truth:?}"));
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    }

    /// The demo, the benchmarks and the end-to-end tests rely on a seed
    /// giving the same data dir, byte for byte in content, on every machine
    /// and across changes to the generator's code.
    #[test]
    fn a_seed_generates_the_same_data_it_always_did() {
        for (spec, want) in [
            (DataSpec::default(), 13_730_877_468_169_465_698),
            (
                DataSpec { seed: 11, bots: 2, turns_per_thread: 30, failure_pct: 40, ..DataSpec::default() },
                4_571_491_869_729_781_569,
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let truth = generate(dir.path(), &spec).unwrap();
            assert_eq!(digest(dir.path(), &truth), want, "{spec:?}");
        }
    }
}
