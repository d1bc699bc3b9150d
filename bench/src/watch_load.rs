//! The watch API's read latency under a scan and under big fire logs
//! (`sentinel-watch-load`), as a result: its JSON form (the `watchLoad` key
//! of `docs/benchmarks.json`) and its tables, written into
//! `docs/benchmarks.md` between markers of its own. Owns the shape and the
//! writing; the load itself is the binary's.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::report::splice_between;

pub const BEGIN: &str = "<!-- bench:watch-load:begin (written by cargo xtask bench) -->";
pub const END: &str = "<!-- bench:watch-load:end -->";
/// The key of `docs/benchmarks.json` the result is kept under.
pub const JSON_KEY: &str = "watchLoad";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    pub endpoint: String,
    pub requests: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchLoad {
    pub date: String,
    pub git: String,
    pub records: u64,
    pub clients: usize,
    /// How long the served scan took, in seconds.
    pub scan_s: f64,
    /// False when the load stopped at its time bound before the scan ended.
    pub scanned: bool,
    /// Requests that failed or did not answer 200.
    pub errors: u64,
    /// One per endpoint, then `all reads`.
    pub endpoints: Vec<Endpoint>,
    /// The reads with no scan running, over logs of several sizes.
    #[serde(default)]
    pub logs: Vec<LogLoad>,
}

/// The reads over an output folder whose log holds `fires`, nothing scanning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogLoad {
    pub fires: u64,
    /// The first `/v1/chain` after `serve` started: the one full verification.
    pub first_chain_ms: f64,
    /// How long the clients read, in seconds.
    pub seconds: f64,
    pub errors: u64,
    /// One per endpoint, then `all reads`.
    pub endpoints: Vec<Endpoint>,
}

impl WatchLoad {
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "Run on {} (git `{}`) by `sentinel-watch-load`: the watch API read while the sentinel scans {} \
             records ({} clients on loopback, one connection per request; the scan took {:.1} s{}).\n\n",
            self.date,
            self.git,
            self.records,
            self.clients,
            self.scan_s,
            if self.scanned { "" } else { ", stopped at the time bound" }
        );
        s += "| endpoint | requests | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|\n";
        for e in &self.endpoints {
            s +=
                &format!("| {} | {} | {:.2} | {:.2} | {:.2} |\n", e.endpoint, e.requests, e.p50_ms, e.p99_ms, e.max_ms);
        }
        s += &format!("\n{} requests failed or were not 200.\n", self.errors);
        if !self.logs.is_empty() {
            s += &self.logs_markdown();
        }
        s
    }

    /// The reads over each log size, side by side, with the ratio of the
    /// largest log's p99 to the smallest's.
    fn logs_markdown(&self) -> String {
        let (first, last) = (&self.logs[0], &self.logs[self.logs.len() - 1]);
        let sizes: Vec<String> = self.logs.iter().map(|l| l.fires.to_string()).collect();
        let mut s = format!(
            "\nWith no scan running, over output folders whose fire log holds {} fires ({} clients, \
             {:.0} s of reads each; the first `/v1/chain` after the start, the one full verification, \
             took {} ms):\n\n",
            sizes.join(" and "),
            self.clients,
            first.seconds,
            self.logs.iter().map(|l| format!("{:.0}", l.first_chain_ms)).collect::<Vec<_>>().join(" and "),
        );
        s += "| endpoint |";
        for f in &sizes {
            s += &format!(" p50 ms at {f} | p99 ms at {f} |");
        }
        s += &format!(" p99 at {} / at {} |\n|---|", last.fires, first.fires);
        s += &"---:|".repeat(2 * self.logs.len() + 1);
        s += "\n";
        for (i, e) in first.endpoints.iter().enumerate() {
            s += &format!("| {} |", e.endpoint);
            for l in &self.logs {
                let at = &l.endpoints[i];
                s += &format!(" {:.2} | {:.2} |", at.p50_ms, at.p99_ms);
            }
            s += &format!(" {:.2} |\n", last.endpoints[i].p99_ms / e.p99_ms.max(1e-9));
        }
        let errors: u64 = self.logs.iter().map(|l| l.errors).sum();
        s += &format!("\n{errors} requests failed or were not 200.\n");
        s
    }

    /// Writes the table between this result's markers of `markdown`.
    pub fn write_markdown(&self, markdown: &Path) -> Result<()> {
        let doc = std::fs::read_to_string(markdown).unwrap_or_default();
        std::fs::write(markdown, splice_between(&doc, BEGIN, END, &self.markdown()))
            .with_context(|| format!("cannot write {}", markdown.display()))
    }

    /// Sets the `watchLoad` key of the JSON results at `json` (the rest of
    /// the file, the runner's, is kept; a missing file starts empty).
    pub fn write_json(&self, json: &Path) -> Result<()> {
        crate::report::set_json_key(json, JSON_KEY, serde_json::to_value(self)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WatchLoad {
        let e = |name: &str| Endpoint { endpoint: name.into(), requests: 3, p50_ms: 1.0, p99_ms: 2.0, max_ms: 3.0 };
        WatchLoad {
            date: "2026-12-01".into(),
            git: "abc".into(),
            records: 999_000,
            clients: 2,
            scan_s: 4.5,
            scanned: true,
            errors: 0,
            endpoints: vec![e("`GET /v1/gates`"), e("all reads")],
            logs: Vec::new(),
        }
    }

    #[test]
    fn the_watch_load_lands_between_its_own_markers_and_keeps_the_bench_tables() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("b.md");
        let bench = format!("{}\nbench tables\n{}\n", crate::report::BEGIN, crate::report::END);
        std::fs::write(&md, format!("intro\n{bench}prose\n{BEGIN}\nold\n{END}\noutro\n")).unwrap();
        sample().write_markdown(&md).unwrap();
        let doc = std::fs::read_to_string(&md).unwrap();
        assert!(doc.contains(&bench) && doc.contains("prose\n") && doc.ends_with(&format!("{END}\noutro\n")));
        assert!(doc.contains("| `GET /v1/gates` | 3 | 1.00 | 2.00 | 3.00 |") && !doc.contains("old"));
    }

    #[test]
    fn the_reads_over_each_log_size_are_side_by_side_with_their_ratio() {
        let e = |p99: f64| Endpoint {
            endpoint: "`GET /v1/chain`".into(),
            requests: 9,
            p50_ms: 1.0,
            p99_ms: p99,
            max_ms: 9.0,
        };
        let log = |fires: u64, p99: f64| LogLoad {
            fires,
            first_chain_ms: fires as f64 / 1000.0,
            seconds: 20.0,
            errors: 0,
            endpoints: vec![e(p99)],
        };
        let r = WatchLoad { logs: vec![log(100_000, 2.0), log(1_000_000, 3.0)], ..sample() };
        let md = r.markdown();
        assert!(md.contains("took 100 and 1000 ms"), "{md}");
        assert!(md.contains("| `GET /v1/chain` | 1.00 | 2.00 | 1.00 | 3.00 | 1.50 |"), "{md}");
        // A result from before the logs reads back.
        let old = serde_json::json!({"date": "d", "git": "g", "records": 1, "clients": 2, "scanS": 1.0,
            "scanned": true, "errors": 0, "endpoints": []});
        assert!(serde_json::from_value::<WatchLoad>(old).unwrap().logs.is_empty());
    }

    #[test]
    fn the_watch_load_joins_the_json_results_without_dropping_them() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("b.json");
        std::fs::write(&json, r#"{"date": "x", "sizes": []}"#).unwrap();
        sample().write_json(&json).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(doc["sizes"], serde_json::json!([]));
        let back: WatchLoad = serde_json::from_value(doc[JSON_KEY].clone()).unwrap();
        assert_eq!(back, sample());
    }
}
