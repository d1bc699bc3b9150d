//! A gateway-shaped layout for the stock sentinels: an inbox, a backlog, an
//! audit folder, the Council's append-only `sessions/index.jsonl`, a SQLite
//! outbox (a rollback journal, rows acked in place), and a sentinels config file binding them to the sentinels'
//! roles; then the changes that make each sentinel fire.
//!
//! It owns writing that layout (for `cargo xtask demo` and tests); it never
//! runs the sentinel. The queue depth comes from an HTTP endpoint the caller
//! serves ([`serve_depth`]).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

/// The config file the layout is scanned with (YAML, `SENTINELS_CONFIG_PATH`).
pub fn sentinels_yaml(queue_url: &str) -> String {
    format!(
        r#"# Sources are named by the operator; each stock sentinel's roles are bound to them.
sources:
  directory:
    - {{ name: gw-inbox, path: inbox }}
    - {{ name: gw-backlog, path: backlog }}
    - {{ name: gw-audit, path: audit }}
  digest:
    - {{ name: gw-precedents, path: council/sessions/index.jsonl }}
  http:
    - name: gw-queue
      url: "{queue_url}"
      jsonpath: "$.active_total"
      timeout_ms: 2000
  sqlite:
    - name: gw-outbox
      file: outbox.db
      # rows are written pending and acked in place: read the rows changed
      # since the newest change seen, 10 minutes back (each ack fires once)
      query: "SELECT id, status, worker_provenance, updated_at FROM outbox WHERE updated_at > :cursor ORDER BY updated_at"
      cursor: updated_at
      reread: 10m
      columns: {{ id: int, updated_at: int }}
sentinels:
  file-inbox-watch:
    roles: {{ inbox: gw-inbox }}
  silence-watch:
    roles: {{ audit: gw-audit, backlog: gw-backlog }}
    values: {{ threshold_hours: 6 }}
  queue-depth-watch:
    roles: {{ queue: gw-queue }}
    values: {{ threshold: 50 }}
  watch-health-watch: {{}}
  completion-verify-watch:
    roles: {{ outbox: gw-outbox }}
  precedent-integrity-watch:
    roles: {{ precedents: gw-precedents }}
  ledger-delta-watch:
    enabled: false
  anomaly-watch:
    enabled: false
"#
    )
}

/// Writes the quiet layout into `dir` (created) and its config file beside
/// it; returns the config file's path.
pub fn generate(dir: &Path, queue_url: &str) -> Result<PathBuf> {
    for sub in ["inbox", "backlog", "audit", "council/sessions"] {
        std::fs::create_dir_all(dir.join(sub)).with_context(|| format!("cannot create {sub}"))?;
    }
    std::fs::write(dir.join("inbox/order-0001.json"), "{\"order\":1}\n")?;
    let audit = dir.join("audit/2026-11-30.ndjson");
    std::fs::write(&audit, "{\"event\":\"dispatch\"}\n")?;
    // The last audit event was eight hours ago.
    let eight_hours_ago = SystemTime::now() - Duration::from_secs(8 * 3600);
    std::fs::File::options().write(true).open(&audit)?.set_modified(eight_hours_ago)?;
    std::fs::write(dir.join("council/sessions/index.jsonl"), "{\"session\":1}\n{\"session\":2}\n{\"session\":3}\n")?;
    let db = rusqlite::Connection::open(dir.join("outbox.db"))?;
    db.execute_batch(
        "PRAGMA journal_mode=DELETE;
         CREATE TABLE outbox (id INTEGER PRIMARY KEY, status TEXT NOT NULL, worker_provenance TEXT,
                              updated_at INTEGER NOT NULL);",
    )?;
    let now = now_ms();
    db.execute(
        "INSERT INTO outbox VALUES (1, 'acked', 'VerifiedExact', ?1), (2, 'pending', NULL, ?1)",
        [now - 60_000],
    )?;
    let yaml = dir.with_extension("sentinels.yaml");
    std::fs::write(&yaml, sentinels_yaml(queue_url))?;
    Ok(yaml)
}

/// What happens next at the gateway: a new order in the inbox, pending work
/// in the backlog (while the audit log stays silent), a pending row acked in
/// place without provenance and a new row acked with unverified provenance,
/// and a precedent rewritten in the middle of the log.
pub fn stir(dir: &Path) -> Result<()> {
    std::fs::write(dir.join("inbox/order-0002.json"), "{\"order\":2}\n")?;
    std::fs::write(dir.join("backlog/job-0001.json"), "{\"job\":1}\n")?;
    let db = rusqlite::Connection::open(dir.join("outbox.db"))?;
    // Row 2, read pending by the quiet scan, is acked in place.
    db.execute("UPDATE outbox SET status = 'acked', updated_at = ?1 WHERE id = 2", [now_ms()])?;
    db.execute("INSERT INTO outbox VALUES (3, 'acked', 'Inferred', ?1)", [now_ms()])?;
    std::fs::write(dir.join("council/sessions/index.jsonl"), "{\"session\":1}\n{\"session\":7}\n{\"session\":3}\n")?;
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Serves `{"active_total": N}` on loopback for as long as the process
/// lives; returns the URL and N.
pub fn serve_depth() -> Result<(String, Arc<AtomicI64>)> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot listen on loopback")?;
    let url = format!("http://{}/metrics", listener.local_addr()?);
    let depth = Arc::new(AtomicI64::new(0));
    let shared = depth.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let body = format!("{{\"active_total\": {}}}", shared.load(Ordering::SeqCst));
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    Ok((url, depth))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_config_is_valid_and_is_the_readme_example() {
        let url = "http://127.0.0.1:8080/metrics";
        let text = sentinels_yaml(url);
        let config = sentinel_host::config::Config::parse_yaml(&text, Path::new("sentinels.yaml")).unwrap();
        assert_eq!(config.sentinels.len(), 8);
        assert!(config.health_bound());
        let readme = std::fs::read_to_string(crate::guest::repo_root().join("README.md")).unwrap();
        assert!(readme.contains(&text), "README.md's example is the demo's config: update it with this text");
    }
}
