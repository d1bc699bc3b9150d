//! `cargo xtask bench`'s fleet part: the release `sentinel-host` ships a log
//! of 100 000 fires to a local `nats-server` (loopback, file storage), as
//! `run --once` does, and the result says fires per second and bytes per
//! fire (the payload, and what the server's store holds on disk).
//!
//! Owns the run (the data, the local log made first without `[fleet]`, a
//! fresh server per `in_flight` tried, the ship timed against the same run
//! without `[fleet]`) and its writing: a table between its own markers of
//! `docs/benchmarks.md` and the `fleetLoad` key of `docs/benchmarks.json`.
//! Never the shipper's code: it drives the binary, as an install runs it.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

pub const BEGIN: &str = "<!-- bench:fleet:begin (written by cargo xtask bench) -->";
pub const END: &str = "<!-- bench:fleet:end -->";
const JSON_KEY: &str = "fleetLoad";

/// One ship of the whole log at one `in_flight`.
#[derive(Debug, Clone)]
pub struct Ship {
    pub in_flight: usize,
    /// Seconds the ship added to the same `run --once` without `[fleet]`.
    pub ship_s: f64,
    pub fires_per_s: f64,
    /// Bytes of `SENTINEL_FIRES`' files in the server's store, per fire.
    pub stored_bytes_per_fire: f64,
}

#[derive(Debug, Clone)]
pub struct FleetLoad {
    pub date: String,
    pub git: String,
    pub nats_server: String,
    pub fires: usize,
    /// The fire-log entry as published (its JSON), bytes per fire.
    pub payload_bytes_per_fire: f64,
    pub ships: Vec<Ship>,
}

/// What the run needs: the release host, the built detectors, a work folder.
pub struct Setup<'a> {
    pub host: &'a Path,
    pub detectors: &'a Path,
    pub work: &'a Path,
    pub fires: usize,
}

/// Makes the log, then ships it once per `in_flight` value.
pub fn run(setup: &Setup<'_>, in_flights: &[usize]) -> Result<FleetLoad> {
    let work = setup.work;
    if work.exists() {
        std::fs::remove_dir_all(work).with_context(|| format!("cannot clear {}", work.display()))?;
    }
    let (data, out) = (work.join("data"), work.join("out"));
    // tool_error alone: one fire per failed call, nothing else loaded.
    let detectors = work.join("detectors");
    std::fs::create_dir_all(&detectors)?;
    std::fs::copy(setup.detectors.join("tool_error.wasm"), detectors.join("tool_error.wasm"))
        .context("tool_error.wasm is built (cargo xtask build-detectors)")?;
    failures(&data, setup.fires)?;
    let limits = format!("[limits]\nfires_per_scan = {}\n", 2 * setup.fires);
    let plain = write(work, "plain.toml", &limits)?;
    run_once(setup, &data, &out, &plain).context("the local log (no [fleet])")?;
    let (fires, payload) = log_size(&out)?;
    let mut ships = Vec::new();
    for &in_flight in in_flights {
        ships.push(ship(setup, &out, &limits, in_flight, fires)?);
    }
    Ok(FleetLoad {
        date: today(),
        git: git_rev(),
        nats_server: nats_version(),
        fires,
        payload_bytes_per_fire: payload as f64 / fires.max(1) as f64,
        ships,
    })
}

/// One ship into a fresh server: timed against the same run without `[fleet]`.
fn ship(setup: &Setup<'_>, out: &Path, limits: &str, in_flight: usize, fires: usize) -> Result<Ship> {
    let work = setup.work;
    let data = work.join("data");
    let store = work.join(format!("nats-{in_flight}"));
    let server = Server::start(&store)?;
    let _ = std::fs::remove_file(out.join("fleet.cursor"));
    let fleet = format!(
        "[fleet]\nnats = \"nats://127.0.0.1:{}\"\nin_flight = {in_flight}\nonce_budget_secs = 3600\n\n{limits}",
        server.port
    );
    let config = write(work, &format!("fleet-{in_flight}.toml"), &fleet)?;
    let plain = work.join("plain.toml");
    let base = run_once(setup, &data, out, &plain)?;
    let started = Instant::now();
    let said = run_once_said(setup, &data, out, &config)?;
    let ship_s = (started.elapsed().as_secs_f64() - base).max(1e-6);
    if !said.contains(&format!("fleet: cursor {fires}, backlog 0,")) {
        bail!("the ship at in_flight {in_flight} did not finish: {said}");
    }
    drop(server);
    let stored = dir_bytes(&store.join("jetstream/$G/streams/SENTINEL_FIRES"));
    Ok(Ship {
        in_flight,
        ship_s,
        fires_per_s: fires as f64 / ship_s,
        stored_bytes_per_fire: stored as f64 / fires as f64,
    })
}

/// `count` failed tool calls in one transaction (one fire each).
fn failures(data: &Path, count: usize) -> Result<()> {
    let mut conn = crate::datagen::messages_db(data)?;
    let tx = conn.transaction()?;
    for i in 0..count {
        let body = serde_json::json!({"turnId": format!("t{i}"), "from": {"botId": "bot-x"},
            "tool": {"name": "Bash", "ok": false, "output": format!("no layer {i} in /p{i}"), "exitCode": 1}});
        tx.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?1, 'th-x', ?2, 'activity', ?3)",
            rusqlite::params![format!("m{i}"), 1_000 + i as i64, body.to_string()],
        )?;
    }
    tx.commit()?;
    Ok(())
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// `run --once`: its wall time in seconds.
fn run_once(setup: &Setup<'_>, data: &Path, out: &Path, config: &Path) -> Result<f64> {
    let started = Instant::now();
    run_once_said(setup, data, out, config)?;
    Ok(started.elapsed().as_secs_f64())
}

/// `run --once`: what it said on stderr.
fn run_once_said(setup: &Setup<'_>, data: &Path, out: &Path, config: &Path) -> Result<String> {
    // Outside the repository (an output folder in it is refused), the key
    // and the component cache beside it, never in the user's folders.
    let work = setup.work;
    let o = Command::new(setup.host)
        .args(["run", "--once", "--json", "--detectors"])
        .arg(work.join("detectors"))
        .arg("--key-file")
        .arg(work.join("key/bench.ed25519"))
        .arg("--cache-dir")
        .arg(work.join("cache"))
        .arg("--data-dir")
        .arg(data)
        .arg("--out")
        .arg(out)
        .arg("--config")
        .arg(config)
        .stdout(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", setup.host.display()))?;
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    if !o.status.success() {
        bail!("run --once failed ({}): {said}", o.status);
    }
    Ok(said)
}

/// Fires in the exported log and their bytes (one JSON line each).
fn log_size(out: &Path) -> Result<(usize, u64)> {
    let (mut fires, mut bytes) = (0, 0);
    for e in std::fs::read_dir(out)? {
        let path = e?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with("fires-") && name.ends_with(".ndjson") {
            for line in std::fs::read_to_string(&path)?.lines().filter(|l| !l.is_empty()) {
                fires += 1;
                bytes += line.len() as u64;
            }
        }
    }
    Ok((fires, bytes))
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// `nats-server -js -sd DIR -a 127.0.0.1 -p PORT`, stopped when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(store: &Path) -> Result<Server> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("nats-server")
            .args(["-js", "-sd"])
            .arg(store)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start nats-server (apt-get install nats-server)")?;
        let until = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > until {
                bail!("nats-server did not listen on {port}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Server { child, port })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM: the server flushes its store before the bytes are counted.
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

fn nats_version() -> String {
    Command::new("nats-server")
        .arg("--version")
        .output()
        .map_or_else(|_| "unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

fn git_rev() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(|| "unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

fn today() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .map_or_else(|_| "unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

impl FleetLoad {
    /// The result as `docs/benchmarks.json` keeps it.
    pub fn json(&self) -> serde_json::Value {
        let ships: Vec<_> = self
            .ships
            .iter()
            .map(|r| {
                serde_json::json!({"inFlight": r.in_flight, "shipS": r.ship_s, "firesPerS": r.fires_per_s,
                    "storedBytesPerFire": r.stored_bytes_per_fire})
            })
            .collect();
        serde_json::json!({"date": self.date, "git": self.git, "natsServer": self.nats_server, "fires": self.fires,
            "payloadBytesPerFire": self.payload_bytes_per_fire, "ships": ships})
    }

    pub fn markdown(&self) -> String {
        let mut s = format!(
            "Run on {} (git `{}`, {}) by `cargo xtask bench`: the release `sentinel-host run --once` ships a log of \
             {} fires to a local nats-server (loopback, file storage, one server per row); the time is what the ship \
             adds to the same run without `[fleet]`. Payload: {:.0} bytes a fire (the entry's JSON).\n\n",
            self.date, self.git, self.nats_server, self.fires, self.payload_bytes_per_fire
        );
        s += "| in_flight | ship s | fires/s | stored bytes/fire |\n|---:|---:|---:|---:|\n";
        for r in &self.ships {
            s += &format!(
                "| {} | {:.1} | {:.0} | {:.0} |\n",
                r.in_flight, r.ship_s, r.fires_per_s, r.stored_bytes_per_fire
            );
        }
        s
    }

    /// The table between the markers of `markdown`, the result under
    /// `fleetLoad` in `json` (the rest of both kept).
    pub fn write(&self, markdown: &Path, json: &Path) -> Result<()> {
        let doc = std::fs::read_to_string(markdown).unwrap_or_default();
        let (Some(a), Some(b)) = (doc.find(BEGIN), doc.find(END)) else {
            bail!("{} has no {BEGIN} … {END}", markdown.display());
        };
        let spliced = format!("{}{BEGIN}\n{}{}", &doc[..a], self.markdown(), &doc[b..]);
        std::fs::write(markdown, spliced).with_context(|| format!("cannot write {}", markdown.display()))?;
        let mut results: serde_json::Value = match std::fs::read(json) {
            Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| format!("{} is not JSON", json.display()))?,
            Err(_) => serde_json::json!({}),
        };
        if let Some(obj) = results.as_object_mut() {
            obj.insert(JSON_KEY.to_owned(), self.json());
        }
        std::fs::write(json, serde_json::to_string_pretty(&results)? + "\n")
            .with_context(|| format!("cannot write {}", json.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_result_lands_between_its_markers_and_joins_the_json_without_dropping_it() {
        let dir = std::env::temp_dir().join(format!("fleet-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (md, json) = (dir.join("b.md"), dir.join("b.json"));
        std::fs::write(&md, format!("intro\n{BEGIN}\nold\n{END}\noutro\n")).unwrap();
        std::fs::write(&json, r#"{"sizes": []}"#).unwrap();
        let ship = Ship { in_flight: 1, ship_s: 2.0, fires_per_s: 5000.0, stored_bytes_per_fire: 652.0 };
        let r = FleetLoad {
            date: "2026-12-03".into(),
            git: "abc".into(),
            nats_server: "v2.9.10".into(),
            fires: 10_000,
            payload_bytes_per_fire: 496.0,
            ships: vec![ship],
        };
        r.write(&md, &json).unwrap();
        let doc = std::fs::read_to_string(&md).unwrap();
        assert!(doc.starts_with(&format!("intro\n{BEGIN}\n")) && doc.ends_with(&format!("{END}\noutro\n")), "{doc}");
        assert!(doc.contains("| 1 | 2.0 | 5000 | 652 |") && !doc.contains("old"), "{doc}");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(
            (v["sizes"].clone(), v[JSON_KEY]["ships"][0]["firesPerS"].as_f64()),
            (serde_json::json!([]), Some(5000.0))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
