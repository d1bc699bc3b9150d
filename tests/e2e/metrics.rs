//! `GET /metrics` scraped by a real Prometheus (Debian's `prometheus`, on a
//! loopback port with a temporary TSDB, scraping every second): the target
//! is up, the fires it stored add up to the fire log's entries, a sentinel
//! quarantined through the admin API shows in the standing gauge; and
//! `promtool check metrics` passes on the scraped text.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;
use crate::watch::{ADMIN, Served, agent, call, serve};

/// A bound on a hang, never a threshold a loaded machine could miss.
const HANG: Duration = Duration::from_secs(120);

/// `prometheus` scraping one target, killed when dropped.
struct Prometheus {
    child: Child,
    base: String,
    log: std::path::PathBuf,
}

impl Prometheus {
    /// Starts it in `dir` (its config, TSDB and log there) and waits until it is ready.
    fn start(dir: &Path, target: &str) -> Prometheus {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: sentinel\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let log = dir.join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("prometheus is installed (cargo xtask test installs it)");
        let p = Prometheus { child, base: format!("http://127.0.0.1:{port}"), log };
        p.until("ready", || agent().get(format!("{}/-/ready", p.base)).call().is_ok_and(|r| r.status() == 200));
        p
    }

    /// An instant query's result vector.
    fn query(&self, promql: &str) -> Vec<Value> {
        let Ok(mut r) = agent().get(format!("{}/api/v1/query", self.base)).query("query", promql).call() else {
            return Vec::new();
        };
        let body: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap_or_default()).unwrap_or_default();
        body["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The single value of an instant query (`None` while it has none).
    fn value(&self, promql: &str) -> Option<f64> {
        let result = self.query(promql);
        match result.as_slice() {
            [one] => one["value"][1].as_str()?.parse().ok(),
            _ => None,
        }
    }

    /// Polls `f` until it is true, or fails after [`HANG`] saying `what` with Prometheus's log.
    fn until(&self, what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + HANG;
        while !f() {
            assert!(Instant::now() < deadline, "{what}: {}", std::fs::read_to_string(&self.log).unwrap_or_default());
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Entries in the exported fire log (every line of every segment).
fn log_entries(out: &Path) -> usize {
    listing(out)
        .iter()
        .filter(|n| n.starts_with("fires-") && n.ends_with(".ndjson"))
        .map(|n| std::fs::read_to_string(out.join(n)).unwrap().lines().count())
        .sum()
}

/// Fires of one type, as `/v1/fires` lists them (all of them fit one page here).
fn fires_of(s: &Served, fire_type: &str) -> usize {
    let (_, _, page) = call(s, "GET", &format!("/v1/fires?type={fire_type}&limit=500"), None, None);
    page["items"].as_array().map_or(0, Vec::len)
}

/// `GET /metrics` as `promtool` asks for it (the Prometheus text format).
fn scrape_text(s: &Served) -> (u16, String, String) {
    let mut r = agent().get(format!("{}/metrics", s.base)).header("accept", "text/plain").call().unwrap();
    let ct = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    (r.status().as_u16(), ct, r.body_mut().read_to_string().unwrap())
}

fn promtool_check(text: &str) -> std::process::Output {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool comes with prometheus");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    wait_within(child, HANG)
}

#[test]
fn metrics_a_real_prometheus_scrapes_serve_its_fires_add_up_to_the_log_and_a_quarantine_shows() {
    let s = serve(&[("BOOTSTRAP_TOKEN", ADMIN)]);
    let scratch = Scratch::new();
    let prometheus = Prometheus::start(scratch.dir.path(), s.authority());
    let up = "up{job=\"sentinel\"}";
    prometheus.until("the target is up", || prometheus.value(up) == Some(1.0));

    // The fires Prometheus stored add up to the log's entries, and its
    // occurrences to the log's occurrence entries.
    // (The segments are exported just after the commit `/v1/fires` reads:
    // both are read again until they agree.)
    let mut entries = 0;
    prometheus.until("sum(sentinel_fires_total) reaches the exported log's entries", || {
        entries = log_entries(&s.out);
        prometheus.value("sum(sentinel_fires_total)") == Some(entries as f64)
    });
    assert!(entries >= 5, "{entries}");
    let occurrences = fires_of(&s, "occurrence");
    assert_eq!(prometheus.value("sum(sentinel_fires_total{type=\"occurrence\"})"), Some(occurrences as f64));
    assert_eq!(prometheus.value("sentinel_fire_log_entries"), Some(entries as f64));
    assert_eq!(prometheus.value("sentinel_fire_log_verified"), Some(1.0));
    assert_eq!(prometheus.value("sentinel_standing{sentinel=\"tool_error\",state=\"ok\"}"), Some(1.0));
    let build = prometheus.query("sentinel_build_info");
    assert_eq!(build.len(), 1, "{build:?}");
    assert_eq!(build[0]["metric"]["version"], env!("CARGO_PKG_VERSION"), "{build:?}");
    assert!(prometheus.value("process_resident_memory_bytes").is_some_and(|b| b > 0.0));

    // Quarantined through the admin API: the standing gauge says so, and
    // the quarantine is one more entry, of its type.
    let (status, _, r) = call(&s, "POST", "/v1/admin/sentinels/tool_error/quarantine", Some(ADMIN), None);
    assert_eq!(status, 200, "{r}");
    let quarantined = "sentinel_standing{sentinel=\"tool_error\",state=\"quarantined\"}";
    prometheus.until("the standing gauge shows the quarantine", || prometheus.value(quarantined) == Some(1.0));
    let standing = prometheus.query("sentinel_standing{sentinel=\"tool_error\"} == 1");
    assert_eq!(standing.len(), 1, "one standing at a time: {standing:?}");
    let before = entries;
    prometheus.until("sum(sentinel_fires_total) reaches the exported log's entries again", || {
        entries = log_entries(&s.out);
        prometheus.value("sum(sentinel_fires_total)") == Some(entries as f64)
    });
    assert_eq!(entries, before + 1, "the quarantine is one entry");
    assert_eq!(prometheus.value("sentinel_fires_total{sentinel=\"tool_error\",type=\"quarantine\"}"), Some(1.0));

    // promtool lints the text; OpenMetrics is what a client gets by default.
    let (status, ct, text) = scrape_text(&s);
    assert_eq!((status, ct.as_str()), (200, "text/plain; version=0.0.4; charset=utf-8"), "{text}");
    let lint = promtool_check(&text);
    assert!(
        lint.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    let (status, ct, body) = call(&s, "GET", "/metrics", None, None);
    assert_eq!((status, ct.as_str()), (200, "application/openmetrics-text; version=1.0.0; charset=utf-8"));
    assert!(body.as_str().unwrap().ends_with("# EOF\n"), "{body}");
    drop(prometheus);
}
