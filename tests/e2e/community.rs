//! Community counts against a real `nats-server` on loopback
//! (docs/community.md): three installs over data dirs sharing some errors
//! put into one bucket through a recording TCP proxy; `community totals`
//! equals an independent oracle's sums of their `issues.jsonl`
//! (`community_oracle.py`); every byte sent is checked for what must never
//! leave; a re-run puts nothing, a new ISO week gives new keys, and with
//! `enabled` unset nothing is sent at all.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use xtask::datagen::{self, Activity};

use crate::fleet::NatsServer;
use crate::support::*;

/// A bound on a hang, never a threshold a loaded machine could miss.
const HANG: Duration = Duration::from_secs(120);
/// 2026-12-01T10:00:00Z, a Tuesday of ISO week 2026-W49.
const W49: i64 = 1_796_119_200_000;
const WEEK_MS: i64 = 7 * 86_400_000;
/// The bot's name in bots.json; it must never leave.
const BOT: &str = "Wilhelmina";

/// A loopback proxy to `port` that records every byte a client sends.
struct Proxy {
    port: u16,
    connections: Arc<AtomicUsize>,
    sent: Arc<Mutex<Vec<u8>>>,
}

impl Proxy {
    fn start(to: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (connections, sent) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
        let (c, s) = (Arc::clone(&connections), Arc::clone(&sent));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                let server = TcpStream::connect(("127.0.0.1", to)).unwrap();
                let (mut client_r, mut server_w) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut server_r, mut client_w) = (server, client);
                let record = Arc::clone(&s);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 8192];
                    while let Ok(n @ 1..) = client_r.read(&mut buf) {
                        record.lock().unwrap().extend_from_slice(&buf[..n]);
                        if server_w.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = server_w.shutdown(std::net::Shutdown::Both);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server_r, &mut client_w);
                    let _ = client_w.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Proxy { port, connections, sent }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn bytes(&self) -> Vec<u8> {
        self.sent.lock().unwrap().clone()
    }
}

/// The key and payload of every put into the bucket in `bytes` (NATS
/// `PUB`/`HPUB` to `$KV.sentinel_community.<key>`).
fn puts(bytes: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("PUB $KV.sentinel_community.") {
        let headers = at > 0 && rest.as_bytes()[at - 1] == b'H';
        let line_end = rest[at..].find("\r\n").unwrap() + at;
        let fields: Vec<&str> = rest[at..line_end].split(' ').collect();
        let key = fields[1].trim_start_matches("$KV.sentinel_community.").to_owned();
        let total: usize = fields.last().unwrap().parse().unwrap();
        let head: usize = if headers { fields[fields.len() - 2].parse().unwrap() } else { 0 };
        let body = &rest[line_end + 2 + head..line_end + 2 + total];
        out.push((key, body.to_owned()));
        rest = &rest[line_end + 2 + total..];
    }
    out
}

/// `[community]` on, through the proxy (no `[fleet]`: nothing else goes).
fn config(s: &Scratch, name: &str, body: &str) -> PathBuf {
    let path = s.path(&format!("{name}.toml"));
    std::fs::write(&path, body).unwrap();
    path
}

/// Install `i`'s data: three errors every install shares (a shell command
/// not found, a harness tool's failure, a harness notice naming the bot),
/// counted `i + 1`, 2 and 1 times, and one error of its own.
fn install_data(data: &Path, i: usize, at: i64) {
    std::fs::create_dir_all(data).unwrap();
    let bots = serde_json::json!({"bots": [{"id": "bot-x", "name": BOT, "threads": ["th-x"]}]});
    std::fs::write(data.join("bots.json"), bots.to_string()).unwrap();
    let notice = format!("{BOT} stopped this room turn early");
    let own = format!("repo quokka-{} not found", ["alpha", "bravo", "charlie"][i]);
    let mut rows: Vec<(String, &str, i64)> = Vec::new();
    for _ in 0..=i {
        rows.push(("/home/zanzibar/build.sh: line 3: frobnicate: command not found".into(), "Bash", 127));
    }
    rows.push((format!("room for {BOT} closed at /srv/quokka/42"), "mcp__agents__send_message", 1));
    rows.push((format!("room for {BOT} closed at /srv/quokka/43"), "mcp__agents__send_message", 1));
    rows.push((String::new(), notice.as_str(), 1));
    rows.push((own, "github_api", 1));
    for (n, (output, tool, code)) in rows.iter().enumerate() {
        let (id, turn) = (format!("msg-{i}-{n}-{at}"), format!("turn-{i}-{n}"));
        let a = Activity { exit_code: Some(*code), ..Activity::failed(&id, at + n as i64 * 1000, &turn, tool, output) };
        datagen::insert_activity(data, &a).unwrap();
    }
}

fn run_at(detectors: &Path, data: &Path, out: &Path, config: &Path, at: i64) -> String {
    let mut c = run_command(detectors, data, out);
    c.args(["--once", "--json", "--scan-time", &at.to_string(), "--config"]).arg(config);
    let o = run_within(c, Duration::from_secs(300));
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn preview(data: &Path, out: &Path, config: &Path) -> Value {
    let mut c = sentinel_host();
    c.args(["community", "preview", "--json", "--data-dir"])
        .arg(data)
        .arg("--out")
        .arg(out)
        .arg("--config")
        .arg(config);
    let o = run_within(c, HANG);
    assert!(o.status.success(), "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

fn preview_records(data: &Path, out: &Path, config: &Path) -> BTreeMap<String, String> {
    let p = preview(data, out, config);
    let records = p["records"].as_array().unwrap();
    records.iter().map(|r| (r["key"].as_str().unwrap().to_owned(), r["value"].as_str().unwrap().to_owned())).collect()
}

fn totals(server: &NatsServer, kind: Option<&str>) -> BTreeMap<String, u64> {
    let mut c = sentinel_host();
    c.args(["community", "totals", "--json", "--nats", &format!("nats://127.0.0.1:{}", server.port)]);
    if let Some(k) = kind {
        c.args(["--kind", k]);
    }
    let o = run_within(c, HANG);
    assert!(o.status.success(), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["refused"], 0, "{v}");
    v["totals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["sig"].as_str().unwrap().to_owned(), t["count"].as_u64().unwrap()))
        .collect()
}

/// The oracle's sums over the folders' issues.jsonl.
fn oracle(outs: &[PathBuf]) -> BTreeMap<String, u64> {
    let python = root().join("target/toolchains/nats-py/bin/python");
    let python = if python.exists() { python } else { PathBuf::from("python3") };
    let o = Command::new(&python).arg(root().join("tests/e2e/community_oracle.py")).args(outs).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Nothing that the data dirs or the folders hold leaves, beyond the
/// records' five fields: no title, id, evidence, bot, thread, path or text.
fn assert_nothing_private_in(bytes: &[u8], outs: &[PathBuf], s: &Scratch) {
    let text = String::from_utf8_lossy(bytes);
    let mut never: Vec<String> =
        [BOT, "zanzibar", "quokka", "frobnicate", "/home", "/srv", "msg-", "turn-", "bot-x", "th-x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    never.push(s.dir.path().to_string_lossy().into_owned());
    for out in outs {
        for i in issues(out) {
            never.push(i["title"].as_str().unwrap().to_owned());
            never.push(i["evidenceRef"]["id"].as_str().unwrap().to_owned());
            for f in ["botId", "threadId", "turnId"] {
                if let Some(v) = i[f].as_str() {
                    never.push(v.to_owned());
                }
            }
        }
    }
    for n in never.iter().filter(|n| n.len() >= 4) {
        assert!(!text.contains(n.as_str()), "`{n}` was sent");
    }
    for (key, body) in puts(bytes) {
        let v: serde_json::Map<String, Value> = serde_json::from_str(&body).unwrap();
        assert_eq!(v.keys().collect::<Vec<_>>(), ["count", "kind", "origin", "sig", "tool"], "{key}: {body}");
        assert!(body.starts_with("{\"sig\":"), "the fixed field order: {body}");
    }
}

#[test]
fn community_three_installs_totals_equal_the_oracle_and_nothing_private_is_sent() {
    let s = Scratch::new();
    let server = NatsServer::start(&s.path("nats"));
    let proxy = Proxy::start(server.port);
    let cfg = config(&s, "on", &format!("[community]\nenabled = true\nnats = \"nats://127.0.0.1:{}\"\n", proxy.port));
    let detectors = s.detectors_with(&[]);
    let outs: Vec<PathBuf> = (0..3).map(|i| s.path(&format!("out{i}"))).collect();
    let datas: Vec<PathBuf> = (0..3).map(|i| s.path(&format!("data{i}"))).collect();
    let mut previews = Vec::new();
    for i in 0..3 {
        install_data(&datas[i], i, W49);
        let said = run_at(&detectors, &datas[i], &outs[i], &cfg, W49 + 3_600_000);
        let records = preview_records(&datas[i], &outs[i], &cfg);
        assert!(said.contains(&format!("community: {} record(s) put, 0 unchanged", records.len())), "{said}");
        previews.push(records);
    }
    let expected = oracle(&outs);
    assert_eq!(totals(&server, None), expected, "the bucket's totals are the folders' counts summed");
    assert_eq!(totals(&server, Some("tool_error")), expected, "every issue here is a tool_error");
    assert!(totals(&server, Some("cost")).is_empty());
    let shared = expected.values().filter(|c| **c >= 3).count();
    assert!(shared >= 3, "the errors every install shares sum across installs: {expected:?}");
    // Exactly what the previews showed went out, byte for byte, and nothing private.
    let sent = proxy.bytes();
    let put: BTreeMap<String, String> = puts(&sent).into_iter().collect();
    let previewed: BTreeMap<String, String> = previews.iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(put, previewed);
    assert_nothing_private_in(&sent, &outs, &s);
    let notices: Vec<&String> =
        previewed.values().filter(|v| v.contains("\"origin\":\"harness\",\"tool\":null")).collect();
    assert_eq!(notices.len(), 3, "the harness notice goes without its tool: {previewed:#?}");

    // The same scans again: nothing changed, no connection at all.
    let before = proxy.connections();
    for i in 0..3 {
        let said = run_at(&detectors, &datas[i], &outs[i], &cfg, W49 + 3_600_000);
        assert!(said.contains("community: 0 record(s) put"), "{said}");
    }
    assert_eq!(proxy.connections(), before, "an unchanged count connects to nothing");
    // A lost record of what was sent: the same values under the same keys, no double count.
    std::fs::remove_file(outs[0].join("community-sent.json")).unwrap();
    let said = run_at(&detectors, &datas[0], &outs[0], &cfg, W49 + 3_600_000);
    assert!(said.contains(&format!("community: {} record(s) put", previews[0].len())), "{said}");
    assert_eq!(totals(&server, None), expected, "re-put, not added");

    // A new ISO week: install 0's errors again, each a new key of a known issue.
    let mark = proxy.bytes().len();
    install_data(&datas[0], 0, W49 + WEEK_MS);
    let said = run_at(&detectors, &datas[0], &outs[0], &cfg, W49 + WEEK_MS + 3_600_000);
    let now = preview_records(&datas[0], &outs[0], &cfg);
    let new: Vec<&String> = now.keys().filter(|k| !previews[0].contains_key(*k)).collect();
    assert_eq!(new.len(), previews[0].len(), "each issue seen again this week has a key of this week: {now:#?}");
    assert!(said.contains(&format!("community: {} record(s) put", new.len())), "{said}");
    let fresh: BTreeSet<String> = puts(&proxy.bytes()[mark..]).into_iter().map(|(k, _)| k).collect();
    assert_eq!(fresh, new.into_iter().cloned().collect::<BTreeSet<_>>(), "only the new week's records went");
    let pseudonyms: BTreeSet<&str> = now.keys().map(|k| k.rsplit('.').next().unwrap()).collect();
    assert_eq!(pseudonyms.len(), 2, "one pseudonym per week, none shared across weeks");
    assert_eq!(totals(&server, None), oracle(&outs));
    assert_nothing_private_in(&proxy.bytes(), &outs, &s);
}

#[test]
fn community_with_enabled_unset_nothing_is_sent_and_the_preview_still_shows_it() {
    let s = Scratch::new();
    let server = NatsServer::start(&s.path("nats"));
    let proxy = Proxy::start(server.port);
    let cfg = config(&s, "off", &format!("[community]\nnats = \"nats://127.0.0.1:{}\"\n", proxy.port));
    let (data, out) = (s.path("data"), s.path("out"));
    install_data(&data, 1, W49);
    let said = run_at(&s.detectors_with(&[]), &data, &out, &cfg, W49 + 3_600_000);
    assert!(!said.contains("community:"), "{said}");
    assert_eq!(proxy.connections(), 0, "disabled: not even a connection");
    let p = preview(&data, &out, &cfg);
    assert_eq!(p["enabled"], false);
    assert!(!p["records"].as_array().unwrap().is_empty(), "what would be sent is shown: {p}");
    let mut c = sentinel_host();
    c.args(["community", "preview", "--data-dir"]).arg(&data).arg("--out").arg(&out).arg("--config").arg(&cfg);
    let o = run_within(c, HANG);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("disabled") && text.contains("\"count\":"), "{o:?}");
}

#[test]
fn community_the_long_running_mode_puts_after_each_scan_that_counted() {
    let s = Scratch::new();
    let server = NatsServer::start(&s.path("nats"));
    let proxy = Proxy::start(server.port);
    let cfg = config(&s, "on", &format!("[community]\nenabled = true\nnats = \"nats://127.0.0.1:{}\"\n", proxy.port));
    let (data, out) = (s.path("data"), s.path("out"));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    install_data(&data, 0, now - 60_000);
    let mut c = run_command(&s.detectors_with(&[]), &data, &out);
    c.args(["--interval", "1", "--config"]).arg(&cfg).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let latest = || puts(&proxy.bytes()).into_iter().collect::<BTreeMap<_, _>>();
    wait_for(300, "the first scan's records are put", &mut child, || {
        !latest().is_empty() && latest() == preview_records(&data, &out, &cfg)
    });
    let first = latest();
    // A scan that counts more puts the records whose value changed, and only those.
    install_data(&data, 0, now);
    wait_for(300, "the second scan's records are put", &mut child, || {
        let p = preview_records(&data, &out, &cfg);
        p != first && latest() == p
    });
    let _ = child.kill();
    let _ = child.wait();
    let last = preview_records(&data, &out, &cfg);
    let changed = last.iter().filter(|(k, v)| first.get(*k) != Some(*v)).count();
    assert_eq!(puts(&proxy.bytes()).len(), first.len() + changed, "an unchanged value is never put again");
    assert_nothing_private_in(&proxy.bytes(), &[out], &s);
}

#[test]
fn community_a_server_down_never_fails_the_scan_and_the_records_go_next_time() {
    let s = Scratch::new();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = config(&s, "on", &format!("[community]\nenabled = true\nnats = \"nats://127.0.0.1:{port}\"\n"));
    let (data, out, detectors) = (s.path("data"), s.path("out"), s.detectors_with(&[]));
    install_data(&data, 0, W49);
    let said = run_at(&detectors, &data, &out, &cfg, W49 + 3_600_000);
    assert!(said.contains("community: not shared"), "{said}");
    assert!(!issues(&out).is_empty(), "the scan committed");
    let server = NatsServer::start(&s.path("nats"));
    let cfg = config(&s, "up", &format!("[community]\nenabled = true\nnats = \"nats://127.0.0.1:{}\"\n", server.port));
    let said = run_at(&detectors, &data, &out, &cfg, W49 + 3_600_000);
    let records = preview_records(&data, &out, &cfg).len();
    assert!(said.contains(&format!("community: {records} record(s) put")), "the unsent went with the next run: {said}");
    assert_eq!(totals(&server, None), oracle(&[out]));
}
