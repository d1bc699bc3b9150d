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
pub(crate) struct NatsServer {
    child: Child,
    pub(crate) port: u16,
}

impl NatsServer {
    pub(crate) fn start(store: &Path) -> NatsServer {
        NatsServer::start_on(store, free_port())
    }

    /// On `port` (a restart on the same store and port).
    pub(crate) fn start_on(store: &Path, port: u16) -> NatsServer {
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

    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// `kill -9`: nothing flushed, nothing said to the clients.
    pub(crate) fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// A loopback port nothing listens on (now).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A config file whose `[fleet]` points at `server`.
fn fleet_config(s: &Scratch, name: &str, server: &NatsServer) -> PathBuf {
    config_at(s, name, &server.url(), "once_budget_secs = 60\n")
}

/// A config file whose `[fleet]` points at `url`, with `extra` lines in it.
pub(crate) fn config_at(s: &Scratch, name: &str, url: &str, extra: &str) -> PathBuf {
    let path = s.path(&format!("{name}.toml"));
    std::fs::write(&path, format!("[fleet]\nnats = \"{url}\"\n{extra}")).unwrap();
    path
}

/// `count` failed tool calls numbered from `from`: one fire each.
pub(crate) fn add_failures(data: &Path, from: usize, count: usize) {
    for i in from..from + count {
        let out = format!("no layer {i} in /p{i}");
        datagen::insert_activity(data, &Activity::failed(&format!("m{i}"), 1_000 + i as i64, "t1", "Bash", &out))
            .unwrap();
    }
}

pub(crate) fn run_once(detectors: &Path, data: &Path, out: &Path, config: &Path) -> std::process::Output {
    let mut c = run_command(detectors, data, out);
    c.args(["--once", "--json", "--config"]).arg(config);
    let o = run_within(c, Duration::from_secs(300));
    assert!(o.status.success(), "{o:?}");
    o
}

pub(crate) fn subject(out: &Path) -> String {
    let first = fire_entries(out)[0]["hash"].as_str().unwrap().to_owned();
    format!("sentinel.fires.{}", &first[..16])
}

/// The independent consumer's verdict on `out`'s subject.
pub(crate) fn consumer_checks(server: &NatsServer, out: &Path) {
    consumer_checks_prefix(server, out, None)
}

/// The same, the stream holding exactly the log's first `prefix` entries.
pub(crate) fn consumer_checks_prefix(server: &NatsServer, out: &Path, prefix: Option<u64>) {
    let python = root().join("target/toolchains/nats-py/bin/python");
    let o = Command::new(&python)
        .arg(root().join("tests/e2e/fleet_consumer.py"))
        .arg(server.url())
        .arg(subject(out))
        .arg(out)
        .args(prefix.map(|n| n.to_string()))
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
    let fires = fire_entries(&out).len();
    assert!(fires >= 3, "the scan committed its fires: {o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("cursor 0, backlog {fires},")), "{o:?}");
    let server = NatsServer::start(&s.path("nats"));
    run_once(&detectors, &data, &out, &fleet_config(&s, "fleet", &server));
    consumer_checks(&server, &out);
}

/// `cp -a from to`: a folder as it was, modes and all.
fn copy_tree(from: &Path, to: &Path) {
    let o = Command::new("cp").arg("-a").arg(from).arg(to).output().unwrap();
    assert!(o.status.success(), "{o:?}");
}

/// `verify --json --out OUT --public-key KEPT` and `extra`: its exit code and outcome.
fn verify(out: &Path, kept: &Path, extra: &[&str]) -> (i32, serde_json::Value) {
    let o = sentinel_host()
        .args(["verify", "--json", "--out"])
        .arg(out)
        .arg("--public-key")
        .arg(kept)
        .args(extra)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    (o.status.code().unwrap(), v)
}

/// The witness check of a `verify --json` outcome: its status and why.
fn witness_check(v: &serde_json::Value) -> (String, String) {
    let c = v["checks"].as_array().unwrap().iter().find(|c| c["check"] == "witness").unwrap();
    (c["status"].as_str().unwrap().to_owned(), c["why"].as_str().unwrap_or("").to_owned())
}

#[test]
fn fleet_witness_catches_a_folder_put_back_and_a_history_rewritten_with_the_key_file() {
    let s = Scratch::new();
    let server = NatsServer::start(&s.path("nats"));
    let config = fleet_config(&s, "fleet", &server);
    let detectors = s.detectors_with(&[]);
    let (data, out, kept) = (s.path("data"), s.path("out"), s.path("kept.pub.json"));
    std::fs::create_dir_all(&data).unwrap();
    add_failures(&data, 0, 3);
    run_once(&detectors, &data, &out, &config);
    std::fs::copy(out.join("fires.pub.json"), &kept).unwrap();
    // What the attacker keeps for later: the folder and the data as they were.
    copy_tree(&out, &s.path("out-then"));
    copy_tree(&data, &s.path("data-then"));
    let then = fire_entries(&out).len();
    add_failures(&data, 10, 3);
    run_once(&detectors, &data, &out, &config);
    let witnessed = fire_entries(&out).len();
    assert!(witnessed > then, "the second run fired");
    let url = server.url();
    let witness = ["--witness", url.as_str()];

    // (a) The honest log holds the witnessed head.
    let (code, v) = verify(&out, &kept, &witness);
    assert_eq!((code, witness_check(&v).0.as_str()), (0, "ok"), "{v}");

    // (b) The folder put back to its older copy: every local check passes.
    std::fs::remove_dir_all(&out).unwrap();
    copy_tree(&s.path("out-then"), &out);
    let (code, v) = verify(&out, &kept, &[]);
    assert_eq!(code, 0, "a whole older folder is self-consistent: {v}");
    let (code, v) = verify(&out, &kept, &witness);
    assert_eq!((code, witness_check(&v).0.as_str()), (12, "failed"), "{v}");
    let problem = v["finding"]["problem"].as_str().unwrap();
    assert!(
        problem.contains(&format!("holds head {witnessed}"))
            && problem.contains(&format!("only {then} entries: rolled back")),
        "{problem}"
    );
    let text = sentinel_host().args(["verify", "--out"]).arg(&out).args(witness).output().unwrap();
    let said = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(12), "{text:?}");
    assert!(said.starts_with(&format!("BROKEN: entry {witnessed}: the fleet's witness")), "{said}");

    // (c) The attacker, who has the key file too, scans other data into the
    // put-back folder (without the fleet): a longer history, every head
    // signed by the real key, that is not the one the witness saw.
    let plain = s.path("plain.toml");
    std::fs::write(&plain, "").unwrap();
    add_failures(&s.path("data-then"), 200, 3 * (witnessed - then));
    run_once(&detectors, &s.path("data-then"), &out, &plain);
    assert!(fire_entries(&out).len() >= witnessed, "the rewritten log reaches the witnessed head");
    let (code, v) = verify(&out, &kept, &[]);
    assert_eq!(code, 0, "the rewritten log verifies with the kept key: {v}");
    let (code, v) = verify(&out, &kept, &witness);
    assert_eq!(code, 12, "{v}");
    let problem = v["finding"]["problem"].as_str().unwrap();
    assert!(problem.contains(&format!("entry {witnessed} differs from the witnessed one: rewritten")), "{problem}");

    // (d) A witness that cannot be reached gives no verdict: exit 16, the
    // check not made and why, the local checks as they were.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (code, v) = verify(&s.path("out-then"), &kept, &["--witness", &format!("nats://127.0.0.1:{port}")]);
    let (status, why) = witness_check(&v);
    assert_eq!((code, status.as_str(), v["ok"].as_bool()), (16, "not-checked", Some(true)), "{v}");
    assert!(why.contains("cannot reach the witness"), "{why}");

    // (e) A log whose heads never reached the witness: no verdict either.
    let (data2, out2) = (s.path("data2"), s.path("out2"));
    std::fs::create_dir_all(&data2).unwrap();
    add_failures(&data2, 0, 2);
    run_once(&detectors, &data2, &out2, &plain);
    let (code, v) = verify(&out2, &out2.join("fires.pub.json"), &witness);
    let (status, why) = witness_check(&v);
    assert_eq!((code, status.as_str()), (16, "not-checked"), "{v}");
    assert!(why.contains("holds no head on sentinel.heads."), "{why}");
}

#[test]
fn fleet_v1_fleet_shows_the_shipper_connected_and_caught_up_while_serve_runs() {
    let s = Scratch::new();
    let server = NatsServer::start(&s.path("nats"));
    let config = fleet_config(&s, "fleet", &server);
    let served = crate::watch::serve_with(s, &[], &["--config", config.to_str().unwrap()]);
    let fleet = || crate::watch::call(&served, "GET", "/v1/fleet", None, None);
    crate::watch::until(&served, "the shipper connected and caught up", || {
        let (status, _, body) = fleet();
        status == 200 && body["connected"] == true && body["backlog"] == 0 && body["cursor"].as_u64() >= Some(5)
    });
    let (_, _, body) = fleet();
    assert_eq!(body["shipping"], true, "{body:#}");
    let entries = fire_entries(&served.out).len() as u64;
    assert_eq!(body["cursor"].as_u64(), Some(entries), "every entry acked: {body:#}");
    assert!(body["lastAckMs"].as_i64().is_some_and(|t| t > 0), "{body:#}");
    consumer_checks(&server, &served.out);
}
