//! The watch API against its first attackers, with the real binary: a web
//! page in the user's browser (a rebound `Host`, a foreign `Origin`, token
//! guessing), the programs fires are handed to (a dispatch command looking
//! for tokens), clients that hold connections open, and receivers that
//! hang or are down across a restart. Each test plays the attacker and
//! fails without its defence.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;
use crate::watch::*;

const READ: &str = "read-token-0123456789";

/// One request written by hand, so `Host` and `Origin` say what an
/// attacker's page would: (status, head in lower case, body as JSON or text).
fn request(
    s: &Served,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    token: Option<&str>,
) -> (u16, String, Value) {
    let mut c = TcpStream::connect(s.authority()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut text = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\ncontent-length: 0\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("host: {}\r\n", s.authority()));
    }
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(t) = token {
        text.push_str(&format!("authorization: Bearer {t}\r\n"));
    }
    text.push_str("\r\n");
    c.write_all(text.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = c.read_to_string(&mut answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), serde_json::from_str(body).unwrap_or(Value::String(body.to_owned())))
}

fn assert_refused(r: &(u16, String, Value), status: u16, code: &str) {
    assert_eq!(r.0, status, "{r:?}");
    assert!(r.1.contains("content-type: application/problem+json"), "{r:?}");
    assert_eq!((&r.2["status"], &r.2["code"]), (&Value::from(status), &Value::from(code)), "{r:?}");
}

fn port(s: &Served) -> &str {
    s.authority().rsplit(':').next().unwrap()
}

#[test]
fn a_rebound_host_and_a_foreign_origin_are_refused_and_token_guessing_is_rate_limited() {
    let s = serve_with(
        Scratch::new(),
        &[("WATCH_ADMIN_TOKEN", ADMIN), ("WATCH_ARMING_TOKEN", ARMING)],
        &["--allow-host", "sentinel.lan"],
    );
    let rebound = format!("rebind.test:{}", port(&s));
    for path in ["/", "/v1/issues", "/v1/sentinels", "/v1/chain", "/openapi.json"] {
        assert_refused(&request(&s, "GET", path, &[("host", &rebound)], None), 421, "misdirected_host");
    }
    let other_port = "http://127.0.0.1:1".to_owned();
    for origin in [other_port.as_str(), "http://evil.example", "null", &format!("http://{rebound}")] {
        let r = request(&s, "GET", "/v1/issues", &[("origin", origin)], None);
        assert_refused(&r, 403, "cross_origin");
        if origin != "null" {
            assert!(r.1.contains(&format!("access-control-allow-origin: {origin}")), "the refusal is readable: {r:?}");
        }
    }
    let r = request(&s, "POST", "/v1/admin/ui-snapshot", &[("origin", "http://evil.example")], Some(ADMIN));
    assert_refused(&r, 403, "cross_origin");
    // The server's own names pass, and so does a name given with --allow-host.
    for host in [format!("localhost:{}", port(&s)), format!("sentinel.lan:{}", port(&s)), s.authority().to_owned()] {
        assert_eq!(request(&s, "GET", "/v1/gates", &[("host", &host)], None).0, 200, "{host}");
    }
    let own = s.base.clone();
    let r = request(&s, "GET", "/v1/gates", &[("origin", &own)], None);
    assert_eq!(r.0, 200, "{r:?}");
    assert!(!r.1.contains("access-control-allow-origin"), "no read answer ever carries it: {r:?}");

    // Another principal's own token on the wrong route is refused, never counted as a guess.
    for _ in 0..6 {
        assert_refused(&request(&s, "POST", "/v1/admin/arming", &[], Some(ADMIN)), 401, "unauthorized");
    }
    // Guessing: five wrong tokens, then 429 with Retry-After, even for the right one.
    for i in 0..5 {
        let guess = format!("guess-{i}-0123456789abcdef");
        assert_refused(&request(&s, "POST", "/v1/admin/ui-snapshot", &[], Some(&guess)), 401, "unauthorized");
    }
    for (path, token) in [("/v1/admin/ui-snapshot", ADMIN), ("/v1/admin/arming", ARMING)] {
        let r = request(&s, "POST", path, &[], Some(token));
        assert_refused(&r, 429, "too_many_failed_attempts");
        let wait: u64 = r.1.split("retry-after: ").nth(1).and_then(|v| v.lines().next()?.trim().parse().ok()).unwrap();
        assert!((1..=60).contains(&wait), "{r:?}");
    }
    let (_, _, gates) = call(&s, "GET", "/v1/gates", None, None);
    assert_eq!(gates["action_production_armed"], false);
}

#[test]
fn a_blank_short_or_shared_token_stops_serve_at_start_with_exit_3_naming_the_variable_not_the_value() {
    /// The environment, the variable named, and the value never said.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, Option<&'a str>);
    let cases: [Case; 4] = [
        (&[("WATCH_ADMIN_TOKEN", " \t ")], "WATCH_ADMIN_TOKEN", None),
        (&[("BOOTSTRAP_TOKEN", "sh0rt-s3cret")], "BOOTSTRAP_TOKEN", Some("sh0rt-s3cret")),
        (&[("WATCH_ARMING_TOKEN", "tiny-arm-s3cret")], "WATCH_ARMING_TOKEN", Some("tiny-arm-s3cret")),
        (&[("WATCH_ADMIN_TOKEN", ADMIN), ("WATCH_ARMING_TOKEN", ADMIN)], "WATCH_ADMIN_TOKEN", Some(ADMIN)),
    ];
    for (vars, variable, value) in cases {
        let out = serve_refused(vars, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{vars:?}: {err}");
        assert!(err.contains(variable), "{err}");
        assert!(value.is_none_or(|v| !err.contains(v)), "the value is never said: {err}");
        assert!(!err.contains("listening"), "refused before listening: {err}");
    }
}

#[test]
fn on_a_non_loopback_listen_titles_need_the_read_token_and_stay_public_elsewhere_only_on_loopback() {
    // Two wrong tries per closed path, under the limit of failed attempts.
    let vars = [("WATCH_READ_TOKEN", READ), ("WATCH_TOKEN_FAILURES", "10")];
    let s = serve_with(Scratch::new(), &vars, &["--listen", "0.0.0.0:0"]);
    for path in ["/", "/v1/issues", "/metrics"] {
        assert_problem(&call(&s, "GET", path, None, None), 401, "unauthorized");
        assert_problem(&call(&s, "GET", path, Some(WRONG), None), 401, "unauthorized");
    }
    let (status, _, issues) = call(&s, "GET", "/v1/issues", Some(READ), None);
    assert_eq!(status, 200, "{issues}");
    assert!(issues["items"][0]["title"].is_string(), "{issues}");
    let (status, _, metrics) = call(&s, "GET", "/metrics", Some(READ), None);
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.as_str().unwrap().contains("sentinel_standing{sentinel=\"tool_error\",state=\"ok\"} 1"),
        "{metrics}"
    );
    let (status, _, page) = call(&s, "GET", "/", Some(READ), None);
    assert_eq!(status, 200);
    assert!(page.as_str().unwrap().contains("data-sentinel=\"tool_error\""));
    // What holds no title stays public.
    assert_eq!(call(&s, "GET", "/v1/sentinels", None, None).0, 200);
    assert_eq!(call(&s, "GET", "/v1/gates", None, None).0, 200);
    assert!(s.log().contains("WATCH_READ_TOKEN"), "the start-up warning says what is closed: {}", s.log());
}

/// A command that writes its environment down, then, once, tries every
/// value it found as a token on `POST /v1/admin/arming` (the server's
/// address read from `$1/base`, which the test writes once it knows it).
const SNOOPER: &str = r#"dir="$1"
env > "$dir/env-$SENTINEL_IDEMPOTENCY_KEY"
mkdir "$dir/tried" 2>/dev/null || exit 0
while [ ! -e "$dir/base" ]; do sleep 0.1; done
base=$(cat "$dir/base")
env | while IFS='=' read -r name value; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $value" \
    -H 'content-type: application/json' --data '{"armed":true}' "$base/v1/admin/arming")
  echo "$name $code" >> "$dir/tries"
done
: > "$dir/done"
"#;

#[test]
fn a_dispatch_command_gets_no_token_and_cannot_arm_with_what_it_finds() {
    let scratch = Scratch::new();
    let (log, command) = script_target(&scratch, SNOOPER);
    let s = serve_with(
        scratch,
        &[
            ("WATCH_ADMIN_TOKEN", ADMIN),
            ("WATCH_ARMING_TOKEN", ARMING),
            ("WATCH_READ_TOKEN", READ),
            ("SENTINEL_TEST_DECOY_SECRET", "decoy-value-0123456789"),
            ("WATCH_DISPATCHER_ENABLED", "1"),
            ("WATCH_DISPATCH_COMMAND", command.as_str()),
            ("WATCH_DISPATCH_TIMEOUT_MS", "120000"),
        ],
        &[],
    );
    std::fs::write(log.join("base"), &s.base).unwrap();
    until(&s, "the command tried what it found", || log.join("done").exists());
    until(&s, "five fires delivered", || dispatch_cursor(&s) >= 5);
    let allowed: BTreeSet<&str> =
        ["PATH", "HOME", "LANG", "SENTINEL_IDEMPOTENCY_KEY", "SENTINEL_PROBATION", "PWD", "OLDPWD", "SHLVL", "_"]
            .into();
    let envs: Vec<String> = listing(&log).into_iter().filter(|n| n.starts_with("env-")).collect();
    assert_eq!(envs.len(), 5, "{envs:?}");
    for name in envs {
        let text = std::fs::read_to_string(log.join(&name)).unwrap();
        for line in text.lines() {
            let (var, value) = line.split_once('=').unwrap_or((line, ""));
            assert!(allowed.contains(var), "{var} reached the command: {text}");
            for secret in [ADMIN, ARMING, READ, "decoy-value-0123456789"] {
                assert!(!value.contains(secret), "{var} carries a token: {text}");
            }
        }
    }
    let tries = std::fs::read_to_string(log.join("tries")).unwrap();
    assert!(tries.lines().count() >= 2, "{tries}");
    assert!(tries.lines().all(|l| l.ends_with(" 401") || l.ends_with(" 429")), "{tries}");
    let (_, _, gates) = call(&s, "GET", "/v1/gates", None, None);
    assert_eq!(gates["action_production_armed"], false, "the consumer could not arm itself");
}

/// What a receiver saw, in arrival order: (idempotency key, how it answered).
type Arrivals = Arc<Mutex<Vec<(String, &'static str)>>>;

/// A receiver down (503) until `healthy` is set, then answering 200.
fn switchable_receiver() -> (String, Arrivals, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (got, healthy) = (Arrivals::default(), Arc::new(AtomicBool::new(false)));
    let (seen, up) = (Arc::clone(&got), Arc::clone(&healthy));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let Some((key, _)) = read_request(&stream) else { continue };
            let ok = up.load(Ordering::SeqCst);
            seen.lock().unwrap().push((key, if ok { "200" } else { "503" }));
            answer(stream, if ok { "200 OK" } else { "503 Service Unavailable" });
        }
    });
    (url, got, healthy)
}

fn delivered(got: &Arrivals) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for (key, how) in got.lock().unwrap().iter() {
        if *how == "200" {
            *n.entry(key.clone()).or_default() += 1;
        }
    }
    n
}

#[test]
fn a_dispatcher_stopped_during_an_outage_dead_letters_nothing_and_delivers_each_fire_once_after_its_restart() {
    let (url, got, healthy) = switchable_receiver();
    let hook = format!("{}?key=q-s3cret", url.replace("http://", "http://user:pw-s3cret@"));
    let vars = [
        ("WATCH_DISPATCHER_ENABLED", "1"),
        ("WATCH_DISPATCH_WEBHOOK", hook.as_str()),
        ("WATCH_DISPATCH_RETRIES", "1000"),
        ("WATCH_DISPATCH_BACKOFF_MS", "20"),
    ];
    let s = serve_with(Scratch::new(), &vars, &[]);
    until(&s, "fires retried during the outage", || got.lock().unwrap().len() >= 8);
    let log = s.log();
    let (status, scratch) = s.stop();
    assert!(status.success(), "{status:?}");
    let out = scratch.path("out");
    assert!(!out.join("dispatch-dead-letter.ndjson").exists(), "a stop dead-letters nothing");
    let cursor = std::fs::read_to_string(out.join("dispatch.cursor")).unwrap_or_default();
    assert!(
        cursor.trim().is_empty() || cursor.trim() == "0",
        "the cursor stays before every undelivered fire: {cursor}"
    );
    assert!(!log.contains("pw-s3cret") && !log.contains("q-s3cret"), "the URL is logged bare: {log}");
    assert!(log.contains(&format!("webhook {url}")), "{log}");
    let tried: BTreeSet<String> = got.lock().unwrap().iter().map(|(k, _)| k.clone()).collect();

    healthy.store(true, Ordering::SeqCst);
    let s = serve_with(scratch, &vars, &[]);
    until(&s, "every fire delivered after the restart", || delivered(&got).len() >= 5 && dispatch_cursor(&s) >= 5);
    let once = delivered(&got);
    assert_eq!(once.len(), 5, "{once:?}");
    assert!(once.values().all(|n| *n == 1), "each fire delivered once: {once:?}");
    assert!(tried.iter().all(|k| once.contains_key(k)), "the same idempotency keys: {tried:?} {once:?}");
    assert!(dead_letters(&s).is_empty());
}

#[test]
fn a_receiver_that_hangs_on_one_fire_holds_up_no_other_and_the_backlog_shows_it() {
    // Holds the first request it gets open and unanswered until `release`,
    // then closes it; answers every other one 200.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (got, release, requests) =
        (Arrivals::default(), Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let (seen, released, count) = (Arc::clone(&got), Arc::clone(&release), Arc::clone(&requests));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (seen, released, first) =
                (Arc::clone(&seen), Arc::clone(&released), count.fetch_add(1, Ordering::SeqCst) == 0);
            std::thread::spawn(move || {
                let Some((key, _)) = read_request(&stream) else { return };
                if first {
                    seen.lock().unwrap().push((key, "held"));
                    while !released.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    return; // closed unanswered
                }
                seen.lock().unwrap().push((key, "200"));
                answer(stream, "200 OK");
            });
        }
    });
    let s = serve_with(
        Scratch::new(),
        &[
            ("WATCH_DISPATCHER_ENABLED", "1"),
            ("WATCH_DISPATCH_WEBHOOK", url.as_str()),
            ("WATCH_DISPATCH_BACKOFF_MS", "10"),
            // Only the receiver lets go of the held attempt, never this timer.
            ("WATCH_DISPATCH_TIMEOUT_MS", "600000"),
        ],
        &[],
    );
    until(&s, "the four other fires delivered past the held one", || delivered(&got).len() >= 4);
    let held = got.lock().unwrap().iter().find(|(_, how)| *how == "held").cloned().expect("the first request held");
    // The receiver answered them; the dispatcher counts each once its answer is read.
    let mut backlog = Value::Null;
    until(&s, "the dispatcher counts the four", || {
        backlog = call(&s, "GET", "/v1/dispatch", None, None).2;
        backlog["delivered"] == 4
    });
    let held_seq: u64 = held.0.split('-').nth(2).unwrap().parse().unwrap();
    assert_eq!((backlog["inFlight"].as_u64(), backlog["delivered"].as_u64()), (Some(1), Some(4)), "{backlog}");
    assert!(backlog["cursor"].as_u64().unwrap() < held_seq, "the cursor waits before it: {backlog}");
    assert!(backlog["backlog"].as_u64().unwrap() >= 1, "{backlog}");
    release.store(true, Ordering::SeqCst);
    until(&s, "the held fire delivered on its retry", || delivered(&got).contains_key(&held.0));
    until(&s, "the cursor past all five", || dispatch_cursor(&s) >= 5);
    let arrivals = got.lock().unwrap().clone();
    let retry_at = arrivals.iter().rposition(|(k, _)| *k == held.0).unwrap();
    let others: Vec<&(String, &str)> = arrivals.iter().filter(|(k, _)| *k != held.0).collect();
    assert_eq!(others.len(), 4, "each other fire once, on its first attempt: {arrivals:?}");
    assert!(
        arrivals[..retry_at].iter().filter(|(k, _)| *k != held.0).count() == 4,
        "none waited behind it: {arrivals:?}"
    );
    assert_eq!(delivered(&got).values().sum::<usize>(), 5, "{arrivals:?}");
    assert!(dead_letters(&s).is_empty());
    // The one attempt made again is counted, and the last delivery timed.
    let after = call(&s, "GET", "/v1/dispatch", None, None).2;
    assert_eq!(after["retried"], 1, "{after}");
    assert!(after["lastDeliveredAt"].as_i64().is_some_and(|ms| ms > 1_700_000_000_000), "{after}");
}

/// How many connections a test may hold open at once: 1000, or fewer when
/// the descriptor limit (shared by this process and the server) is lower.
fn connection_budget() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct it is given.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    let soft = if got == 0 { limit.rlim_cur as usize } else { 1024 };
    1000.min(soft.saturating_sub(256) / 2).max(16)
}

fn connect(s: &Served, first_bytes: &[u8]) -> TcpStream {
    let mut c = TcpStream::connect(s.authority()).unwrap();
    c.write_all(first_bytes).unwrap();
    c
}

/// Reads until the server closes the connection; panics if it does not within a minute.
fn closed_by_server(c: &mut TcpStream) {
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                panic!("still open a minute later")
            }
            Err(_) => return, // reset: closed too
        }
    }
}

#[test]
fn half_open_connections_are_timed_out_reads_still_answer_and_sigterm_ends_serve_within_5_s_with_clients_holding_on() {
    let n = connection_budget();
    let s = serve_with(Scratch::new(), &[], &["--header-timeout", "2"]);
    // A kept-alive connection, answered, then idle: closed by the same timeout.
    let mut idle = connect(&s, format!("GET /v1/gates HTTP/1.1\r\nhost: {}\r\n\r\n", s.authority()).as_bytes());
    closed_by_server(&mut idle);
    // Half a request line each.
    let mut half: Vec<TcpStream> = (0..n).map(|_| connect(&s, b"GET /v1/gat")).collect();
    let (status, _, _) = call(&s, "GET", "/v1/gates", None, None);
    assert_eq!(status, 200, "reads answer beside {n} half-open connections");
    for c in &mut half {
        closed_by_server(c);
    }
    drop(half);
    // Requests whose body never comes: each is inside its handler.
    let head = format!(
        "POST /v1/admin/arming HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{",
        s.authority()
    );
    let holding: Vec<TcpStream> = (0..n).map(|_| connect(&s, head.as_bytes())).collect();
    // Accepted in order: once a later request is answered, the server holds them all.
    assert_eq!(call(&s, "GET", "/v1/gates", None, None).0, 200);
    let signalled = Instant::now();
    let (status, _scratch) = s.stop();
    let took = signalled.elapsed();
    eprintln!("SIGTERM ended serve in {took:?} with {n} clients holding on");
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(5), "SIGTERM took {took:?} with {n} clients holding on");
    drop(holding);
}

/// A connection the server holds a place for: one request answered 200 on
/// it, kept alive (`None` when it was refused instead: a place was still
/// taken by a connection the server had not yet seen end).
fn held_connection(s: &Served) -> Option<TcpStream> {
    let c = connect(s, format!("GET /v1/gates HTTP/1.1\r\nhost: {}\r\n\r\n", s.authority()).as_bytes());
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut reader = BufReader::new(&c);
    let mut status = String::new();
    reader.read_line(&mut status).ok()?;
    if !status.starts_with("HTTP/1.1 200") {
        return None;
    }
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    reader.read_exact(&mut vec![0; length]).ok()?;
    drop(reader);
    Some(c)
}

#[test]
fn over_the_connection_cap_a_connection_is_refused_and_the_log_says_so() {
    // Kept-alive connections wait for their next request as long as the
    // test may need, under any load.
    let s = serve_with(Scratch::new(), &[], &["--max-connections", "8", "--header-timeout", "120"]);
    // The known point: eight connections each answered, so the server holds
    // exactly these eight places (every place is one of them), whatever
    // connection of the start-up's polling it had not yet seen end; one
    // refused meanwhile is tried again.
    let mut idle: Vec<TcpStream> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while idle.len() < 8 {
        assert!(Instant::now() < deadline, "eight connections not held within 60 s");
        idle.extend(held_connection(&s));
    }
    let mut extra = connect(&s, format!("GET /v1/gates HTTP/1.1\r\nhost: {}\r\n\r\n", s.authority()).as_bytes());
    extra.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut answer = String::new();
    let _ = extra.read_to_string(&mut answer);
    assert!(!answer.starts_with("HTTP/1.1 200"), "over the cap, not served: {answer}");
    assert!(answer.is_empty() || answer.contains("too_many_connections"), "{answer}");
    until(&s, "the log line", || s.log().contains("connection cap is reached"));
    drop(idle);
    until(&s, "served again once connections end", || call(&s, "GET", "/v1/gates", None, None).0 == 200);
}

/// A page on another loopback port, as any site the user opens could
/// serve: its script reads `target` and writes what it got into the page.
fn attacker_page(target: &str) -> String {
    let page = format!(
        "<!doctype html><html><head><title>elsewhere</title></head><body><pre id=\"out\">pending</pre><script>\
         fetch(\"{target}\").then(async r => {{ document.getElementById(\"out\").textContent = \"status \" + r.status + \" \" + await r.text(); }})\
         .catch(e => {{ document.getElementById(\"out\").textContent = \"unreadable \" + e; }});</script></body></html>"
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                line.clear();
            }
            let mut stream = stream;
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                )
                .as_bytes(),
            );
        }
    });
    url
}

#[test]
fn in_headless_chromium_a_rebound_name_and_a_page_on_another_port_are_both_refused() {
    let s = serve(&[("WATCH_ADMIN_TOKEN", ADMIN)]);
    let artifacts = root().join("target/e2e/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let profile = s.out.parent().unwrap().join("chromium-profile");
    let browser = |url: &str, args: &[&str]| {
        let mut c = std::process::Command::new(chromium());
        c.args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1280,900"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("--host-resolver-rules=MAP rebind.test 127.0.0.1")
            .arg("--virtual-time-budget=10000")
            .args(args)
            .arg(url)
            .stdin(std::process::Stdio::null());
        let out = run_within(c, Duration::from_secs(120));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The rebound name: the browser believes it talks to rebind.test.
    let dom = browser(&format!("http://rebind.test:{}/v1/issues", port(&s)), &["--dump-dom"]);
    assert!(dom.contains("misdirected_host") && dom.contains("421"), "{dom}");
    assert!(!dom.contains("\"items\""), "no issue reached the page: {dom}");

    // A page from another origin fetching the API.
    let page = attacker_page(&format!("{}/v1/issues", s.base));
    let dom = browser(&page, &["--dump-dom"]);
    let out = dom.split("<pre id=\"out\">").nth(1).and_then(|r| r.split("</pre>").next()).unwrap_or("");
    assert!(out.starts_with("status 403 ") && out.contains("cross_origin"), "the page read the refusal: {dom}");
    assert!(!out.contains("\"items\""), "{out}");
    let shot = artifacts.join("watch-rebinding-refused.png");
    let _ = std::fs::remove_file(&shot);
    browser(&page, &[&format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{} bytes", png.len());
}
