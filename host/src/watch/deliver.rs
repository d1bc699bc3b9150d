//! One fire's delivery downstream: what is sent, each attempt and its
//! retries.
//!
//! It owns the body and headers of a delivery ([`Delivery`]), one attempt
//! to a webhook (an HTTP POST with a connect timeout and a whole-attempt
//! timeout of its own, no redirect, no proxy) or to a command (run with a
//! cleared environment: `PATH`, `HOME`, `LANG` and the documented
//! `SENTINEL_*` variables, nothing else, so no token of this process ever
//! reaches it; killed at the attempt timeout), the retries with a doubling
//! wait, and how a webhook URL is shown in a log line (no userinfo, no
//! query). Every wait and attempt looks at the stop flag: a stop ends the
//! delivery as [`Outcome::Stopped`], never as a failure. It never moves the
//! cursor and never writes a dead letter: the dispatcher does.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::gates::{DeliveryEnv, Target};
use crate::firelog::FireEntry;

/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How often a wait or a running command looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(20);
/// The variables a command keeps from this process's environment.
pub const KEPT_VARIABLES: [&str; 3] = ["PATH", "HOME", "LANG"];

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

/// How one fire's delivery ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// Every attempt failed; the last error.
    Failed(String),
    /// The dispatcher is stopping: not delivered, and not a failure.
    Stopped,
}

/// A webhook URL as a log line may show it: scheme, host, port and path;
/// no userinfo, no query, no fragment.
pub fn shown_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let path = tail.split(['?', '#']).next().unwrap_or("");
    format!("{scheme}://{host}{path}")
}

/// Sleeps `wait`, or less when `stop` is set; whether it slept it all.
fn pause(wait: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(STOP_CHECK.min(until.saturating_duration_since(Instant::now())));
    }
    !stop.load(Ordering::SeqCst)
}

/// The first attempt, then `env.retries` more with a doubling wait.
pub fn deliver_with_retries(
    target: &Target,
    d: &Delivery<'_>,
    env: &DeliveryEnv,
    stop: &AtomicBool,
    retried: &AtomicU64,
) -> Outcome {
    let mut wait = Duration::from_millis(env.backoff_ms.max(1));
    let mut last = String::new();
    for attempt in 0..=env.retries {
        if attempt > 0 {
            if !pause(wait, stop) {
                return Outcome::Stopped;
            }
            wait = (wait * 2).min(MAX_BACKOFF);
            retried.fetch_add(1, Ordering::SeqCst);
        }
        match attempt_once(target, d, env, stop) {
            Ok(()) => return Outcome::Delivered,
            Err(e) => {
                tracing::warn!(key = %d.idempotency_key, attempt, error = %e, "delivery failed");
                last = e;
            }
        }
        if stop.load(Ordering::SeqCst) {
            return Outcome::Stopped;
        }
    }
    Outcome::Failed(last)
}

fn attempt_once(target: &Target, d: &Delivery<'_>, env: &DeliveryEnv, stop: &AtomicBool) -> Result<(), String> {
    let body = serde_json::to_vec(d).map_err(|e| e.to_string())?;
    match target {
        Target::Webhook(url) => post(url, d, &body, env).map_err(|e| e.replace(url.as_str(), &shown_url(url))),
        Target::Command(argv) => run_command(argv, d, &body, Duration::from_millis(env.attempt_timeout_ms), stop),
    }
}

fn post(url: &str, d: &Delivery<'_>, body: &[u8], env: &DeliveryEnv) -> Result<(), String> {
    let config = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_millis(env.connect_timeout_ms)))
        .timeout_global(Some(Duration::from_millis(env.attempt_timeout_ms)))
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .build();
    let response = ureq::Agent::new_with_config(config)
        .post(url)
        .header("content-type", "application/json")
        .header("idempotency-key", d.idempotency_key.as_str())
        .header("x-sentinel-probation", if d.fire.probation { "true" } else { "false" })
        .send(body)
        .map_err(|e| format!("request failed: {e}"))?;
    let status = response.status();
    if status.is_success() { Ok(()) } else { Err(format!("status {}", status.as_u16())) }
}

fn run_command(
    argv: &[String],
    d: &Delivery<'_>,
    body: &[u8],
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<(), String> {
    use std::process::{Command, Stdio};
    let (program, args) = argv.split_first().ok_or("no command")?;
    let mut command = Command::new(program);
    command.args(args).env_clear();
    for name in KEPT_VARIABLES {
        if let Some(v) = std::env::var_os(name) {
            command.env(name, v);
        }
    }
    let mut child = command
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
    let started = Instant::now();
    loop {
        let over = started.elapsed() > timeout;
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("{program} exited with {status}")),
            Ok(None) if over || stop.load(Ordering::SeqCst) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(if over {
                    format!("{program} ran longer than {} ms", timeout.as_millis())
                } else {
                    format!("{program} stopped: the dispatcher is stopping")
                });
            }
            Ok(None) => std::thread::sleep(STOP_CHECK),
            Err(e) => return Err(format!("cannot wait for {program}: {e}")),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::firelog::FireBody;
    use crate::model::observation::{Origin, Severity};

    pub(crate) fn fire(seq: u64, probation: bool) -> FireEntry {
        FireEntry {
            seq,
            recorded_at: 1,
            at: 1,
            detector: "cost".into(),
            detector_version: None,
            probation,
            body: FireBody::Occurrence {
                kind: "cost".into(),
                sig: "cost:0".into(),
                origin: Origin::Harness,
                severity: Severity::Low,
                tool: None,
                bot_id: None,
                thread_id: None,
                turn_id: None,
                evidence_source: "messages".into(),
                evidence_id: "m1".into(),
            },
            prev: "0".repeat(64),
            hash: "ab".repeat(32),
        }
    }

    fn quick() -> DeliveryEnv {
        DeliveryEnv { retries: 2, backoff_ms: 1, attempt_timeout_ms: 300, ..Default::default() }
    }

    #[test]
    fn a_probation_fire_is_marked_downstream_and_keys_are_stable_per_fire() {
        let f = fire(7, true);
        let d = Delivery::of(&f, false);
        assert_eq!(d.marker, "[PROBATION] ");
        assert!(d.summary.starts_with("[PROBATION] occurrence by cost"), "{}", d.summary);
        assert_eq!(d.idempotency_key, Delivery::of(&f, true).idempotency_key);
        assert_eq!(Delivery::of(&fire(7, false), false).marker, "");
    }

    #[test]
    fn a_command_that_fails_every_time_fails_after_its_retries_counted_and_one_that_succeeds_is_delivered() {
        let f = fire(7, false);
        let d = Delivery::of(&f, false);
        let (no, retried) = (AtomicBool::new(false), AtomicU64::new(0));
        let out = deliver_with_retries(&Target::Command(vec!["false".into()]), &d, &quick(), &no, &retried);
        assert!(matches!(out, Outcome::Failed(ref e) if e.contains("exited")), "{out:?}");
        assert_eq!(retried.load(Ordering::SeqCst), 2, "each retry after the first attempt is counted");
        let out = deliver_with_retries(&Target::Command(vec!["true".into()]), &d, &quick(), &no, &retried);
        assert_eq!(out, Outcome::Delivered);
        assert_eq!(retried.load(Ordering::SeqCst), 2, "a first attempt that delivers is no retry");
    }

    #[test]
    fn a_stop_during_the_retries_is_stopped_not_failed() {
        let f = fire(7, false);
        let d = Delivery::of(&f, false);
        let env = DeliveryEnv { retries: 1000, backoff_ms: 1000, ..quick() };
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                stop.store(true, Ordering::SeqCst);
            });
            assert_eq!(
                deliver_with_retries(&Target::Command(vec!["false".into()]), &d, &env, &stop, &AtomicU64::new(0)),
                Outcome::Stopped
            );
        });
    }

    #[test]
    fn a_webhook_that_accepts_and_never_answers_ends_the_attempt_at_its_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://user:secret@{}/hook?token=secret", listener.local_addr().unwrap());
        // Accepted (the kernel's backlog), read by no one, never answered.
        let f = fire(7, false);
        let out = deliver_with_retries(
            &Target::Webhook(url),
            &Delivery::of(&f, false),
            &quick(),
            &AtomicBool::new(false),
            &AtomicU64::new(0),
        );
        let Outcome::Failed(e) = out else { panic!("{out:?}") };
        assert!(!e.contains("secret"), "the error names no credential: {e}");
        drop(listener);
    }

    #[test]
    fn a_webhook_url_is_shown_without_userinfo_or_query() {
        assert_eq!(shown_url("http://u:p@host:8080/hook?token=x#f"), "http://host:8080/hook");
        assert_eq!(shown_url("http://host?k=v"), "http://host");
        assert_eq!(shown_url("http://a@b@host/p"), "http://host/p");
    }
}
