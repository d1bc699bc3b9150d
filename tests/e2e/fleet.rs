//! The fleet shipper against a real `nats-server` on loopback (docs/fleet.md):
//! after each case an independent consumer (`fleet_consumer.py`, nats-py)
//! reads the whole stream and checks exactly one message per fire, unique
//! ids, the chain through `prev` and the last one equal to the local head.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xtask::datagen::{self, Activity};

use crate::support::*;

/// A bound on a hang, never a threshold a loaded machine could miss.
const HANG: Duration = Duration::from_secs(120);

/// `nats-server -js -sd DIR -a 127.0.0.1 -p PORT`, killed when dropped.
struct NatsServer {
    child: Child,
    port: u16,
}

impl NatsServer {
    fn start(store: &Path) -> NatsServer {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("nats-server")
            .args(["-js", "-sd"])
            .arg(store)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server is installed (cargo xtask test installs it)");
        let until = Instant::now() + HANG;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "nats-server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        NatsServer { child, port }
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A config file whose `[fleet]` points at `server`.
fn fleet_config(s: &Scratch, name: &str, server: &NatsServer) -> PathBuf {
    let path = s.path(&format!("{name}.toml"));
    std::fs::write(&path, format!("[fleet]\nnats = \"{}\"\nonce_budget_secs = 60\n", server.url())).unwrap();
    path
}

/// `count` failed tool calls numbered from `from`: one fire each.
fn add_failures(data: &Path, from: usize, count: usize) {
    for i in from..from + count {
        let out = format!("no layer {i} in /p{i}");
        datagen::insert_activity(data, &Activity::failed(&format!("m{i}"), 1_000 + i as i64, "t1", "Bash", &out))
            .unwrap();
    }
}

fn run_once(detectors: &Path, data: &Path, out: &Path, config: &Path) -> std::process::Output {
    let mut c = run_command(detectors, data, out);
    c.args(["--once", "--json", "--config"]).arg(config);
    let o = run_within(c, Duration::from_secs(300));
    assert!(o.status.success(), "{o:?}");
    o
}

fn subject(out: &Path) -> String {
    let first = crate::ledger::fire_entries(out)[0]["hash"].as_str().unwrap().to_owned();
    format!("sentinel.fires.{}", &first[..16])
}

/// The independent consumer's verdict on `out`'s subject.
fn consumer_checks(server: &NatsServer, out: &Path) {
    let python = root().join("target/toolchains/nats-py/bin/python");
    let o = Command::new(&python)
        .arg(root().join("tests/e2e/fleet_consumer.py"))
        .arg(server.url())
        .arg(subject(out))
        .arg(out)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (cargo xtask test makes the venv)", python.display()));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.starts_with("ok "), "{o:?}");
}

#[test]
fn fleet_three_installs_ship_into_one_server_each_subject_exactly_its_log() {
    let s = Scratch::new();
    let server = NatsServer::start(&s.path("nats"));
    let config = fleet_config(&s, "fleet", &server);
    let detectors = s.detectors_with(&[]);
    let outs: Vec<PathBuf> = (0..3).map(|i| s.path(&format!("out{i}"))).collect();
    for (i, out) in outs.iter().enumerate() {
        let data = s.path(&format!("data{i}"));
        std::fs::create_dir_all(&data).unwrap();
        add_failures(&data, 0, 2 + i);
        let o = run_once(&detectors, &data, out, &config);
        assert!(String::from_utf8_lossy(&o.stderr).contains("backlog 0"), "{o:?}");
    }
    assert_eq!(outs.iter().map(|o| subject(o)).collect::<std::collections::HashSet<_>>().len(), 3);
    for out in &outs {
        consumer_checks(&server, out);
    }
    // A second run of the first install ships only what is new.
    add_failures(&s.path("data0"), 10, 3);
    run_once(&detectors, &s.path("data0"), &outs[0], &config);
    consumer_checks(&server, &outs[0]);
}

#[test]
fn fleet_a_sentinel_killed_between_an_ack_and_its_cursor_ships_no_duplicate() {
    let s = Scratch::new();
    let server = NatsServer::start(&s.path("nats"));
    let config = fleet_config(&s, "fleet", &server);
    let detectors = s.detectors_with(&[]);
    let (data, out, meet) = (s.path("data"), s.path("out"), s.path("meet"));
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&meet).unwrap();
    add_failures(&data, 0, 4);
    let mut c = run_command(&detectors, &data, &out);
    c.args(["--once", "--json", "--config"]).arg(&config).stdout(Stdio::null()).stderr(Stdio::null());
    c.env(sentinel_host::ledger::count::test_hook::VAR, format!("fleet-acked:{}", meet.display()));
    let mut child = c.spawn().unwrap();
    wait_for(300, "the shipper holds at its first ack", &mut child, || meet.join("fleet-acked.paused").exists());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(sentinel_host::fleet::cursor::read(&out), 0, "killed after the ack, before the cursor");
    let o = run_once(&detectors, &data, &out, &config);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("backlog 0") && said.contains(" 0 duplicate(s)"), "reconciled, not resent: {said}");
    consumer_checks(&server, &out);
}

#[test]
fn fleet_a_server_down_at_start_leaves_the_run_whole_and_the_backlog_ships_later() {
    let s = Scratch::new();
    let detectors = s.detectors_with(&[]);
    let (data, out) = (s.path("data"), s.path("out"));
    std::fs::create_dir_all(&data).unwrap();
    add_failures(&data, 0, 3);
    // A loopback port nothing listens on, and a one-second budget.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let down = s.path("down.toml");
    std::fs::write(&down, format!("[fleet]\nnats = \"nats://127.0.0.1:{port}\"\nonce_budget_secs = 1\n")).unwrap();
    let o = run_once(&detectors, &data, &out, &down);
    let fires = crate::ledger::fire_entries(&out).len();
    assert!(fires >= 3, "the scan committed its fires: {o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("cursor 0, backlog {fires},")), "{o:?}");
    let server = NatsServer::start(&s.path("nats"));
    run_once(&detectors, &data, &out, &fleet_config(&s, "fleet", &server));
    consumer_checks(&server, &out);
}
