//! The dispatcher: behind `WATCH_DISPATCHER_ENABLED`, every fire of the log
//! delivered downstream at least once, to a webhook or a command.
//!
//! It owns one thread that tails the fire log through a read-only
//! [`LedgerView`] (never the writer), the window of fires read and not yet
//! settled, the pool of delivery threads (`WATCH_DISPATCH_IN_FLIGHT` of
//! them, so a receiver stuck on one fire holds up only that fire's thread),
//! the order kept where it matters (two fires with the same
//! [`order_key`] are never in flight at once: the later waits), the cursor
//! (`dispatch.cursor`: the newest sequence number before which every fire
//! is settled, delivered or dead-lettered, written atomically as it moves),
//! the dead-letter record (`dispatch-dead-letter.ndjson`) for a fire no
//! attempt delivered, and the figures `/v1/dispatch` shows ([`Stats`]). A
//! stop settles nothing: a fire in flight at a stop stays before the cursor
//! and is delivered at the next start with the same idempotency key. It
//! never decides what a fire is, never writes the ledger and never arms
//! anything: the armed gate is only reported with each fire.

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use super::deliver::{Delivery, Outcome, deliver_with_retries, shown_url};
use super::gates::{Gates, Target, WatchEnv};
use crate::firelog::{FireBody, FireEntry};
use crate::ledger::LedgerView;

pub use super::deliver::idempotency_key;

pub const CURSOR_FILE: &str = "dispatch.cursor";
pub const DEAD_LETTER_FILE: &str = "dispatch-dead-letter.ndjson";
/// How often the log is looked at for new fires.
const POLL: Duration = Duration::from_millis(200);
/// Fires read and not yet settled, at most.
const WINDOW: usize = 256;

/// What `/v1/dispatch` shows: where the dispatcher stands.
#[derive(Debug, Default)]
pub struct Stats {
    cursor: AtomicU64,
    in_flight: AtomicUsize,
    delivered: AtomicU64,
    dead_lettered: AtomicU64,
    /// Attempts made again after one failed.
    retried: AtomicU64,
    /// When a fire was last delivered, ms (0: none since this start).
    last_delivered_ms: AtomicI64,
}

/// The figures, as read at one moment.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatsView {
    /// Every fire up to this sequence number is delivered or dead-lettered.
    pub cursor: u64,
    /// Deliveries being attempted now.
    pub in_flight: usize,
    /// Delivered and dead-lettered since this start.
    pub delivered: u64,
    pub dead_lettered: u64,
    /// Attempts made again after one failed, since this start.
    pub retried: u64,
    /// When a fire was last delivered, ms since the epoch.
    pub last_delivered_at: Option<i64>,
}

impl Stats {
    pub fn view(&self) -> StatsView {
        StatsView {
            cursor: self.cursor.load(Ordering::SeqCst),
            in_flight: self.in_flight.load(Ordering::SeqCst),
            delivered: self.delivered.load(Ordering::SeqCst),
            dead_lettered: self.dead_lettered.load(Ordering::SeqCst),
            retried: self.retried.load(Ordering::SeqCst),
            last_delivered_at: Some(self.last_delivered_ms.load(Ordering::SeqCst)).filter(|ms| *ms > 0),
        }
    }
}

/// The running dispatcher; dropping it stops it: nothing more is sent, and
/// what was in flight stays before the cursor.
#[derive(Debug)]
pub struct Dispatcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dispatcher {
    pub fn start(out: PathBuf, env: WatchEnv, gates: Arc<Gates>, stats: Arc<Stats>) -> Dispatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let label = target_label(&env);
        let in_flight = env.delivery.in_flight;
        let thread = std::thread::Builder::new()
            .name("dispatcher".into())
            .spawn(move || run(&out, &env, &gates, &flag, &stats))
            .map_err(|e| tracing::error!(error = %e, "cannot start the dispatcher"))
            .ok();
        tracing::info!(target = %label, in_flight, "dispatcher started: fires are delivered downstream");
        Dispatcher { stop, thread }
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn target_label(env: &WatchEnv) -> String {
    match &env.target {
        Some(Target::Webhook(url)) => format!("webhook {}", shown_url(url)),
        Some(Target::Command(argv)) => format!("command {}", argv.first().map(String::as_str).unwrap_or("")),
        None => "none".into(),
    }
}

fn read_cursor(out: &Path) -> u64 {
    std::fs::read_to_string(out.join(CURSOR_FILE)).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// Fires with the same key are delivered one after the other, in order: a
/// sentinel's health changes (a quarantine before its release), an issue's
/// occurrences. Fires with different keys may pass each other.
pub fn order_key(f: &FireEntry) -> String {
    match &f.body {
        FireBody::Occurrence { sig, .. } => format!("issue {sig}"),
        _ => format!("sentinel {}", f.detector),
    }
}

/// One fire read and not yet settled.
struct Slot {
    fire: Arc<FireEntry>,
    sent: Option<bool>,
    settled: bool,
}

/// A fire handed to a delivery thread, with the armed gate as it was.
struct Job {
    fire: Arc<FireEntry>,
    armed: bool,
}

fn run(out: &Path, env: &WatchEnv, gates: &Gates, stop: &Arc<AtomicBool>, stats: &Arc<Stats>) {
    let Some(target) = env.target.clone() else { return };
    let (jobs, results) = pool(&target, env, stop, stats);
    let mut cursor = read_cursor(out);
    stats.cursor.store(cursor, Ordering::SeqCst);
    let mut window: BTreeMap<u64, Slot> = BTreeMap::new();
    let mut read_upto = cursor;
    while !stop.load(Ordering::SeqCst) {
        if window.len() < WINDOW {
            for fire in read_after(out, read_upto, WINDOW - window.len()) {
                read_upto = fire.seq;
                window.insert(fire.seq, Slot { fire: Arc::new(fire), sent: None, settled: false });
            }
        }
        send_ready(&mut window, &jobs, env.delivery.in_flight, gates, stats);
        match results.recv_timeout(POLL) {
            Ok((seq, outcome)) => settle(out, &mut window, seq, outcome, stats),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Ok((seq, outcome)) = results.try_recv() {
            settle(out, &mut window, seq, outcome, stats);
        }
        advance(out, &mut window, &mut cursor, stats);
    }
}

fn read_after(out: &Path, seq: u64, n: usize) -> Vec<FireEntry> {
    match LedgerView::open(out) {
        Ok(Some(v)) => v.fires_after(seq, u32::try_from(n).unwrap_or(u32::MAX)).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the dispatcher cannot read the fire log; trying again");
            Vec::new()
        }),
        _ => Vec::new(),
    }
}

/// Starts the delivery threads: each takes a job, delivers it, says how it ended.
fn pool(
    target: &Target,
    env: &WatchEnv,
    stop: &Arc<AtomicBool>,
    stats: &Arc<Stats>,
) -> (Sender<Job>, Receiver<(u64, Outcome)>) {
    let (job_tx, job_rx) = std::sync::mpsc::channel::<Job>();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let job_rx = Arc::new(Mutex::new(job_rx));
    for i in 0..env.delivery.in_flight {
        let (jobs, done, target, delivery, stop) =
            (Arc::clone(&job_rx), done_tx.clone(), target.clone(), env.delivery.clone(), Arc::clone(stop));
        let stats = Arc::clone(stats);
        let spawned = std::thread::Builder::new().name(format!("deliver-{i}")).spawn(move || {
            loop {
                let job = jobs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv();
                let Ok(job) = job else { return };
                let d = Delivery::of(&job.fire, job.armed);
                let outcome = deliver_with_retries(&target, &d, &delivery, &stop, &stats.retried);
                if done.send((job.fire.seq, outcome)).is_err() {
                    return;
                }
            }
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start a delivery thread");
        }
    }
    (job_tx, done_rx)
}

/// Hands out, oldest first, every fire whose key has no older fire still
/// unsettled, while fewer than `in_flight` are out.
fn send_ready(window: &mut BTreeMap<u64, Slot>, jobs: &Sender<Job>, in_flight: usize, gates: &Gates, stats: &Stats) {
    let mut held: HashSet<String> = HashSet::new();
    for slot in window.values_mut().filter(|s| !s.settled) {
        let key = order_key(&slot.fire);
        let free = !held.contains(&key);
        held.insert(key);
        if !free || slot.sent.is_some() {
            continue;
        }
        if stats.in_flight.load(Ordering::SeqCst) >= in_flight {
            return;
        }
        let armed = gates.armed();
        if jobs.send(Job { fire: Arc::clone(&slot.fire), armed }).is_ok() {
            slot.sent = Some(armed);
            stats.in_flight.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn settle(out: &Path, window: &mut BTreeMap<u64, Slot>, seq: u64, outcome: Outcome, stats: &Stats) {
    stats.in_flight.fetch_sub(1, Ordering::SeqCst);
    let Some(slot) = window.get_mut(&seq) else { return };
    match outcome {
        Outcome::Delivered => {
            slot.settled = true;
            stats.delivered.fetch_add(1, Ordering::SeqCst);
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            stats.last_delivered_ms.store(now.map_or(0, |d| d.as_millis() as i64), Ordering::SeqCst);
        }
        Outcome::Failed(last) => {
            dead_letter(out, &Delivery::of(&slot.fire, slot.sent.unwrap_or(false)), &last);
            slot.settled = true;
            stats.dead_lettered.fetch_add(1, Ordering::SeqCst);
        }
        // Not settled: it stays before the cursor for the next start.
        Outcome::Stopped => slot.sent = None,
    }
}

/// Moves the cursor over the settled fires at the front of the window.
fn advance(out: &Path, window: &mut BTreeMap<u64, Slot>, cursor: &mut u64, stats: &Stats) {
    let before = *cursor;
    while let Some(entry) = window.first_entry() {
        if !entry.get().settled {
            break;
        }
        *cursor = *entry.key();
        entry.remove();
    }
    if *cursor == before {
        return;
    }
    stats.cursor.store(*cursor, Ordering::SeqCst);
    if let Err(e) = crate::base::private_fs::write_atomic(&out.join(CURSOR_FILE), cursor.to_string().as_bytes()) {
        tracing::warn!(error = %e, "cannot store the dispatcher's cursor; a restart sends some fires again");
    }
}

/// One line per fire no attempt delivered: the delivery and the last error.
fn dead_letter(out: &Path, d: &Delivery<'_>, error: &str) {
    // One write of the whole line: `writeln!` on a file writes a formatted
    // value piece by piece, and a reader tailing the file saw half a line.
    let line = format!("{}\n", serde_json::json!({ "deadAt": super::reads::now_ms(), "error": error, "delivery": d }));
    let path = out.join(DEAD_LETTER_FILE);
    let appended = crate::base::private_fs::open_append(&path).and_then(|mut f| {
        crate::base::private_fs::restrict(&path);
        f.write_all(line.as_bytes())?;
        f.sync_data()
    });
    match appended {
        Ok(()) => tracing::error!(key = %d.idempotency_key, error, "fire dead-lettered"),
        Err(e) => tracing::error!(key = %d.idempotency_key, error = %e, "cannot write the dead-letter record"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(seq: u64, sig: &str) -> FireEntry {
        let mut f = super::super::deliver::tests::fire(seq, false);
        if let FireBody::Occurrence { sig: named, .. } = &mut f.body {
            *named = sig.into();
        }
        f
    }

    fn window(fires: &[FireEntry]) -> BTreeMap<u64, Slot> {
        fires.iter().map(|f| (f.seq, Slot { fire: Arc::new(f.clone()), sent: None, settled: false })).collect()
    }

    #[test]
    fn fires_with_one_key_go_one_at_a_time_and_others_pass_them_up_to_the_bound() {
        let mut w = window(&[fire(1, "a"), fire(2, "a"), fire(3, "b"), fire(4, "c"), fire(5, "d")]);
        let (tx, rx) = std::sync::mpsc::channel();
        let stats = Stats::default();
        send_ready(&mut w, &tx, 3, &Gates::new(true), &stats);
        let sent: Vec<u64> = rx.try_iter().map(|j| j.fire.seq).collect();
        assert_eq!(sent, [1, 3, 4], "2 waits for 1 (same issue); at most three at once");
        settle(Path::new("/nonexistent"), &mut w, 1, Outcome::Delivered, &stats);
        send_ready(&mut w, &tx, 3, &Gates::new(true), &stats);
        assert_eq!(rx.try_iter().map(|j| j.fire.seq).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn the_cursor_stays_before_a_fire_not_settled_and_a_stop_settles_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = window(&[fire(1, "a"), fire(2, "b"), fire(3, "c")]);
        let stats = Stats::default();
        for s in [1, 2, 3] {
            w.get_mut(&s).unwrap().sent = Some(false);
            stats.in_flight.fetch_add(1, Ordering::SeqCst);
        }
        let mut cursor = 0;
        settle(tmp.path(), &mut w, 1, Outcome::Delivered, &stats);
        settle(tmp.path(), &mut w, 2, Outcome::Stopped, &stats);
        settle(tmp.path(), &mut w, 3, Outcome::Delivered, &stats);
        advance(tmp.path(), &mut w, &mut cursor, &stats);
        assert_eq!(cursor, 1, "2 was stopped, not delivered: the cursor waits before it");
        assert_eq!(read_cursor(tmp.path()), 1);
        assert!(!tmp.path().join(DEAD_LETTER_FILE).exists(), "a stop dead-letters nothing");
        stats.in_flight.fetch_add(1, Ordering::SeqCst);
        settle(tmp.path(), &mut w, 2, Outcome::Failed("status 500".into()), &stats);
        advance(tmp.path(), &mut w, &mut cursor, &stats);
        assert_eq!((cursor, stats.view().dead_lettered, stats.view().delivered), (3, 1, 2));
        let text = std::fs::read_to_string(tmp.path().join(DEAD_LETTER_FILE)).unwrap();
        assert!(text.contains("sentinel-fire-2-abab") && text.contains("status 500"), "{text}");
    }
}
