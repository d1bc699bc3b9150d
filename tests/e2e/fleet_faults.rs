//! The fleet shipper's faults against a real `nats-server` on loopback
//! (issue 36's cases 2, 3, 4 and 6; docs/fleet.md): after each, the
//! independent consumer (`fleet_consumer.py`) finds exactly one message
//! per fire, chained, the last one the local head.

use crate::fleet::*;
use crate::fleet_proxy::{AckThief, Theft};
use crate::support::*;

/// The `D` of the `fleet: cursor N, backlog M, D duplicate(s)` line.
fn duplicates(stderr: &[u8]) -> u64 {
    let said = String::from_utf8_lossy(stderr);
    let line = said.lines().find(|l| l.starts_with("fleet: cursor")).unwrap_or_else(|| panic!("{said}"));
    line.split(", ").nth(2).and_then(|d| d.split(' ').next()).and_then(|d| d.parse().ok()).unwrap()
}

fn data_with(s: &Scratch, failures: usize) -> std::path::PathBuf {
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
    let config = config_at(&s, "thief", &thief.url(), "");
    let detectors = s.detectors_with(&[]);
    let (data, out) = (data_with(&s, 6), s.path("out"));
    let o = run_once(&detectors, &data, &out, &config);
    assert_eq!(thief.stolen(), 2, "both acks were lost: {o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("backlog 0"), "{o:?}");
    consumer_checks(&server, &out);
    assert!(duplicates(&o.stderr) >= 1, "the resend was a server-reported duplicate: {o:?}");
}
