//! A fast sentinel's latency from a file landing in its inbox to the fire
//! in the log (`sentinel-fire-latency`), as a result: its JSON form (the
//! `fireLatency` key of `docs/benchmarks.json`) and its table, written into
//! `docs/benchmarks.md` between markers of its own. Owns the shape and the
//! writing; the measurement itself is the binary's.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::report::splice_between;

pub const BEGIN: &str = "<!-- bench:fire-latency:begin (written by cargo xtask bench) -->";
pub const END: &str = "<!-- bench:fire-latency:end -->";
/// The key of `docs/benchmarks.json` the result is kept under.
pub const JSON_KEY: &str = "fireLatency";

/// One way a file lands, and how long its fires took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// How the file landed, as the table says it.
    pub delivery: String,
    pub files: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FireLatency {
    pub date: String,
    pub git: String,
    /// The directory source's `settle`, ms.
    pub settle_ms: u64,
    pub deliveries: Vec<Delivery>,
}

impl FireLatency {
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "Run on {} (git `{}`) by `sentinel-fire-latency`: `sentinel-host run --interval 3600` with \
             file-inbox-watch kicked by the inbox watcher (`settle` {} ms), each file's time from landing \
             in the inbox to its fire line in `fires-*.ndjson`, one file at a time.\n\n",
            self.date, self.git, self.settle_ms
        );
        s += "| delivery | files | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|\n";
        for d in &self.deliveries {
            s += &format!("| {} | {} | {:.1} | {:.1} | {:.1} |\n", d.delivery, d.files, d.p50_ms, d.p99_ms, d.max_ms);
        }
        s
    }

    /// Writes the table between this result's markers of `markdown`.
    pub fn write_markdown(&self, markdown: &Path) -> Result<()> {
        let doc = std::fs::read_to_string(markdown).unwrap_or_default();
        std::fs::write(markdown, splice_between(&doc, BEGIN, END, &self.markdown()))
            .with_context(|| format!("cannot write {}", markdown.display()))
    }

    /// Sets the `fireLatency` key of the JSON results at `json`.
    pub fn write_json(&self, json: &Path) -> Result<()> {
        crate::report::set_json_key(json, JSON_KEY, serde_json::to_value(self)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fire_latency_lands_between_its_own_markers_and_in_its_json_key() {
        let dir = tempfile::tempdir().unwrap();
        let (md, json) = (dir.path().join("b.md"), dir.path().join("b.json"));
        std::fs::write(&md, format!("intro\n{BEGIN}\nold\n{END}\noutro\n")).unwrap();
        std::fs::write(&json, r#"{"sizes": []}"#).unwrap();
        let d = Delivery { delivery: "renamed in".into(), files: 3, p50_ms: 1.0, p99_ms: 2.0, max_ms: 3.0 };
        let r = FireLatency { date: "2026-12-03".into(), git: "abc".into(), settle_ms: 500, deliveries: vec![d] };
        r.write_markdown(&md).unwrap();
        r.write_json(&json).unwrap();
        let doc = std::fs::read_to_string(&md).unwrap();
        assert!(
            doc.contains("| renamed in | 3 | 1.0 | 2.0 | 3.0 |") && !doc.contains("old") && doc.ends_with("outro\n")
        );
        let back: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(back["sizes"], serde_json::json!([]));
        assert_eq!(serde_json::from_value::<FireLatency>(back[JSON_KEY].clone()).unwrap(), r);
    }
}
