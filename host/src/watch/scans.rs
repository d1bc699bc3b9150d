//! What the scans since this start add up to, for `/metrics`: scans by
//! path, their duration and phases, records read per source, runs and
//! failures per sentinel, and the decision call's duration.
//!
//! It owns the running figures (prometheus-client families, shared by the
//! clones a scrape registers) and taking in one [`ScanReport`]: the loop
//! hands every report to [`Live::record`](super::Live::record), which hands
//! it here. Only detectors that ran (loaded ones) are counted, and a
//! scrape shows only those still loaded ([`ScanMetrics::register`]), so the
//! `sentinel` label never holds more than the loaded names. It never reads
//! the ledger and never counts anything a report does not say.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::scan::{DetectorStatus, ScanReport};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PathLabel {
    /// `full`, or `fast` when nothing changed since the last scan.
    pub path: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub phase: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SentinelLabel {
    pub sentinel: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub sentinel: String,
    /// `ok` or `failed`.
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub sentinel: String,
    /// A failure kind's label (`fuel`, `deadline`, ...).
    pub kind: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Durations from 100 µs to about 26 s.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 4.0, 10))
}

/// The running figures; clones share them.
#[derive(Debug, Clone)]
pub struct ScanMetrics {
    scans: Family<PathLabel, Counter>,
    duration: Histogram,
    phases: Histograms<PhaseLabel>,
    records: Family<SourceLabel, Counter>,
    runs: Family<OutcomeLabels, Counter>,
    failures: Family<KindLabels, Counter>,
    decision: Histograms<SentinelLabel>,
    /// Every detector name counted so far (to drop those no longer loaded).
    named: Arc<Mutex<BTreeSet<String>>>,
}

impl Default for ScanMetrics {
    fn default() -> Self {
        ScanMetrics {
            scans: Family::default(),
            duration: seconds(),
            phases: Family::new_with_constructor(seconds),
            records: Family::default(),
            runs: Family::default(),
            failures: Family::default(),
            decision: Family::new_with_constructor(seconds),
            named: Arc::default(),
        }
    }
}

impl ScanMetrics {
    /// Takes in one scan's report.
    pub fn record(&self, report: &ScanReport) {
        let path = if report.unchanged_since.is_some() { "fast" } else { "full" };
        self.scans.get_or_create(&PathLabel { path }).inc();
        self.duration.observe(report.elapsed_ms as f64 / 1000.0);
        if let Some(p) = report.phases {
            for (phase, us) in
                [("read", p.read_us), ("decide", p.decide_us), ("commit", p.commit_us), ("export", p.export_us)]
            {
                self.phases.get_or_create(&PhaseLabel { phase }).observe(us as f64 / 1e6);
            }
        }
        for s in &report.sources {
            self.records.get_or_create(&SourceLabel { source: s.name.clone() }).inc_by(s.records);
        }
        let mut named = self.named.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for d in report.detectors.iter().filter(|d| matches!(d.status, DetectorStatus::Ok | DetectorStatus::Failed)) {
            named.insert(d.name.clone());
            let outcome = if d.status == DetectorStatus::Ok { "ok" } else { "failed" };
            self.runs.get_or_create(&OutcomeLabels { sentinel: d.name.clone(), outcome }).inc();
            if let Some(f) = &d.failure {
                self.failures.get_or_create(&KindLabels { sentinel: d.name.clone(), kind: f.kind.label() }).inc();
            }
            if d.status == DetectorStatus::Ok && d.calls > 0 {
                self.decision
                    .get_or_create(&SentinelLabel { sentinel: d.name.clone() })
                    .observe(d.finish_us as f64 / 1e6);
            }
        }
    }

    /// Registers the figures in `registry`, after dropping the series of
    /// every detector not in `loaded`.
    pub fn register(&self, registry: &mut Registry, loaded: &BTreeSet<String>) {
        self.forget_all_but(loaded);
        registry.register(
            "sentinel_scans",
            "Scans since this start, by path (fast: nothing changed)",
            self.scans.clone(),
        );
        registry.register_with_unit(
            "sentinel_scan_duration",
            "A scan's wall-clock time",
            Unit::Seconds,
            self.duration.clone(),
        );
        registry.register_with_unit(
            "sentinel_scan_phase_duration",
            "A full scan's time by phase (read, decide, commit, export)",
            Unit::Seconds,
            self.phases.clone(),
        );
        registry.register("sentinel_source_records", "Records read per source since this start", self.records.clone());
        registry.register("sentinel_runs", "Runs per sentinel since this start, by outcome", self.runs.clone());
        registry.register(
            "sentinel_run_failures",
            "Failed runs per sentinel since this start, by failure kind",
            self.failures.clone(),
        );
        registry.register_with_unit(
            "sentinel_decision_call_duration",
            "The decision call (finish) of each completed run",
            Unit::Seconds,
            self.decision.clone(),
        );
    }

    fn forget_all_but(&self, loaded: &BTreeSet<String>) {
        let mut named = self.named.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let gone: Vec<String> = named.iter().filter(|n| !loaded.contains(*n)).cloned().collect();
        for sentinel in gone {
            for outcome in ["ok", "failed"] {
                self.runs.remove(&OutcomeLabels { sentinel: sentinel.clone(), outcome });
            }
            for kind in crate::model::failure::FailureKind::ALL.map(|k| k.label()) {
                self.failures.remove(&KindLabels { sentinel: sentinel.clone(), kind });
            }
            self.decision.remove(&SentinelLabel { sentinel: sentinel.clone() });
            named.remove(&sentinel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::failure::FailureKind;
    use crate::model::standing::Standing;
    use crate::scan::report::{DetectorSummary, FailureSummary, Phases};

    fn detector(name: &str, status: DetectorStatus, failure: Option<FailureKind>) -> DetectorSummary {
        DetectorSummary {
            name: name.into(),
            path: Default::default(),
            version: None,
            status,
            load: None,
            next_due: None,
            health: Standing::Ok,
            probation: false,
            cache: None,
            observations: 0,
            records: 0,
            calls: 2,
            fuel: 0,
            slowest_call_us: 0,
            finish_us: 2_000,
            start_us: 0,
            calls_us: 0,
            failure: failure.map(|k| FailureSummary::new(k, "boom".into())),
            note: None,
            logs: Vec::new(),
        }
    }

    fn report(detectors: Vec<DetectorSummary>, fast: bool) -> ScanReport {
        ScanReport {
            data_dir: Default::default(),
            out_dir: Default::default(),
            issues_file: Default::default(),
            scan_time: 1,
            elapsed_ms: 20,
            unchanged_since: fast.then_some(0),
            state_reset: None,
            sources: Vec::new(),
            detectors,
            issues: Default::default(),
            fire_log_us: 0,
            phases: (!fast).then(|| Phases { read_us: 1_000, ..Default::default() }),
            peak_rss_kib: None,
            last_kick: None,
            regression_warnings: Vec::new(),
        }
    }

    fn text(m: &ScanMetrics, loaded: &[&str]) -> String {
        let mut reg = Registry::default();
        m.register(&mut reg, &loaded.iter().map(|s| (*s).to_owned()).collect());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        out
    }

    #[test]
    fn runs_and_failures_count_the_detectors_that_ran_and_drop_those_no_longer_loaded() {
        let m = ScanMetrics::default();
        m.record(&report(
            vec![
                detector("good", DetectorStatus::Ok, None),
                detector("bad", DetectorStatus::Failed, Some(FailureKind::Fuel)),
                detector("benched", DetectorStatus::Quarantined, Some(FailureKind::Quarantined)),
                detector("refused-file", DetectorStatus::Refused, Some(FailureKind::Load)),
            ],
            false,
        ));
        m.record(&report(Vec::new(), true));
        let all = text(&m, &["good", "bad", "benched"]);
        for line in [
            "sentinel_scans_total{path=\"full\"} 1\n",
            "sentinel_scans_total{path=\"fast\"} 1\n",
            "sentinel_runs_total{sentinel=\"good\",outcome=\"ok\"} 1\n",
            "sentinel_runs_total{sentinel=\"bad\",outcome=\"failed\"} 1\n",
            "sentinel_run_failures_total{sentinel=\"bad\",kind=\"fuel\"} 1\n",
            "sentinel_decision_call_duration_seconds_count{sentinel=\"good\"} 1\n",
            "sentinel_scan_phase_duration_seconds_count{phase=\"read\"} 1\n",
        ] {
            assert!(all.contains(line), "{line} in:\n{all}");
        }
        assert!(!all.contains("benched") && !all.contains("refused-file"), "only what ran: {all}");
        let after = text(&m, &["good"]);
        assert!(!after.contains("sentinel=\"bad\""), "no longer loaded: {after}");
        assert!(after.contains("sentinel_runs_total{sentinel=\"good\",outcome=\"ok\"} 1\n"), "{after}");
    }
}
