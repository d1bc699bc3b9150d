//! The real binary at a known point of a scan: the host is mid-read of an
//! HTTP source whose server (this test's) has the request and holds its
//! answer. From there: a signal stops the scan before its commit (exit 0,
//! nothing committed, nothing lost); a second signal exits at once with 1
//! while the read is still held; and on a terminal the held scan draws its
//! progress line, which nothing else does.
//!
//! And mid-commit: the debug build's test rendezvous (`SENTINEL_TEST_PAUSE`,
//! host/src/ledger/count/test_hook.rs) holds the commit inside its transaction, or just
//! after it, until the test has delivered its signals. One signal lets the
//! commit finish (exit 0); a second exits 1 at once, and the ledger is as
//! the last finished scan left it (or, after the transaction, as this one
//! left it, the export finished by the next run), the fire log verifies and
//! the next run counts everything once.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use xtask::datagen::{self, Activity, DataSpec};

use crate::support::*;

/// A bound on a hang, never a threshold a loaded machine could miss.
const HANG: Duration = Duration::from_secs(120);

/// An HTTP JSON endpoint that answers each request only when told: each
/// request's arrival is sent on `arrived`, and its answer waits for a token
/// on `release`.
struct HeldServer {
    port: u16,
    arrived: Receiver<()>,
    release: Sender<()>,
}

impl HeldServer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (arrived_tx, arrived) = channel();
        let (release, release_rx) = channel::<()>();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match conn.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => break,
                    }
                }
                if arrived_tx.send(()).is_err() || release_rx.recv_timeout(HANG).is_err() {
                    return;
                }
                let body = br#"{"depth": 3}"#;
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                r.extend_from_slice(body);
                let _ = conn.write_all(&r);
            }
        });
        HeldServer { port, arrived, release }
    }

    /// Waits until the host's request has arrived: it is now mid-read.
    fn wait_for_request(&self) {
        self.arrived.recv_timeout(HANG).expect("the scan reached the HTTP source");
    }

    fn answer(&self) {
        self.release.send(()).unwrap();
    }
}

/// A data dir with failures, and a config whose HTTP source `queue` (the
/// role queue-depth-watch reads) is served by `server`, with a timeout
/// longer than any hold.
fn setup(s: &Scratch, server: &HeldServer) -> (PathBuf, PathBuf, u64) {
    let data = s.path("data");
    let truth = datagen::generate(&data, &DataSpec::default()).unwrap();
    let config = s.path("sentinel.toml");
    std::fs::write(
        &config,
        format!(
            "[[sources.http]]\nname = \"queue\"\nurl = \"http://127.0.0.1:{}/metrics\"\ntimeout_ms = 600000\njsonpath = \"$.depth\"\n",
            server.port
        ),
    )
    .unwrap();
    (data, config, truth.failures.len() as u64)
}

fn spawn_long_running(detectors: &Path, data: &Path, out: &Path, config: &Path) -> Child {
    let mut c = run_command(detectors, data, out);
    c.args(["--interval", "3600", "--json", "--config"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().expect("sentinel-host runs")
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap();
    assert!(status.success(), "kill {sig}");
}

/// Waits for the child to exit (within [`HANG`]) and returns its exit code
/// and stderr.
fn exit_of(child: Child) -> (Option<i32>, String) {
    let out = crate::support::wait_within(child, HANG);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn tool_error_total(out: &Path) -> u64 {
    issues_of(out, "tool_error").iter().map(|i| i["count"].as_u64().unwrap()).sum()
}

#[test]
fn a_signal_mid_read_stops_the_scan_before_its_commit_and_the_next_run_counts_everything_once() {
    let s = Scratch::new();
    let server = HeldServer::start();
    let (data, config, failures) = setup(&s, &server);
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let child = spawn_long_running(&detectors, &data, &out, &config);
    server.wait_for_request();
    // Mid-read of `queue`: the stop is asked for now, then the read ends.
    signal(&child, "-TERM");
    server.answer();
    let (code, err) = exit_of(child);
    assert_eq!(code, Some(0), "a signal is a clean stop: {err}");
    assert!(!out.join("issues.jsonl").exists(), "the stopped scan committed nothing: {err}");

    // The next run reads the stopped scan's records again: each counted once.
    server.answer();
    let mut c = run_command(&detectors, &data, &out);
    c.args(["--once", "--json", "--config"]).arg(&config);
    let o = run_within(c, HANG);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(tool_error_total(&out), failures, "every failure counted once after the stop");
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let queue = summary["sources"].as_array().unwrap().iter().find(|s| s["name"] == "queue").cloned();
    assert_eq!(queue.map(|q| q["status"].clone()), Some("ok".into()), "{summary:#}");
}

#[test]
fn a_second_signal_exits_at_once_with_1_while_the_read_is_still_held() {
    let s = Scratch::new();
    let server = HeldServer::start();
    let (data, config, _) = setup(&s, &server);
    let out = s.path("out");
    let child = spawn_long_running(&s.detectors_with(&[]), &data, &out, &config);
    server.wait_for_request();
    // Two different signals, so the second is never merged into the first
    // while it is pending; the read stays held throughout.
    signal(&child, "-INT");
    signal(&child, "-TERM");
    let (code, err) = exit_of(child);
    assert_eq!(code, Some(1), "the second signal exits at once with 1: {err}");
    server.answer();
    assert!(!out.join("issues.jsonl").exists(), "nothing committed");
}

/// Runs `sentinel-host run --once` over the held server under `script`
/// (util-linux), whose pseudo-terminal is the command's stdin, stdout and
/// stderr; returns everything the terminal showed and the exit code.
fn on_a_terminal(s: &Scratch, extra: &str) -> (Option<i32>, String) {
    let server = HeldServer::start();
    let (data, config, _) = setup(s, &server);
    let detectors = s.detectors_with(&[]);
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    let cmd = format!(
        "{} run --once {extra} --detectors {} --data-dir {} --out {} --config {} --cache-dir {} --deadline-ms {}",
        quote(Path::new(env!("CARGO_BIN_EXE_sentinel-host"))),
        quote(&detectors),
        quote(&data),
        quote(&s.path(&format!("out{}", extra.replace(' ', "")))),
        quote(&config),
        quote(&shared_cache()),
        TEST_DEADLINE_MS,
    );
    // The binary inherits script's environment: isolated like every other run.
    let child = isolate(&mut Command::new("script"))
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    server.wait_for_request();
    // The scan has read the data dir's sources and now waits on `queue`: held
    // for a second (longer than the line's quiet time), the line is drawn at
    // the next progress, when the answer comes.
    std::thread::sleep(Duration::from_secs(1));
    server.answer();
    let out = crate::support::wait_within(child, HANG);
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_long_scan_on_a_terminal_draws_one_progress_line_and_erases_it() {
    let s = Scratch::new();
    let (code, shown) = on_a_terminal(&s, "");
    assert_eq!(code, Some(0), "{shown}");
    let drawn = shown.find("\r\x1b[2Ksentinel: reading ").unwrap_or_else(|| panic!("no progress line: {shown:?}"));
    assert!(shown[drawn..].contains("records read") && shown[drawn..].contains("detectors running"), "{shown:?}");
    // Erased at the end: an erase follows the last drawing, before the summary.
    let last_draw = shown.rfind("records read").unwrap();
    let summary = shown.find("sentinel: scanned").unwrap_or_else(|| panic!("no summary: {shown:?}"));
    assert!(last_draw < summary, "{shown:?}");
    assert!(shown[last_draw..summary].contains("\r\x1b[2K"), "the line is erased at the end: {shown:?}");
}

#[test]
fn no_progress_line_is_drawn_with_json_or_off_a_terminal() {
    let s = Scratch::new();
    let (code, shown) = on_a_terminal(&s, "--json");
    assert_eq!(code, Some(0), "{shown}");
    assert!(!shown.contains("records read") && !shown.contains('\u{1b}'), "--json draws nothing: {shown:?}");

    // The same held scan with stderr a pipe.
    let s = Scratch::new();
    let server = HeldServer::start();
    let (data, config, _) = setup(&s, &server);
    let mut c = run_command(&s.detectors_with(&[]), &data, &s.path("out"));
    c.args(["--once", "--config"]).arg(&config);
    let child = c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    server.wait_for_request();
    std::thread::sleep(Duration::from_secs(1));
    server.answer();
    let o = crate::support::wait_within(child, HANG);
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("records read") && !err.contains('\u{1b}'), "nothing drawn off a terminal: {err:?}");
}

/// The two failures a scan finds after the first one committed.
const LATE: [(&str, &str); 2] = [("late-1", "no layer 12 in /a/b"), ("late-2", "queue 9 is full")];

/// A data dir, a first scan committed over it, then two more failures: the
/// next scan has new occurrences (and fire log entries) to commit. Returns
/// (data, detectors, out, every failure in the data dir).
fn committed_then_more(s: &Scratch) -> (PathBuf, PathBuf, PathBuf, u64) {
    let data = s.path("data");
    let spec = DataSpec::default();
    let truth = datagen::generate(&data, &spec).unwrap();
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    scan(&detectors, &data, &out);
    assert_eq!(tool_error_total(&out), truth.failures.len() as u64);
    for (i, (id, output)) in LATE.iter().enumerate() {
        let at = spec.start_ms + 10_000_000 + i as i64;
        datagen::insert_activity(&data, &Activity::failed(id, at, "t-late", "mcp__agents__load_layer", output))
            .unwrap();
    }
    (data, detectors, out, (truth.failures.len() + LATE.len()) as u64)
}

/// The long-running mode, its commit held at `point` (a folder of the
/// scratch is the rendezvous). Returns the child once it is paused there.
fn paused_at(s: &Scratch, point: &str, detectors: &Path, data: &Path, out: &Path) -> Child {
    let rendezvous = s.path("rendezvous");
    std::fs::create_dir_all(&rendezvous).unwrap();
    let mut c = run_command(detectors, data, out);
    c.args(["--interval", "3600", "--json"])
        .env(sentinel_host::ledger::count::test_hook::VAR, format!("{point}:{}", rendezvous.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("sentinel-host runs");
    let paused = rendezvous.join(format!("{point}.paused"));
    // A release build has no rendezvous: this fails (the child exits on the
    // kill) rather than pass without having paused.
    wait_for(120, &format!("the commit to pause at {point} (a debug build)"), &mut child, || paused.exists());
    child
}

fn release(s: &Scratch, point: &str) {
    std::fs::write(s.path("rendezvous").join(format!("{point}.go")), b"").unwrap();
}

/// Sends `sig` (`INT` or `TERM`) and waits until the kernel has delivered it
/// (it is no longer pending in /proc/PID/status): the handler has run, so
/// whatever the test does next happens after the signal was seen.
fn deliver(child: &Child, sig: &str) {
    let bit = match sig {
        "INT" => 1u64 << (2 - 1),
        "TERM" => 1u64 << (15 - 1),
        other => panic!("no signal {other}"),
    };
    signal(child, &format!("-{sig}"));
    let status = format!("/proc/{}/status", child.id());
    let started = std::time::Instant::now();
    loop {
        let Ok(text) = std::fs::read_to_string(&status) else { return }; // already gone
        let pending = ["SigPnd:", "ShdPnd:"].iter().any(|field| {
            text.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
                .is_some_and(|mask| mask & bit != 0)
        });
        if !pending {
            return;
        }
        assert!(started.elapsed() < HANG, "SIG{sig} still pending after {HANG:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every file of the output folder but SQLite's own `-wal` and `-shm`
/// (which a killed connection leaves), with its bytes.
fn exported(out: &Path) -> Vec<(String, Vec<u8>)> {
    listing(out)
        .into_iter()
        .filter(|n| !n.ends_with("-wal") && !n.ends_with("-shm") && n != "ledger.db" && n != "ledger.lock")
        .map(|n| {
            let bytes = std::fs::read(out.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

/// `sentinel-host verify --out OUT` exits 0.
fn assert_fire_log_verifies(out: &Path) {
    let o = sentinel_host().args(["verify", "--out"]).arg(out).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "verify: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A `run --once --json --no-fast-path` that must succeed; its summary.
fn rescan(detectors: &Path, data: &Path, out: &Path) -> serde_json::Value {
    let o = run(detectors, data, out, &["--no-fast-path"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn a_signal_inside_the_commit_transaction_lets_the_commit_finish_and_exits_0() {
    let s = Scratch::new();
    let (data, detectors, out, failures) = committed_then_more(&s);
    let child = paused_at(&s, "commit-transaction", &detectors, &data, &out);
    deliver(&child, "TERM");
    // Seen mid-transaction, and still there: the commit goes on.
    release(&s, "commit-transaction");
    let out_of = crate::support::wait_within(child, HANG);
    let err = String::from_utf8_lossy(&out_of.stderr);
    assert_eq!(out_of.status.code(), Some(0), "{err}");
    let summary: serde_json::Value = serde_json::from_slice(&out_of.stdout)
        .unwrap_or_else(|e| panic!("one summary, the finished scan's: {e}: {err}"));
    assert_eq!(summary["issues"]["counted"], LATE.len(), "{summary:#}");
    assert_eq!(tool_error_total(&out), failures, "the late failures committed and exported");
    assert_fire_log_verifies(&out);
    let again = rescan(&detectors, &data, &out);
    assert_eq!(again["issues"]["counted"], 0, "nothing counted twice: {again:#}");
    assert_eq!(tool_error_total(&out), failures);
}

#[test]
fn a_second_signal_inside_the_commit_transaction_exits_1_and_the_transaction_rolls_back() {
    let s = Scratch::new();
    let (data, detectors, out, failures) = committed_then_more(&s);
    let before = exported(&out);
    assert!(before.iter().any(|(n, _)| n == "issues.jsonl") && before.iter().any(|(n, _)| n.starts_with("fires-")));
    let child = paused_at(&s, "commit-transaction", &detectors, &data, &out);
    deliver(&child, "INT");
    deliver(&child, "TERM");
    let (code, err) = exit_of(child);
    assert_eq!(code, Some(1), "the second signal exits at once with 1: {err}");
    // The commit is abandoned before it could finish: it was never released.
    assert_eq!(
        exported(&out),
        before,
        "issues.jsonl and the fire log as the first scan left them, no file half written"
    );
    assert_fire_log_verifies(&out);
    let summary = rescan(&detectors, &data, &out);
    assert_eq!(summary["issues"]["counted"], LATE.len(), "the rolled-back occurrences counted now: {summary:#}");
    assert_eq!(tool_error_total(&out), failures, "every failure counted once");
    assert_fire_log_verifies(&out);
}

#[test]
fn a_second_signal_after_the_transaction_exits_1_and_the_next_run_finishes_the_export() {
    let s = Scratch::new();
    let (data, detectors, out, failures) = committed_then_more(&s);
    let before = exported(&out);
    let child = paused_at(&s, "commit-export", &detectors, &data, &out);
    deliver(&child, "INT");
    deliver(&child, "TERM");
    let (code, err) = exit_of(child);
    assert_eq!(code, Some(1), "{err}");
    // Committed, not yet exported: the files are still the first scan's, whole.
    assert_eq!(exported(&out), before, "no file half written");
    assert_fire_log_verifies(&out);
    // The next run (the data unchanged since the committed scan: the fast
    // path) writes the pending export and counts nothing again.
    let o = run(&detectors, &data, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["issues"]["counted"], 0, "{summary:#}");
    assert_eq!(tool_error_total(&out), failures, "the committed scan's issues exported");
    assert_fire_log_verifies(&out);
    let fires: usize = listing(&out)
        .iter()
        .filter(|n| n.starts_with("fires-"))
        .map(|n| std::fs::read_to_string(out.join(n)).unwrap().lines().count())
        .sum();
    let occurrences: u64 = issues(&out).iter().map(|i| i["count"].as_u64().unwrap()).sum();
    assert_eq!(fires as u64, occurrences, "one fire per counted occurrence, the late ones exported too");
}
