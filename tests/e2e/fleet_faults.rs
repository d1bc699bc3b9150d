//! The fleet shipper's faults against a real `nats-server` on loopback
//! (issue 36's cases 2, 3, 4 and 6; docs/fleet.md): after each, the
//! independent consumer (`fleet_consumer.py`) finds exactly one message
//! per fire, chained, the last one the local head.

use std::path::{Path, PathBuf};
use std::time::Duration;

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
    wait_for(900, "a tenth of the burst acked", &mut child, || sentinel_host::fleet::cursor::read(&out) >= (BURST / 10) as u64);
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
