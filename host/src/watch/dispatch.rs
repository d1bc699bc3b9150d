//! The dispatcher: behind `WATCH_DISPATCHER_ENABLED`, every fire of the log
//! delivered downstream at least once, to a webhook or a command.
//!
//! It owns one thread that tails the fire log through a read-only
//! [`LedgerView`] (never the writer), its cursor (`dispatch.cursor`, the
//! last sequence number delivered or dead-lettered, written atomically after
//! each), the delivery (an HTTP POST with an `Idempotency-Key` per fire, or
//! a command with the fire on its stdin), retries with a doubling backoff,
//! and the dead-letter record (`dispatch-dead-letter.ndjson`) for a fire no
//! attempt delivered. A fire from a sentinel on probation goes downstream
//! marked `[PROBATION]`, never dropped. Delivery is at least once: a crash
//! between a delivery and its cursor sends that fire again with the same
//! key. It never decides what a fire is, never writes the ledger and never
//! arms anything: the armed gate is only reported with each fire.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use super::gates::{Gates, Target, WatchEnv};
use crate::firelog::FireEntry;
use crate::ledger::LedgerView;

pub const CURSOR_FILE: &str = "dispatch.cursor";
pub const DEAD_LETTER_FILE: &str = "dispatch-dead-letter.ndjson";
/// How often the log is looked at for new fires.
const POLL: Duration = Duration::from_millis(200);
/// Fires read per look.
const BATCH: u32 = 100;
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// What goes downstream for one fire.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery<'a> {
    /// The same for every attempt at this fire: `sentinel-fire-{seq}-{hash prefix}`.
    pub idempotency_key: String,
    /// `[PROBATION] ` for a fire from a sentinel on probation, else empty.
    pub marker: &'static str,
    /// One line: marker, type, sentinel, kind.
    pub summary: String,
    /// The third gate's state when this was sent; downstream acts only when true.
    pub action_production_armed: bool,
    pub fire: &'a FireEntry,
}

pub fn idempotency_key(f: &FireEntry) -> String {
    format!("sentinel-fire-{}-{}", f.seq, &f.hash[..16.min(f.hash.len())])
}

impl<'a> Delivery<'a> {
    pub fn of(fire: &'a FireEntry, armed: bool) -> Self {
        Delivery {
            idempotency_key: idempotency_key(fire),
            marker: if fire.probation { crate::firelog::PROBATION_MARKER } else { "" },
            summary: fire.summary(),
            action_production_armed: armed,
            fire,
        }
    }
}

/// The running dispatcher; dropping it stops its thread after the attempt in flight.
#[derive(Debug)]
pub struct Dispatcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dispatcher {
    pub fn start(out: PathBuf, env: WatchEnv, gates: Arc<Gates>) -> Dispatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let label = target_label(&env);
        let thread = std::thread::Builder::new()
            .name("dispatcher".into())
            .spawn(move || run(&out, &env, &gates, &flag))
            .map_err(|e| tracing::error!(error = %e, "cannot start the dispatcher"))
            .ok();
        tracing::info!(target = %label, "dispatcher started: fires are delivered downstream");
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
        Some(Target::Webhook(url)) => format!("webhook {url}"),
        Some(Target::Command(argv)) => format!("command {}", argv.first().map(String::as_str).unwrap_or("")),
        None => "none".into(),
    }
}

fn read_cursor(out: &Path) -> u64 {
    std::fs::read_to_string(out.join(CURSOR_FILE)).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

fn run(out: &Path, env: &WatchEnv, gates: &Gates, stop: &AtomicBool) {
    let Some(target) = env.target.clone() else { return };
    let mut cursor = read_cursor(out);
    while !stop.load(Ordering::SeqCst) {
        let fires = match LedgerView::open(out) {
            Ok(Some(v)) => v.fires_after(cursor, BATCH).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "the dispatcher cannot read the fire log; trying again");
                Vec::new()
            }),
            _ => Vec::new(),
        };
        if fires.is_empty() {
            std::thread::sleep(POLL);
            continue;
        }
        for fire in &fires {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let delivery = Delivery::of(fire, gates.armed());
            if let Err(last) = deliver_with_retries(&target, &delivery, env, stop) {
                dead_letter(out, &delivery, &last);
            }
            cursor = fire.seq;
            if let Err(e) = crate::base::private_fs::write_atomic(&out.join(CURSOR_FILE), cursor.to_string().as_bytes())
            {
                tracing::warn!(error = %e, "cannot store the dispatcher's cursor; a restart sends some fires again");
            }
        }
    }
}

/// The first attempt, then `env.retries` more with a doubling wait; the
/// last error when none succeeded.
fn deliver_with_retries(target: &Target, d: &Delivery<'_>, env: &WatchEnv, stop: &AtomicBool) -> Result<(), String> {
    let mut wait = Duration::from_millis(env.backoff_ms.max(1));
    let mut last = String::new();
    for attempt in 0..=env.retries {
        if attempt > 0 {
            std::thread::sleep(wait);
            wait = (wait * 2).min(MAX_BACKOFF);
        }
        match deliver(target, d) {
            Ok(()) => return Ok(()),
            Err(e) => {
                tracing::warn!(key = %d.idempotency_key, attempt, error = %e, "delivery failed");
                last = e;
            }
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
    }
    Err(last)
}

fn deliver(target: &Target, d: &Delivery<'_>) -> Result<(), String> {
    let body = serde_json::to_vec(d).map_err(|e| e.to_string())?;
    match target {
        Target::Webhook(url) => {
            let config = ureq::Agent::config_builder()
                .timeout_global(Some(ATTEMPT_TIMEOUT))
                .http_status_as_error(false)
                .max_redirects(0)
                .proxy(None)
                .build();
            let agent = ureq::Agent::new_with_config(config);
            let response = agent
                .post(url.as_str())
                .header("content-type", "application/json")
                .header("idempotency-key", d.idempotency_key.as_str())
                .header("x-sentinel-probation", if d.fire.probation { "true" } else { "false" })
                .send(&body[..])
                .map_err(|e| format!("request failed: {e}"))?;
            let status = response.status();
            if status.is_success() { Ok(()) } else { Err(format!("status {}", status.as_u16())) }
        }
        Target::Command(argv) => run_command(argv, d, &body),
    }
}

fn run_command(argv: &[String], d: &Delivery<'_>, body: &[u8]) -> Result<(), String> {
    use std::process::{Command, Stdio};
    let (program, args) = argv.split_first().ok_or("no command")?;
    let mut child = Command::new(program)
        .args(args)
        .env("SENTINEL_IDEMPOTENCY_KEY", &d.idempotency_key)
        .env("SENTINEL_PROBATION", if d.fire.probation { "1" } else { "0" })
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(body);
    }
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("{program} exited with {status}")),
            Ok(None) if started.elapsed() > ATTEMPT_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{program} ran longer than {} s", ATTEMPT_TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for {program}: {e}")),
        }
    }
}

/// One line per fire no attempt delivered: the delivery and the last error.
fn dead_letter(out: &Path, d: &Delivery<'_>, error: &str) {
    // One write of the whole line: `writeln!` on a file writes a formatted
    // value piece by piece, and a reader tailing the file saw half a line.
    let line = format!("{}\n", serde_json::json!({ "deadAt": super::reads::now_ms(), "error": error, "delivery": d }));
    let path = out.join(DEAD_LETTER_FILE);
    let appended = std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| {
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
    use crate::firelog::FireType;

    fn fire(probation: bool) -> FireEntry {
        FireEntry {
            seq: 7,
            fire_type: FireType::Occurrence,
            recorded_at: 1,
            at: 1,
            detector: "cost".into(),
            detector_version: None,
            kind: Some("cost".into()),
            sig: None,
            origin: None,
            severity: None,
            tool: None,
            bot_id: None,
            thread_id: None,
            turn_id: None,
            evidence_source: None,
            evidence_id: None,
            probation,
            reason: None,
            prev: "0".repeat(64),
            hash: "ab".repeat(32),
        }
    }

    #[test]
    fn a_probation_fire_is_marked_downstream_and_keys_are_stable_per_fire() {
        let f = fire(true);
        let d = Delivery::of(&f, false);
        assert_eq!(d.marker, "[PROBATION] ");
        assert!(d.summary.starts_with("[PROBATION] occurrence by cost"), "{}", d.summary);
        assert_eq!(d.idempotency_key, Delivery::of(&f, true).idempotency_key);
        assert_eq!(Delivery::of(&fire(false), false).marker, "");
    }

    #[test]
    fn a_command_that_fails_every_time_is_dead_lettered_after_its_retries() {
        let tmp = tempfile::tempdir().unwrap();
        let f = fire(false);
        let d = Delivery::of(&f, false);
        let env = WatchEnv { retries: 2, backoff_ms: 1, ..Default::default() };
        let target = Target::Command(vec!["false".into()]);
        let err = deliver_with_retries(&target, &d, &env, &AtomicBool::new(false)).unwrap_err();
        dead_letter(tmp.path(), &d, &err);
        let text = std::fs::read_to_string(tmp.path().join(DEAD_LETTER_FILE)).unwrap();
        assert!(text.contains("sentinel-fire-7-abab"), "{text}");
        assert!(deliver_with_retries(&Target::Command(vec!["true".into()]), &d, &env, &AtomicBool::new(false)).is_ok());
    }
}
