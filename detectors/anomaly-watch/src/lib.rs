//! `anomaly_watch` (experimental, off unless enabled): the escalation
//! failure rate drifted more than `max_drift` above its EWMA baseline.
//!
//! Reads the `escalations` role: rows (kind `row`) with `at` (ms) and
//! `failed` (boolean). Outcomes are counted per window of `window_hours`;
//! each window that has closed (one before the scan's) is folded into an
//! exponentially weighted moving average of the failure rate (`alpha`), in
//! order, once. The current window fires when it holds at least `min_events`
//! outcomes and its rate exceeds the baseline by more than `max_drift`; with
//! no baseline yet it stays quiet. Pure statistics; one fire per window. The
//! baseline and the open windows are its own opaque state.

use std::collections::BTreeMap;

use sentinel_sdk::prelude::*;

pub const KIND: &str = "anomaly_watch";
pub const ROLE: &str = "escalations";

#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub ewma: Option<f64>,
    /// The last window folded into the EWMA.
    pub folded: Option<i64>,
    /// Open windows: (outcomes, failures).
    pub open: BTreeMap<i64, (u64, u64)>,
}

impl Model {
    pub fn decode(state: Option<&[u8]>) -> Self {
        let mut m = Model { ewma: None, folded: None, open: BTreeMap::new() };
        let Some(text) = state.and_then(|s| std::str::from_utf8(s).ok()) else { return m };
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("ewma=") {
                m.ewma = v.parse().ok();
            } else if let Some(v) = line.strip_prefix("folded=") {
                m.folded = v.parse().ok();
            } else if let Some((i, v)) = line.split_once('=')
                && let Some((t, f)) = v.split_once(',')
                && let (Ok(i), Ok(t), Ok(f)) = (i.parse(), t.parse(), f.parse())
            {
                m.open.insert(i, (t, f));
            }
        }
        m
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut s = String::new();
        if let Some(e) = self.ewma {
            s.push_str(&format!("ewma={e}\n"));
        }
        if let Some(f) = self.folded {
            s.push_str(&format!("folded={f}\n"));
        }
        for (i, (t, f)) in &self.open {
            s.push_str(&format!("{i}={t},{f}\n"));
        }
        s.into_bytes()
    }
}

#[derive(Debug)]
pub struct AnomalyWatch {
    pub window_ms: i64,
    pub alpha: f64,
    pub max_drift: f64,
    pub min_events: u64,
    pub scan_time: i64,
    pub model: Model,
}

impl AnomalyWatch {
    pub fn outcome(&mut self, at: i64, failed: bool) {
        let i = at.div_euclid(self.window_ms);
        if self.model.folded.is_some_and(|f| i <= f) {
            return; // that window is already in the baseline
        }
        let w = self.model.open.entry(i).or_default();
        w.0 += 1;
        w.1 += u64::from(failed);
    }

    pub fn decide(&mut self) -> Option<Observation> {
        let cur = self.scan_time.div_euclid(self.window_ms);
        let closed: Vec<i64> = self.model.open.range(..cur).map(|(i, _)| *i).collect();
        for i in closed {
            let (t, f) = self.model.open.remove(&i).unwrap_or_default();
            if t > 0 {
                let rate = f as f64 / t as f64;
                self.model.ewma = Some(self.model.ewma.map_or(rate, |e| self.alpha * rate + (1.0 - self.alpha) * e));
            }
            self.model.folded = Some(i);
        }
        let baseline = self.model.ewma?;
        let (t, f) = self.model.open.get(&cur).copied().unwrap_or_default();
        if t < self.min_events.max(1) {
            return None;
        }
        let rate = f as f64 / t as f64;
        if rate <= baseline + self.max_drift {
            return None;
        }
        let start = cur * self.window_ms;
        let title = format!("the escalation failure rate is more than {} above its EWMA baseline", self.max_drift);
        Some(
            Observation::new(
                KIND,
                ROLE,
                &title,
                self.scan_time,
                &format!("window:{start}"),
                (ROLE, &format!("window:{start}")),
            )
            .origin(Origin::Harness)
            .severity(Severity::Medium),
        )
    }
}

impl Detector for AnomalyWatch {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION"))
            .emits(KIND)
            .subscribe(ROLE, "row")
            .config_float("window_hours", 1.0, "the length of one window of outcomes")
            .config_float("alpha", 0.3, "the EWMA weight of the newest closed window (0 < alpha <= 1)")
            .config_float("max_drift", 0.2, "how far (as a rate, 0..1) above the baseline fires")
            .config_int("min_events", 10, "outcomes a window needs before it can fire")
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        let hours = ctx.float("window_hours")?;
        let alpha = ctx.float("alpha")?;
        if !(hours.is_finite() && hours > 0.0 && alpha > 0.0 && alpha <= 1.0) {
            return Err(DetectorError::BadConfig("`window_hours` must be positive and `alpha` in (0, 1]".into()));
        }
        Ok(AnomalyWatch {
            window_ms: ((hours * 3_600_000.0) as i64).max(1),
            alpha,
            max_drift: ctx.float("max_drift")?,
            min_events: u64::try_from(ctx.integer("min_events")?).unwrap_or(0),
            scan_time: ctx.scan_time,
            model: Model::decode(ctx.state()),
        })
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is(ROLE, "row") {
            return Ok(());
        }
        let (at, failed) = (batch.column("at"), batch.column("failed"));
        for row in 0..batch.rows() {
            let a = at.and_then(|c| batch.int(c, row));
            let f = failed.and_then(|c| batch.boolean(c, row).or_else(|| batch.int(c, row).map(|i| i != 0)));
            if let (Some(a), Some(f)) = (a, f) {
                self.outcome(a, f);
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        out.extend(self.decide());
        Ok(Some(self.model.encode()))
    }
}

sentinel_sdk::export_detector!(AnomalyWatch);

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    fn watch(scan_time: i64) -> AnomalyWatch {
        AnomalyWatch {
            window_ms: H,
            alpha: 0.5,
            max_drift: 0.2,
            min_events: 10,
            scan_time,
            model: Model { ewma: None, folded: None, open: BTreeMap::new() },
        }
    }

    #[test]
    fn a_drift_above_the_baseline_fires_a_steady_rate_does_not() {
        let mut w = watch(2 * H + 1);
        for h in 0..2 {
            for i in 0..10 {
                w.outcome(h * H + i, i == 0); // 10% failures
            }
        }
        for i in 0..10 {
            w.outcome(2 * H + i, i < 5); // 50%
        }
        assert!(w.decide().is_some());
        assert!((w.model.ewma.unwrap() - 0.1).abs() < 1e-9);
        let mut steady = watch(2 * H + 1);
        for h in 0..3 {
            for i in 0..10 {
                steady.outcome(h * H + i, i < 2);
            }
        }
        assert!(steady.decide().is_none());
        let mut fresh = watch(1);
        for i in 0..10 {
            fresh.outcome(i, true);
        }
        assert!(fresh.decide().is_none(), "no baseline yet");
        assert_eq!(Model::decode(Some(&w.model.encode())), w.model);
    }
}
