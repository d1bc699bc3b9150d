//! The fleet shipper's faults against a real `nats-server` on loopback
//! (issue 36's cases 2, 3, 4 and 6, and a server back without the tail it
//! acked; docs/fleet.md): after each, the independent consumer
//! (`fleet_consumer.py`) finds exactly one message per fire, chained, the
//! last one the local head (or, while the stream is full, an exact prefix).
//! It owns the faults and their known points (the cursor file, the
//! debug-build rendezvous, `/v1/fleet`); never a timer where a state can be
//! polled (the one sleep is the duplicate window itself, while the server
//! is down).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::fleet::*;
use crate::fleet_proxy::{AckThief, Theft};
use crate::support::*;

/// The `D` of the `fleet: cursor N, backlog M, D duplicate(s)` line.
fn duplicates(stderr: &[u8]) -> u64 {
    let said = String::from_utf8_lossy(stderr);
    let line = said.lines().find(|l| l.starts_with("fleet: cursor")).unwrap_or_else(|| panic!("{said}"));
    line.split(", ").nth(2).and_then(|d| d.split(' ').next()).and_then(|d| d.parse().ok()).unwrap()
}

fn data_with(s: &Scratch, failures: usize) -> PathBuf {
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    add_failures(&data, 0, failures);
    data
}

#[test]
fn fleet_a_lost_ack_is_sent_again_and_the_server_stores_it_once() {
    let s = Scratch::new();
    let server = NatsServer::start(&s.path("nats"));
    // The ack of entry 2 swallowed, the connection cut in place of entry 4's.
    let thief = AckThief::start(server.port, vec![(2, Theft::Swallow), (4, Theft::Cut)]);
    let config = config_at(&s, "thief", &thief.url(), "once_budget_secs = 60\n");
    let detectors = s.detectors_with(&[]);
    let (data, out) = (data_with(&s, 6), s.path("out"));
    let o = run_once(&detectors, &data, &out, &config);
    assert_eq!(thief.stolen(), 2, "both acks were lost: {o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("backlog 0"), "{o:?}");
    consumer_checks(&server, &out);
    assert!(duplicates(&o.stderr) >= 1, "the resend was a server-reported duplicate: {o:?}");
}

/// Fires in the burst of case 2: enough that the kill lands mid-stream
/// (the shipper acks one at a time), few enough for a debug build.
const BURST: usize = 20_000;

/// `count` failed tool calls in one transaction (one fire each).
fn bulk_failures(data: &Path, count: usize) {
    let mut conn = xtask::datagen::messages_db(data).unwrap();
    let tx = conn.transaction().unwrap();
    for i in 0..count {
        let body = serde_json::json!({"turnId": "t1", "from": {"botId": "bot-x"},
            "tool": {"name": "Bash", "ok": false, "output": format!("no layer {i} in /p{i}"), "exitCode": 1}});
        tx.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?1, 'th-x', ?2, 'activity', ?3)",
            rusqlite::params![format!("m{i}"), 1_000 + i as i64, body.to_string()],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn fleet_a_server_killed_mid_burst_and_restarted_on_its_store_holds_the_log_exactly() {
    let s = Scratch::new();
    let store = s.path("nats");
    let server = NatsServer::start(&store);
    let port = server.port;
    let extra = format!("once_budget_secs = 900\n\n[limits]\nfires_per_scan = {}\n", 2 * BURST);
    let config = config_at(&s, "fleet", &server.url(), &extra);
    let detectors = s.detectors_with(&[]);
    let (data, out) = (s.path("data"), s.path("out"));
    bulk_failures(&data, BURST);
    let mut c = run_command(&detectors, &data, &out);
    c.args(["--once", "--json", "--config"]).arg(&config);
    let mut child = c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    // The known point: the server has acked a tenth of the burst.
    wait_for(900, "a tenth of the burst acked", &mut child, || {
        sentinel_host::fleet::cursor::read(&out) >= (BURST / 10) as u64
    });
    let killed_at = sentinel_host::fleet::cursor::read(&out);
    server.kill9();
    let server = NatsServer::start_on(&store, port);
    let o = wait_within(child, Duration::from_secs(900));
    assert!(o.status.success(), "{o:?}");
    let fires = fire_entries(&out).len();
    assert!(fires >= BURST && (killed_at as usize) < fires, "killed mid-stream at {killed_at} of {fires}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("backlog 0"), "{}", String::from_utf8_lossy(&o.stderr));
    consumer_checks(&server, &out);
}

/// The duplicate window of case 4, seconds: short, so the outage outlasts it.
const WINDOW: u64 = 2;

#[test]
fn fleet_an_outage_longer_than_the_duplicate_window_with_a_restart_in_it_ships_no_duplicate_and_no_gap() {
    let s = Scratch::new();
    let store = s.path("nats");
    let server = NatsServer::start(&store);
    let url = server.url();
    let config = config_at(&s, "fleet", &url, &format!("once_budget_secs = 60\nduplicate_window_secs = {WINDOW}\n"));
    let detectors = s.detectors_with(&[]);
    let (data, out, meet) = (data_with(&s, 3), s.path("out"), s.path("meet"));
    std::fs::create_dir_all(&meet).unwrap();
    // (1) Killed between the server's ack of entry 1 and the cursor.
    let mut c = run_command(&detectors, &data, &out);
    c.args(["--once", "--json", "--config"]).arg(&config).stdout(Stdio::null()).stderr(Stdio::null());
    c.env(sentinel_host::ledger::count::test_hook::VAR, format!("fleet-acked:{}", meet.display()));
    let mut child = c.spawn().unwrap();
    wait_for(300, "the shipper holds at its first ack", &mut child, || meet.join("fleet-acked.paused").exists());
    let acked = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(sentinel_host::fleet::cursor::read(&out), 0, "killed after the ack, before the cursor");
    // (2) The outage, and a sentinel restarted inside it: new fires, kept.
    let port = server.port;
    server.kill9();
    add_failures(&data, 10, 3);
    let down = config_at(&s, "down", &url, &format!("once_budget_secs = 1\nduplicate_window_secs = {WINDOW}\n"));
    let o = run_once(&detectors, &data, &out, &down);
    let fires = fire_entries(&out).len();
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("cursor 0, backlog {fires},")), "{o:?}");
    // (3) The outage outlasts the window (the fault is time itself; the
    // server is down, so there is nothing to poll).
    std::thread::sleep((acked + Duration::from_secs(WINDOW + 1)).saturating_duration_since(Instant::now()));
    // (4) The server back on its store and port: entry 1 is past its window,
    // so only the reconcile keeps it from being stored twice.
    let server = NatsServer::start_on(&store, port);
    let o = run_once(&detectors, &data, &out, &config);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains(&format!("cursor {fires}, backlog 0")), "{said}");
    consumer_checks(&server, &out);
    assert_eq!(duplicates(&o.stderr), 0, "nothing was sent twice: {said}");
}

/// Room in the stream of case 6 for two entries (about 500 bytes each, and
/// JetStream's ~150 bytes of subject, id and framing), not three.
const ROOM: i64 = 1600;

/// `SENTINEL_FIRES`' `max_bytes` set to `to`, as an operator's
/// `nats stream edit` would.
fn set_max_bytes(url: &str, to: i64) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
        let mut stream = js.get_stream("SENTINEL_FIRES").await.unwrap();
        let mut config = stream.info().await.unwrap().config.clone();
        config.max_bytes = to;
        js.update_stream(config).await.unwrap();
    });
}

#[test]
fn fleet_a_full_stream_holds_the_backlog_back_and_raising_its_limit_drains_it() {
    let s = Scratch::new();
    let server = NatsServer::start(&s.path("nats"));
    let config = config_at(&s, "fleet", &server.url(), &format!("max_bytes = {ROOM}\n"));
    let summary = s.path("stdout.log");
    let served = crate::watch::serve_with(s, &[], &["--config", config.to_str().unwrap()]);
    let fleet = || crate::watch::call(&served, "GET", "/v1/fleet", None, None).2;
    crate::watch::until(&served, "the stream full, the backlog held back", || {
        let b = fleet();
        b["full"] == true && b["backlog"].as_u64() > Some(0)
    });
    let held = fleet();
    let cursor = held["cursor"].as_u64().unwrap();
    let entries = fire_entries(&served.out).len() as u64;
    assert!(cursor >= 1 && cursor + held["backlog"].as_u64().unwrap() == entries, "{held:#}");
    // Nothing dropped, nothing out of order: the stream holds the log's
    // first `cursor` entries exactly.
    consumer_checks_prefix(&server, &served.out, Some(cursor));
    crate::watch::until(&served, "the summary's fleet line says it", || {
        std::fs::read_to_string(&summary)
            .unwrap_or_default()
            .contains(&format!("backlog {} (the stream is full: waiting for room)", entries - cursor))
    });
    // The operator raises the limit: the shipper, backing off, drains.
    set_max_bytes(&server.url(), 1 << 20);
    crate::watch::until(&served, "the backlog drained", || {
        let b = fleet();
        b["backlog"] == 0 && b["full"] == false && b["cursor"].as_u64() == Some(entries)
    });
    consumer_checks(&server, &served.out);
    let (_, s) = served.stop();
    // A config that asks more room than the stream gives is refused, naming
    // the stream and the setting; the scan is whole all the same.
    let more = config_at(&s, "more", &server.url(), "once_budget_secs = 10\nmax_bytes = 2097152\n");
    let o = run_once(&s.detectors_with(&[]), &s.path("data"), &s.path("out"), &more);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("fleet: not shipped: the stream SENTINEL_FIRES exists with settings the shipper cannot use: max_bytes 1048576, below the config's max_bytes = 2097152"),
        "{said}"
    );
}

/// `nats-server`'s store put back to `from` (a server back without the tail
/// it had acked: a machine crash between its syncs, a restored backup).
fn put_back(store: &Path, from: &Path) {
    let _ = std::fs::remove_dir_all(store);
    let o = std::process::Command::new("cp").arg("-a").arg(from).arg(store).output().unwrap();
    assert!(o.status.success(), "{o:?}");
}

#[test]
fn fleet_a_server_back_without_the_tail_it_acked_gets_the_tail_again() {
    let s = Scratch::new();
    let store = s.path("nats");
    let server = NatsServer::start(&store);
    let port = server.port;
    let config = config_at(&s, "fleet", &server.url(), "once_budget_secs = 60\n");
    let detectors = s.detectors_with(&[]);
    let (data, out) = (data_with(&s, 3), s.path("out"));
    run_once(&detectors, &data, &out, &config);
    let then = fire_entries(&out).len() as u64;
    server.kill9();
    put_back(&s.path("nats-then"), &store);
    let server = NatsServer::start_on(&store, port);
    add_failures(&data, 10, 3);
    run_once(&detectors, &data, &out, &config);
    let acked = sentinel_host::fleet::cursor::read(&out);
    assert!(acked > then, "the second run shipped past {then}");
    server.kill9();
    // The server comes back holding only the first run's fires.
    put_back(&store, &s.path("nats-then"));
    let server = NatsServer::start_on(&store, port);
    let o = run_once(&detectors, &data, &out, &config);
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("cursor {acked}, backlog 0")), "{o:?}");
    consumer_checks(&server, &out);
}
