//! The watch API with the real binary (`sentinel-host serve` on a loopback
//! port the OS chooses): public reads, problem+json for every refusal, the
//! admin token and the tenant rule, mutations through the core into the fire
//! log, the gates, and the dispatcher counted at a real local receiver.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use xtask::datagen::{self, Activity};

use crate::support::*;

const HOUR: i64 = 3_600_000;
/// Tokens as long as the watch API asks (16 bytes at least).
pub(crate) const ADMIN: &str = "adm1n-token-0123456789";
pub(crate) const WRONG: &str = "adm1n-token-012345678X";
pub(crate) const ARMING: &str = "arming-token-0123456789";

/// A running `serve`, stopped with SIGTERM when dropped.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) base: String,
    pub(crate) out: PathBuf,
    pub(crate) data: PathBuf,
    pub(crate) stderr: PathBuf,
    scratch: Option<Scratch>,
}

impl Served {
    /// Stops it with SIGTERM and waits; its folders stay for a next start.
    pub(crate) fn stop(mut self) -> (std::process::ExitStatus, Scratch) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let status = self.child.wait().unwrap();
        (status, self.scratch.take().unwrap())
    }

    /// What it logged so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// `host:port` of its listening address.
    pub(crate) fn authority(&self) -> &str {
        self.base.strip_prefix("http://").unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.scratch.is_some() {
            let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
            let _ = self.child.wait();
        }
    }
}

fn add_failures(data: &std::path::Path, batch: &str, n: u32) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    for i in 0..n {
        let id = format!("m{batch}-{i}");
        // Different tools: each is an issue of its own, and each occurrence a fire.
        let tool = format!("{batch}{}", ["alpha", "bravo", "charlie", "delta", "echo"][i as usize % 5]);
        datagen::insert_activity(data, &Activity::failed(&id, now - HOUR + i64::from(i), "t1", &tool, "error: failed"))
            .unwrap();
    }
}

/// `serve --listen 127.0.0.1:0` over tool_error and a few failures, with
/// only the `WATCH_*` variables given; returns once the first scan's fires
/// are readable.
pub(crate) fn serve(vars: &[(&str, &str)]) -> Served {
    serve_with(Scratch::new(), vars, &[])
}

/// The command `serve_with` runs, before its environment is set.
fn serve_command(s: &Scratch, args: &[&str]) -> Command {
    let detectors = s.detectors_in("detectors", &["tool_error"], &[]);
    let mut cmd = sentinel_host();
    cmd.arg("serve")
        .arg("--detectors")
        .arg(&detectors)
        .arg("--data-dir")
        .arg(s.path("data"))
        .arg("--out")
        .arg(s.path("out"))
        .arg("--cache-dir")
        .arg(shared_cache())
        .args(["--deadline-ms", TEST_DEADLINE_MS, "--interval", "1"]);
    if !args.contains(&"--listen") {
        cmd.args(["--listen", "127.0.0.1:0"]);
    }
    cmd.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("WATCH_") || k == "BOOTSTRAP_TOKEN" {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// [`serve`] in `s` (its data and output folders made on the first start,
/// kept on the next), with more flags.
pub(crate) fn serve_with(s: Scratch, vars: &[(&str, &str)], args: &[&str]) -> Served {
    let data = s.path("data");
    if !data.exists() {
        std::fs::create_dir_all(&data).unwrap();
        add_failures(&data, "a", 5);
    }
    let out = s.path("out");
    let stderr = s.path("stderr.log");
    let mut cmd = serve_command(&s, args);
    cmd.envs(vars.iter().copied());
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(s.path("stdout.log")).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let mut base = String::new();
    wait_for(60, "the startup line with the bound address", &mut child, || {
        let log = std::fs::read_to_string(&stderr).unwrap_or_default();
        match log.split("watch API listening on ").nth(1) {
            Some(rest) => {
                base = rest.split_whitespace().next().unwrap().replace("http://0.0.0.0:", "http://127.0.0.1:");
                true
            }
            None => false,
        }
    });
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    let served = Served { child, base, out, data, stderr, scratch: Some(s) };
    let child_check = || served_fires(&served) >= 5;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !child_check() {
        assert!(Instant::now() < deadline, "no fires within 120 s: {}", served.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    served
}

/// `serve` with these variables and flags, expected to refuse to start:
/// its exit status and what it said.
pub(crate) fn serve_refused(vars: &[(&str, &str)], args: &[&str]) -> Output {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path("data")).unwrap();
    let mut cmd = serve_command(&s, args);
    cmd.envs(vars.iter().copied()).stdin(Stdio::null());
    run_within(cmd, Duration::from_secs(120))
}

pub(crate) fn served_fires(s: &Served) -> usize {
    let (status, _, body) = call(s, "GET", "/v1/fires?type=occurrence", None, None);
    if status != 200 {
        return 0;
    }
    body["items"].as_array().map_or(0, Vec::len)
}

pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .proxy(None)
            .build(),
    )
}

/// One request; (status, content type, JSON body or Null).
pub(crate) fn call(
    s: &Served,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<(&str, Vec<u8>)>,
) -> (u16, String, Value) {
    let url = format!("{}{path}", s.base);
    let a = agent();
    let auth = token.map(|t| format!("Bearer {t}"));
    let response = match method {
        "GET" => {
            let mut r = a.get(&url);
            if let Some(auth) = &auth {
                r = r.header("authorization", auth);
            }
            r.call()
        }
        _ => {
            let mut r = a.post(&url);
            if let Some(auth) = &auth {
                r = r.header("authorization", auth);
            }
            match body {
                Some((ct, bytes)) => r.header("content-type", ct).send(&bytes[..]),
                None => r.send_empty(),
            }
        }
    };
    let mut response = response.unwrap();
    let status = response.status().as_u16();
    let ct = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (status, ct, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

pub(crate) fn json(v: Value) -> Option<(&'static str, Vec<u8>)> {
    Some(("application/json", v.to_string().into_bytes()))
}

/// The body aiming a request at the pinned canary tenant.
fn canary() -> Option<(&'static str, Vec<u8>)> {
    json(serde_json::json!({"tenant": "canary"}))
}

pub(crate) fn assert_problem(r: &(u16, String, Value), status: u16, code: &str) {
    assert_eq!(r.0, status, "{r:?}");
    assert_eq!(r.1, "application/problem+json", "{r:?}");
    assert_eq!(r.2["status"], status, "{r:?}");
    assert_eq!(r.2["code"], code, "{r:?}");
    assert!(r.2["title"].is_string() && r.2["detail"].is_string() && r.2["type"].is_string(), "{r:?}");
}

#[test]
fn serve_answers_the_public_reads_while_it_scans() {
    let s = serve(&[]);
    // Sentinels: health, heat, last run (published once the scan's report is in).
    let deadline = Instant::now() + Duration::from_secs(30);
    let te = loop {
        let (status, _, list) = call(&s, "GET", "/v1/sentinels", None, None);
        assert_eq!(status, 200);
        let te = list["items"].as_array().unwrap().iter().find(|x| x["name"] == "tool_error").cloned();
        let te = te.expect("tool_error listed");
        if te["lastRunAt"].is_i64() || Instant::now() > deadline {
            break te;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(te["health"]["standing"], "ok");
    assert_eq!(te["enabled"], true);
    assert!(te["lastRunAt"].is_i64(), "{te}");
    // Five fires in the last hour: 0.7 * 5 / 5 + 0.3 * 5 / 24 = 0.7625: hot.
    assert_eq!(te["heat"]["fires1h"], 5, "{te}");
    assert_eq!(te["heat"]["value"], 0.7625, "{te}");
    assert_eq!(te["heat"]["band"], "hot", "{te}");
    let (status, _, one) = call(&s, "GET", "/v1/sentinels/tool_error", None, None);
    assert_eq!((status, &one["name"]), (200, &Value::from("tool_error")));

    // Fires: newest first, paged by before_id.
    let (_, _, page) = call(&s, "GET", "/v1/fires?limit=2", None, None);
    let seqs: Vec<u64> = page["items"].as_array().unwrap().iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs.len(), 2);
    assert!(seqs[0] > seqs[1], "newest first: {seqs:?}");
    let cursor = page["nextBeforeId"].as_u64().unwrap();
    assert_eq!(cursor, seqs[1]);
    let (_, _, next) = call(&s, "GET", &format!("/v1/fires?limit=2&before_id={cursor}"), None, None);
    assert!(next["items"].as_array().unwrap().iter().all(|f| f["seq"].as_u64().unwrap() < cursor));
    let (_, _, all) = call(&s, "GET", "/v1/fires?limit=100000&sentinel=tool_error&kind=tool_error", None, None);
    assert_eq!(all["items"].as_array().unwrap().len(), 5, "the limit is capped, not refused: {all}");
    assert!(all["nextBeforeId"].is_null());
    let (_, _, none) = call(&s, "GET", "/v1/fires?sentinel=nobody", None, None);
    assert!(none["items"].as_array().unwrap().is_empty());

    // Issues: ids, newest first, filtered by the sentinel's kinds.
    let (status, _, issues) = call(&s, "GET", "/v1/issues?sentinel=tool_error&limit=3", None, None);
    assert_eq!(status, 200);
    let ids: Vec<i64> = issues["items"].as_array().unwrap().iter().map(|i| i["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    assert!(issues["items"][0]["sig"].as_str().unwrap().starts_with("tool_error:"));

    // The key and its kid; the chain; the gates.
    let (status, _, key) = call(&s, "GET", "/v1/public-key", None, None);
    assert_eq!(status, 200);
    let pk = key["publicKey"].as_str().unwrap();
    let bytes: Vec<u8> = (0..pk.len()).step_by(2).map(|i| u8::from_str_radix(&pk[i..i + 2], 16).unwrap()).collect();
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(key["kid"], format!("sidecar-v1-{}", &hex[..8]));
    let (status, _, chain) = call(&s, "GET", "/v1/chain", None, None);
    assert_eq!((status, &chain["ok"]), (200, &Value::Bool(true)), "{chain}");
    let here = s.out.display().to_string();
    assert!(!chain.to_string().contains(&here), "no path of this machine: {chain}");
    let (_, _, gates) = call(&s, "GET", "/v1/gates", None, None);
    assert_eq!(gates, serde_json::json!({"observing": true, "dispatching": false, "action_production_armed": false}));

    // The page.
    let (status, ct, page) = call(&s, "GET", "/", None, None);
    assert_eq!(status, 200);
    assert!(ct.starts_with("text/html"), "{ct}");
    let html = page.as_str().unwrap();
    assert!(html.contains("data-sentinel=\"tool_error\"") && html.contains("chain verified"), "{html}");

    // A broken chain is a finding, answered 200.
    let segment = s.out.join("fires-000001.ndjson");
    let text = std::fs::read_to_string(&segment).unwrap();
    std::fs::write(&segment, text.replacen("\"detector\":\"tool_error\"", "\"detector\":\"tool_errox\"", 1)).unwrap();
    let (status, _, chain) = call(&s, "GET", "/v1/chain", None, None);
    assert_eq!((status, &chain["ok"]), (200, &Value::Bool(false)), "{chain}");
    assert!(chain["finding"]["problem"].is_string(), "{chain}");
}

#[test]
fn every_refusal_is_problem_json_and_admin_routes_are_shut_without_a_token() {
    let s = serve(&[("WATCH_ADMIN_TOKEN", "")]);
    assert_problem(&call(&s, "GET", "/nowhere", None, None), 404, "not_found");
    assert_problem(&call(&s, "GET", "/v1/sentinels/nobody", None, None), 404, "not_found");
    assert_problem(&call(&s, "POST", "/v1/sentinels", None, None), 405, "method_not_allowed");
    assert_problem(&call(&s, "GET", "/v1/fires?limit=0", None, None), 422, "invalid_request");
    assert_problem(&call(&s, "GET", "/v1/fires?limit=many", None, None), 422, "invalid_request");
    assert_problem(&call(&s, "GET", "/v1/fires?unknown=1", None, None), 422, "invalid_request");
    assert_problem(&call(&s, "GET", "/v1/fires?type=opinion", None, None), 422, "invalid_request");
    assert_problem(&call(&s, "GET", "/v1/issues?type=occurrence", None, None), 422, "invalid_request");
    let long = format!("/v1/fires?kind={}", "k".repeat(3000));
    assert_problem(&call(&s, "GET", &long, None, None), 414, "query_too_long");
    let big = ureq::Agent::new_with_config(ureq::Agent::config_builder().http_status_as_error(false).build())
        .get(format!("{}/v1/gates", s.base))
        .header("x-padding", "p".repeat(20_000))
        .call()
        .unwrap();
    assert_eq!(big.status().as_u16(), 431);
    // An empty token: every admin route is 401, whatever is sent.
    for path in [
        "/v1/admin/sentinels/tool_error/quarantine",
        "/v1/admin/sentinels/tool_error/release",
        "/v1/admin/sentinels/tool_error/enable",
        "/v1/admin/sentinels/tool_error/disable",
        "/v1/admin/sentinels/tool_error/force-wake",
        "/v1/admin/issues/tool_error:x/fix",
        "/v1/admin/issues/tool_error:x/reopen",
        "/v1/admin/ui-snapshot",
        "/v1/admin/arming",
    ] {
        assert_problem(&call(&s, "POST", path, Some(""), None), 401, "unauthorized");
        assert_problem(&call(&s, "POST", path, None, None), 401, "unauthorized");
    }
    let (_, _, sentinels) = call(&s, "GET", "/v1/sentinels/tool_error", None, None);
    assert_eq!(sentinels["health"]["standing"], "ok", "nothing was changed");
}

#[test]
fn admin_mutations_go_through_the_core_into_the_fire_log_under_the_tenant_rule() {
    let s = serve(&[("BOOTSTRAP_TOKEN", ADMIN), ("WATCH_CANARY_TENANT", "canary"), ("WATCH_ARMING_TOKEN", ARMING)]);
    let q = "/v1/admin/sentinels/tool_error/quarantine";
    assert_problem(&call(&s, "POST", q, None, None), 401, "unauthorized");
    assert_problem(&call(&s, "POST", q, Some(WRONG), None), 401, "unauthorized");
    assert_problem(&call(&s, "POST", q, Some(ADMIN), json(serde_json::json!({"bogus": 1}))), 422, "invalid_request");
    assert_problem(
        &call(&s, "POST", q, Some(ADMIN), Some(("application/json", b"{not json".to_vec()))),
        422,
        "invalid_request",
    );
    assert_problem(
        &call(&s, "POST", q, Some(ADMIN), Some(("text/plain", b"x".to_vec()))),
        415,
        "unsupported_media_type",
    );
    let huge = serde_json::json!({"tenant": "t".repeat(64 * 1024)});
    assert_problem(&call(&s, "POST", q, Some(ADMIN), json(huge)), 413, "body_too_large");
    assert_problem(
        &call(&s, "POST", q, Some(ADMIN), json(serde_json::json!({"tenant": "other"}))),
        403,
        "single_tenant_violation",
    );
    assert_problem(&call(&s, "POST", "/v1/admin/sentinels/nobody/quarantine", Some(ADMIN), canary()), 404, "not_found");

    // Quarantine: the core applies it, and it is a fact in the fire log.
    let (status, _, r) = call(&s, "POST", q, Some(ADMIN), canary());
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["result"]["health"]["state"], "quarantined", "{r}");
    let (_, _, fires) = call(&s, "GET", "/v1/fires?type=quarantine", None, None);
    assert_eq!(fires["items"][0]["reason"], "by the operator", "{fires}");
    let (_, _, te) = call(&s, "GET", "/v1/sentinels/tool_error", None, None);
    assert_eq!(te["health"]["standing"], "quarantined");
    let (status, _, _) = call(&s, "POST", "/v1/admin/sentinels/tool_error/release", Some(ADMIN), canary());
    assert_eq!(status, 200);
    let (_, _, fires) = call(&s, "GET", "/v1/fires?type=release", None, None);
    assert_eq!(fires["items"].as_array().unwrap().len(), 1);

    // Disable, enable.
    let (status, _, _) = call(&s, "POST", "/v1/admin/sentinels/tool_error/disable", Some(ADMIN), canary());
    assert_eq!(status, 200);
    let (_, _, te) = call(&s, "GET", "/v1/sentinels/tool_error", None, None);
    assert_eq!(te["enabled"], false);
    let (_, _, gates) = call(&s, "GET", "/v1/gates", None, None);
    assert_eq!(gates["observing"], false, "no sentinel enabled: nothing observes");
    call(&s, "POST", "/v1/admin/sentinels/tool_error/enable", Some(ADMIN), canary());
    let (_, _, te) = call(&s, "GET", "/v1/sentinels/tool_error", None, None);
    assert_eq!(te["enabled"], true);

    // Force-wake with no tenant would land in the default tenant, not the
    // pinned canary: refused, naming the default. Aimed at the canary, it lands.
    let wake = "/v1/admin/sentinels/tool_error/force-wake";
    let refused = call(&s, "POST", wake, Some(ADMIN), None);
    assert_problem(&refused, 403, "single_tenant_violation");
    assert!(refused.2["detail"].as_str().unwrap().contains("`sovereign`"), "{}", refused.2);
    let (status, _, r) = call(&s, "POST", wake, Some(ADMIN), canary());
    assert_eq!(status, 200, "{r}");
    assert_eq!((&r["tenant"], &r["tenantDefaulted"]), (&Value::from("canary"), &Value::Bool(false)), "{r}");
    let seq = r["result"]["fireSeq"].as_u64().unwrap();
    let (_, _, fires) = call(&s, "GET", "/v1/fires?type=diagnostic", None, None);
    assert_eq!(fires["items"][0]["seq"].as_u64(), Some(seq));
    assert!(fires["items"][0]["reason"].as_str().unwrap().contains("tenant canary"), "{fires}");

    // The UI snapshot.
    let (status, _, snap) = call(&s, "POST", "/v1/admin/ui-snapshot", Some(ADMIN), canary());
    assert_eq!(status, 200);
    assert!(snap["sentinels"].as_array().unwrap().iter().any(|x| x["name"] == "tool_error"));
    assert_eq!(snap["chain"]["ok"], true, "{snap}");

    // Arming: its own principal; the admin token does not open it; arming opens nothing else.
    let arm = json(serde_json::json!({"armed": true}));
    assert_problem(&call(&s, "POST", "/v1/admin/arming", Some(ADMIN), arm.clone()), 401, "unauthorized");
    assert_problem(&call(&s, "POST", "/v1/admin/arming", Some(ARMING), None), 422, "invalid_request");
    let (status, _, gates) = call(&s, "POST", "/v1/admin/arming", Some(ARMING), arm);
    assert_eq!(status, 200);
    assert_eq!(gates, serde_json::json!({"observing": true, "dispatching": false, "action_production_armed": true}));

    // Every mutation above that is a fact is in a chain that still verifies.
    let (_, _, chain) = call(&s, "GET", "/v1/chain", None, None);
    assert_eq!(chain["ok"], true, "{chain}");
}

/// What the receiver got: each request's idempotency key and body.
pub(crate) type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// A loopback HTTP receiver that answers 200 and keeps every request's
/// idempotency key and body.
pub(crate) fn receiver() -> (String, Received) {
    receiver_answering("200 OK")
}

/// A loopback HTTP receiver that answers every request with `status` and
/// keeps its idempotency key and body.
pub(crate) fn receiver_answering(status: &'static str) -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&got);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let Some((key, body)) = read_request(&stream) else { continue };
            seen.lock().unwrap().push((key, serde_json::from_slice(&body).unwrap_or(Value::Null)));
            answer(stream, status);
        }
    });
    (url, got)
}

/// Reads one delivery's head and body: its idempotency key (empty when it
/// has none) and the body; `None` when the connection ends first.
pub(crate) fn read_request(stream: &std::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let (mut length, mut key) = (0usize, String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("idempotency-key:") {
            key = line["idempotency-key:".len()..].trim().to_owned();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((key, body))
}

/// Answers a delivery with `status` and closes.
pub(crate) fn answer(mut stream: std::net::TcpStream, status: &str) {
    let _ = stream.write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes());
}

#[test]
fn with_only_observing_on_nothing_is_sent_and_with_dispatching_on_every_fire_is_delivered_once_each() {
    let (url, got) = receiver();
    {
        // The target is configured but the dispatcher's gate is shut.
        let s = serve(&[("WATCH_DISPATCH_WEBHOOK", url.as_str())]);
        std::thread::sleep(Duration::from_secs(2));
        let (_, _, gates) = call(&s, "GET", "/v1/gates", None, None);
        assert_eq!(gates["dispatching"], false);
        assert!(!s.out.join("dispatch.cursor").exists());
    }
    assert_eq!(got.lock().unwrap().len(), 0, "nothing reached the receiver with only observing on");

    let s = serve(&[("WATCH_DISPATCH_WEBHOOK", url.as_str()), ("WATCH_DISPATCHER_ENABLED", "1")]);
    let (_, _, gates) = call(&s, "GET", "/v1/gates", None, None);
    assert_eq!(gates, serde_json::json!({"observing": true, "dispatching": true, "action_production_armed": false}));
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.lock().unwrap().len() < 5 {
        assert!(Instant::now() < deadline, "only {} deliveries", got.lock().unwrap().len());
        std::thread::sleep(Duration::from_millis(100));
    }
    // New fires while serving are delivered too.
    add_failures(&s.data, "b", 2);
    while got.lock().unwrap().len() < 7 {
        assert!(Instant::now() < deadline, "only {} deliveries", got.lock().unwrap().len());
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = got.lock().unwrap().clone();
    let mut keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), got.len(), "one idempotency key per fire");
    for (key, body) in &got {
        assert_eq!(body["idempotencyKey"], key.as_str());
        assert_eq!(body["actionProductionArmed"], false, "dispatching never arms");
        assert_eq!(body["fire"]["detector"], "tool_error");
    }
    // The cursor follows the deliveries (written just after each).
    let cursor = || -> u64 {
        std::fs::read_to_string(s.out.join("dispatch.cursor")).ok().and_then(|c| c.trim().parse().ok()).unwrap_or(0)
    };
    while cursor() < 7 {
        assert!(Instant::now() < deadline, "the cursor stays at {}", cursor());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `f` until it is true, or fails after a minute saying `what` and
/// showing the server's log.
pub(crate) fn until(s: &Served, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "{what}: {}", std::fs::read_to_string(&s.stderr).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn dispatch_cursor(s: &Served) -> u64 {
    std::fs::read_to_string(s.out.join("dispatch.cursor")).ok().and_then(|c| c.trim().parse().ok()).unwrap_or(0)
}

pub(crate) fn dead_letters(s: &Served) -> Vec<Value> {
    let text = std::fs::read_to_string(s.out.join("dispatch-dead-letter.ndjson")).unwrap_or_default();
    // The dispatcher may be appending while the test polls: only lines it has
    // ended with a newline are whole (a half-written one is read next time).
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    whole.lines().map(|l| serde_json::from_str(l).expect("each dead letter is one JSON line")).collect()
}

#[test]
fn a_webhook_answering_500_is_retried_then_each_fire_is_dead_lettered_and_the_dispatcher_goes_on() {
    let (url, got) = receiver_answering("500 Internal Server Error");
    let s = serve(&[
        ("WATCH_DISPATCH_WEBHOOK", url.as_str()),
        ("WATCH_DISPATCHER_ENABLED", "1"),
        ("WATCH_DISPATCH_RETRIES", "2"),
        ("WATCH_DISPATCH_BACKOFF_MS", "10"),
    ]);
    until(&s, "five fires dead-lettered", || dead_letters(&s).len() >= 5);
    until(&s, "the cursor past them", || dispatch_cursor(&s) >= 5);
    let letters = dead_letters(&s);
    assert_eq!(letters.len(), 5, "one line per fire: {letters:#?}");
    let got = got.lock().unwrap().clone();
    for letter in &letters {
        assert_eq!(letter["error"], "status 500", "{letter:#}");
        assert!(letter["deadAt"].is_i64(), "{letter:#}");
        let key = letter["delivery"]["idempotencyKey"].as_str().unwrap();
        assert_eq!(letter["delivery"]["fire"]["detector"], "tool_error");
        let attempts = got.iter().filter(|(k, _)| k == key).count();
        assert_eq!(attempts, 3, "the first attempt and 2 retries, one key: {key}");
    }
    assert_eq!(got.len(), 15, "no fire attempted more than its retries allow");
}

#[test]
fn a_command_target_gets_each_fire_on_stdin_with_its_key_and_a_failed_attempt_is_retried() {
    // A command (no shell between: argv split on whitespace) that fails each
    // fire's first attempt and delivers its second, keeping what it got.
    let scratch = Scratch::new();
    let (log, command) = script_target(
        &scratch,
        "key=\"$SENTINEL_IDEMPOTENCY_KEY\"\n\
         echo \"$key $SENTINEL_PROBATION\" >> \"$1/attempts\"\n\
         if [ ! -e \"$1/failed-$key\" ]; then : > \"$1/failed-$key\"; exit 3; fi\n\
         cat > \"$1/delivered-$key.json\"\n",
    );
    assert!(!command.contains("  ") && command.split_whitespace().count() == 3, "{command}");
    let s = serve(&[
        ("WATCH_DISPATCH_COMMAND", command.as_str()),
        ("WATCH_DISPATCHER_ENABLED", "1"),
        ("WATCH_DISPATCH_BACKOFF_MS", "10"),
    ]);
    let delivered = || listing(&log).into_iter().filter(|n| n.starts_with("delivered-")).collect::<Vec<_>>();
    until(&s, "five fires delivered", || delivered().len() >= 5);
    until(&s, "the cursor past them", || dispatch_cursor(&s) >= 5);
    for name in delivered() {
        let key = name.strip_prefix("delivered-").unwrap().strip_suffix(".json").unwrap();
        let body: Value = serde_json::from_slice(&std::fs::read(log.join(&name)).unwrap()).unwrap();
        assert_eq!(body["idempotencyKey"], key, "the key in the environment is the body's");
        assert_eq!(body["fire"]["detector"], "tool_error");
        assert_eq!(body["actionProductionArmed"], false);
    }
    let attempts = std::fs::read_to_string(log.join("attempts")).unwrap();
    let mut keys: Vec<&str> = attempts.lines().collect();
    keys.sort();
    assert_eq!(keys.len(), 10, "two attempts per fire: {attempts}");
    keys.dedup();
    assert_eq!(keys.len(), 5, "each attempt of a fire with one key, not on probation (0): {attempts}");
    assert!(keys.iter().all(|k| k.ends_with(" 0")), "{attempts}");
    assert!(dead_letters(&s).is_empty(), "a retried fire that got through is not dead-lettered");
}

/// A `/bin/sh` script as a dispatch command (no shell between: argv split
/// on whitespace), given a folder of its own as `$1`: (that folder, the
/// `WATCH_DISPATCH_COMMAND` value).
pub(crate) fn script_target(scratch: &Scratch, script: &str) -> (PathBuf, String) {
    let dir = scratch.path("script-out");
    std::fs::create_dir_all(&dir).unwrap();
    let path = scratch.path("target.sh");
    std::fs::write(&path, script).unwrap();
    (dir.clone(), format!("/bin/sh {} {}", path.display(), dir.display()))
}

/// Debian's headless Chromium (`cargo xtask test` installs it).
pub(crate) fn chromium() -> &'static str {
    if Command::new("chromium").arg("--version").output().is_ok() { "chromium" } else { "chromium-browser" }
}

#[test]
fn the_status_page_shows_sentinels_heat_fires_and_the_chain_in_headless_chromium() {
    let s = serve(&[("WATCH_ADMIN_TOKEN", ADMIN)]);
    // A quarantine fire, so the page has more than one type of fire.
    let (status, _, _) = call(&s, "POST", "/v1/admin/sentinels/tool_error/quarantine", Some(ADMIN), None);
    assert_eq!(status, 200);
    let artifacts = root().join("target/e2e/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let profile = s.out.parent().unwrap().join("chromium-profile");
    let browser = |args: &[&str]| {
        let mut c = Command::new(chromium());
        c.args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1280,900"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .arg(format!("{}/", s.base))
            .stdin(Stdio::null());
        run_within(c, Duration::from_secs(120))
    };
    // What a person sees, as the browser built it.
    let dom = browser(&["--dump-dom"]);
    assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(dom.contains("<title>sentinel status</title>"), "{dom}");
    let row = dom.split("data-sentinel=\"tool_error\"").nth(1).expect("a row for tool_error");
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("class=\"hot\""), "five fires in the hour: hot: {row}");
    assert!(row.contains("quarantined"), "its health: {row}");
    assert!(dom.contains("chain verified"), "{dom}");
    assert!(dom.contains("action_production_armed <b>false</b>"), "{dom}");
    assert!(dom.contains("<td>quarantine</td>") && dom.contains("<td>occurrence</td>"), "the latest fires: {dom}");
    // The screenshot, kept in the test's artifacts.
    let shot = artifacts.join("watch-status-page.png");
    let _ = std::fs::remove_file(&shot);
    let out = browser(&[&format!("--screenshot={}", shot.display())]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000, "{} bytes", png.len());
}

/// The `/v1/issues` item for `tool`'s issue, when listed.
fn issue_of_tool(s: &Served, tool: &str) -> Option<Value> {
    let (_, _, issues) = call(s, "GET", "/v1/issues?limit=100", None, None);
    issues["items"].as_array()?.iter().find(|i| i["tool"] == tool).cloned()
}

#[test]
fn an_issue_fixed_through_the_admin_api_and_seen_again_is_regressed_and_its_fire_delivered() {
    let (url, got) = receiver();
    let s = serve(&[
        ("BOOTSTRAP_TOKEN", ADMIN),
        ("WATCH_DISPATCH_WEBHOOK", url.as_str()),
        ("WATCH_DISPATCHER_ENABLED", "1"),
    ]);
    until(&s, "aalpha's issue is listed", || issue_of_tool(&s, "aalpha").is_some());
    let sig = issue_of_tool(&s, "aalpha").unwrap()["sig"].as_str().unwrap().to_owned();
    let fix = format!("/v1/admin/issues/{sig}/fix");
    let reopen = format!("/v1/admin/issues/{sig}/reopen");
    assert_problem(&call(&s, "POST", &fix, None, None), 401, "unauthorized");
    assert_problem(&call(&s, "POST", &reopen, Some(WRONG), None), 401, "unauthorized");
    assert_problem(&call(&s, "POST", "/v1/admin/issues/tool_error:nobody/fix", Some(ADMIN), None), 404, "not_found");
    assert_problem(&call(&s, "POST", &reopen, Some(ADMIN), None), 409, "conflict");

    let (status, _, r) = call(&s, "POST", &fix, Some(ADMIN), json(serde_json::json!({"note": "release 1.2"})));
    assert_eq!((status, &r["state"]), (200, &Value::from("fixed")), "{r}");
    assert_problem(&call(&s, "POST", &fix, Some(ADMIN), None), 409, "conflict");
    // The admin route's fix keeps the regression case as the CLI's does.
    let case = s.out.join("regressions").join("tool_error").join(format!("{}.json", sig.replace(':', "-")));
    let kept = std::fs::read_to_string(&case).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    assert!(kept.contains(&format!("\"expect_sig\": \"{sig}\"")), "{kept}");
    let listed = issue_of_tool(&s, "aalpha").unwrap();
    assert_eq!(
        (&listed["state"], &listed["fixNote"]),
        (&Value::from("fixed"), &Value::from("release 1.2")),
        "{listed}"
    );

    // The same error again in the data dir: the next scan regresses it, and
    // the regression is a fire the dispatcher delivers like any other.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    datagen::insert_activity(&s.data, &Activity::failed("ma-again", now - HOUR + 50, "t2", "aalpha", "error: failed"))
        .unwrap();
    until(&s, "the issue regressed", || issue_of_tool(&s, "aalpha").is_some_and(|i| i["state"] == "regressed"));
    until(&s, "the regression delivered", || {
        got.lock().unwrap().iter().any(|(_, body)| body["fire"]["type"] == "regression")
    });
    let (status, _, r) = call(&s, "POST", &reopen, Some(ADMIN), None);
    assert_eq!((status, &r["state"]), (200, &Value::from("open")), "{r}");
    let (_, _, chain) = call(&s, "GET", "/v1/chain", None, None);
    assert_eq!(chain["ok"], true, "fix, regression and reopen are in a chain that verifies: {chain}");
}

/// The occurrences of `sig` per UTC day of the 14 days ending today, from
/// the fire log as `/v1/fires` serves it (the oracle for the page's trend).
fn day_counts_from_fires(s: &Served, sig: &str) -> Vec<u64> {
    const DAY: i64 = 86_400_000;
    let (_, _, fires) = call(s, "GET", "/v1/fires?type=occurrence&limit=500", None, None);
    let today = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64 / DAY;
    let mut counts = vec![0u64; 14];
    for f in fires["items"].as_array().unwrap().iter().filter(|f| f["sig"] == sig) {
        let day = f["at"].as_i64().unwrap().div_euclid(DAY);
        if let Some(slot) = usize::try_from(day - (today - 13)).ok().and_then(|i| counts.get_mut(i)) {
            *slot += 1;
        }
    }
    counts
}

#[test]
fn the_status_page_lists_the_open_issues_with_their_trend_and_each_issue_has_a_page_in_headless_chromium() {
    // An issue whose tool name the data dir chose to be markup, seen over
    // three days, beside the five of every served data dir.
    let scratch = Scratch::new();
    let data = scratch.path("data");
    std::fs::create_dir_all(&data).unwrap();
    add_failures(&data, "a", 5);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let hostile = "<img src=x onerror=alert(1)>";
    for (i, ago) in [2i64, 2, 2, 1, 0, 0].iter().enumerate() {
        let id = format!("hostile-{i}");
        let at = now - ago * 86_400_000 - 7_200_000 + i as i64;
        datagen::insert_activity(&data, &Activity::failed(&id, at, &format!("th{i}"), hostile, "error: failed"))
            .unwrap();
    }
    let s = serve_with(scratch, &[], &[]);
    // A tool named as markup reads as a harness notice: its title is the name.
    let hostile_issue = || {
        let (_, _, issues) = call(&s, "GET", "/v1/issues?limit=100", None, None);
        issues["items"].as_array()?.iter().find(|i| i["title"].as_str().is_some_and(|t| t.contains("onerror"))).cloned()
    };
    until(&s, "the hostile issue counted six times", || hostile_issue().is_some_and(|i| i["count"] == 6));
    let issue = hostile_issue().unwrap();
    let sig = issue["sig"].as_str().unwrap().to_owned();

    let profile = s.out.parent().unwrap().join("chromium-profile");
    let browser = |url: &str, args: &[&str]| {
        let mut c = Command::new(chromium());
        c.args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1280,1400"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .arg(url)
            .stdin(Stdio::null());
        let out = run_within(c, Duration::from_secs(120));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The page's days end on the server's today: a load that straddles
    // midnight is loaded again, so the oracle and the page share one today.
    let (dom, want) = loop {
        let want = day_counts_from_fires(&s, &sig);
        let dom = browser(&format!("{}/", s.base), &["--dump-dom"]);
        if day_counts_from_fires(&s, &sig) == want {
            break (dom, want);
        }
    };
    assert_eq!(want.iter().sum::<u64>(), 6, "{want:?}");
    let table = dom.split("id=\"issues\"").nth(1).expect("an issues table");
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(table.matches("<tr data-sig=").count(), 6, "five issues of the first scan and the hostile one: {table}");
    let row = table.split(&format!("data-sig=\"{sig}\"")).nth(1).expect("the hostile issue's row");
    let row = &row[..row.find("</tr>").unwrap()];
    let counts: Vec<String> = want.iter().map(u64::to_string).collect();
    assert!(
        row.contains(&format!("data-counts=\"{}\"", counts.join(" "))),
        "the trend is the log's per-day count {want:?}: {row}"
    );
    assert!(row.contains("<polyline"), "drawn as SVG: {row}");
    assert!(!dom.contains("<img"), "the data dir's markup is text, never an element: {table}");
    assert!(row.contains("&lt;img src=x onerror="), "{row}");

    // The issue's own page, through the link the row carries.
    let href = row.split("href=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let page = browser(&format!("{}{href}", s.base), &["--dump-dom"]);
    assert!(page.contains(&format!("<td>{sig}</td>")) && page.contains("id=\"history\""), "{page}");
    assert!(!page.contains("<img"), "{page}");
    let (status, _, _) = call(&s, "GET", "/issues/tool_error:0000000000000000", None, None);
    assert_eq!(status, 404, "an unknown signature");

    let artifacts = root().join("target/e2e/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("watch-issues.png");
    let _ = std::fs::remove_file(&shot);
    browser(&format!("{}/", s.base), &[&format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000, "{} bytes", png.len());
}
