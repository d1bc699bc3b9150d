//! `ledger_delta_watch` (experimental, off unless enabled): spend in the
//! current window rose more than `threshold_pct` over its baseline.
//!
//! Reads the `spend` role: rows (kind `row`) with `at` (ms) and `usd`. Spend
//! is summed per window of `window_hours`; the baseline is the mean of the
//! up to `baseline_windows` windows before the current one, counted from the
//! first window it ever saw (so a fresh sentinel has no baseline and stays
//! quiet). A baseline under `min_baseline_usd` never alarms: tiny
//! denominators turn pennies into percentages. One fire per window. Its
//! state is the sums of the windows it still needs (a few lines of text).

use std::collections::BTreeMap;

use sentinel_sdk::prelude::*;

pub const KIND: &str = "ledger_delta_watch";
pub const ROLE: &str = "spend";

#[derive(Debug, Clone, PartialEq)]
pub struct Windows {
    /// The first window index ever seen.
    pub first: Option<i64>,
    pub sums: BTreeMap<i64, f64>,
}

impl Windows {
    pub fn decode(state: Option<&[u8]>) -> Self {
        let mut w = Windows { first: None, sums: BTreeMap::new() };
        let Some(text) = state.and_then(|s| std::str::from_utf8(s).ok()) else { return w };
        for line in text.lines() {
            if let Some(first) = line.strip_prefix("first=") {
                w.first = first.parse().ok();
            } else if let Some((i, v)) = line.split_once('=')
                && let (Ok(i), Ok(v)) = (i.parse(), v.parse())
            {
                w.sums.insert(i, v);
            }
        }
        w
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut s = self.first.map(|f| format!("first={f}\n")).unwrap_or_default();
        for (i, v) in &self.sums {
            s.push_str(&format!("{i}={v}\n"));
        }
        s.into_bytes()
    }
}

#[derive(Debug)]
pub struct LedgerDeltaWatch {
    pub window_ms: i64,
    pub baseline_windows: i64,
    pub threshold_pct: f64,
    pub min_baseline_usd: f64,
    pub scan_time: i64,
    pub windows: Windows,
}

impl LedgerDeltaWatch {
    pub fn spend(&mut self, at: i64, usd: f64) {
        if !usd.is_finite() {
            return;
        }
        let i = at.div_euclid(self.window_ms);
        *self.windows.sums.entry(i).or_default() += usd;
        self.windows.first = Some(self.windows.first.map_or(i, |f| f.min(i)));
    }

    /// The decision for the window holding the scan time; drops windows no
    /// longer needed.
    pub fn decide(&mut self) -> Option<Observation> {
        let cur = self.scan_time.div_euclid(self.window_ms);
        let oldest = cur - self.baseline_windows;
        self.windows.sums.retain(|i, _| *i >= oldest);
        let first = self.windows.first?;
        let from = oldest.max(first);
        if from >= cur {
            return None; // no full window before this one yet
        }
        let past: f64 = (from..cur).map(|i| self.windows.sums.get(&i).copied().unwrap_or(0.0)).sum();
        let baseline = past / (cur - from) as f64;
        let now = self.windows.sums.get(&cur).copied().unwrap_or(0.0);
        if baseline < self.min_baseline_usd || now <= baseline * (1.0 + self.threshold_pct / 100.0) {
            return None;
        }
        let start = cur * self.window_ms;
        let title = format!("spend in the current window is more than {}% over its baseline", self.threshold_pct);
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

impl Detector for LedgerDeltaWatch {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION"))
            .emits(KIND)
            .subscribe(ROLE, "row")
            .config_float("window_hours", 1.0, "the length of one spend window")
            .config_int("baseline_windows", 24, "how many windows before the current one make the baseline")
            .config_float("threshold_pct", 50.0, "percent over the baseline that fires")
            .config_float("min_baseline_usd", 5.0, "a baseline below this never alarms")
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        let hours = ctx.float("window_hours")?;
        let n = ctx.integer("baseline_windows")?;
        if !(hours.is_finite() && hours > 0.0) || n < 1 {
            return Err(DetectorError::BadConfig("`window_hours` and `baseline_windows` must be positive".into()));
        }
        Ok(LedgerDeltaWatch {
            window_ms: ((hours * 3_600_000.0) as i64).max(1),
            baseline_windows: n,
            threshold_pct: ctx.float("threshold_pct")?,
            min_baseline_usd: ctx.float("min_baseline_usd")?,
            scan_time: ctx.scan_time,
            windows: Windows::decode(ctx.state()),
        })
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is(ROLE, "row") {
            return Ok(());
        }
        let (at, usd) = (batch.column("at"), batch.column("usd"));
        for row in 0..batch.rows() {
            if let (Some(a), Some(u)) = (at.and_then(|c| batch.int(c, row)), usd.and_then(|c| batch.float(c, row))) {
                self.spend(a, u);
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        out.extend(self.decide());
        Ok(Some(self.windows.encode()))
    }
}

sentinel_sdk::export_detector!(LedgerDeltaWatch);

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    fn watch(scan_time: i64, min_baseline_usd: f64) -> LedgerDeltaWatch {
        LedgerDeltaWatch {
            window_ms: H,
            baseline_windows: 3,
            threshold_pct: 50.0,
            min_baseline_usd,
            scan_time,
            windows: Windows { first: None, sums: BTreeMap::new() },
        }
    }

    #[test]
    fn a_spike_over_a_real_baseline_fires_a_tiny_baseline_does_not() {
        let mut w = watch(3 * H + 10, 5.0);
        for i in 0..3 {
            w.spend(i * H, 10.0);
        }
        w.spend(3 * H, 16.0);
        assert!(w.decide().is_some(), "16 > 10 * 1.5");
        let mut tiny = watch(3 * H + 10, 5.0);
        for i in 0..3 {
            tiny.spend(i * H, 0.02);
        }
        tiny.spend(3 * H, 4.0);
        assert!(tiny.decide().is_none(), "a 2-cent baseline does not alarm");
        let mut fresh = watch(10, 0.0);
        fresh.spend(0, 100.0);
        assert!(fresh.decide().is_none(), "no baseline yet");
    }

    #[test]
    fn windows_round_trip() {
        let mut w = watch(0, 0.0);
        w.spend(5, 1.5);
        w.spend(H + 1, 2.0);
        assert_eq!(Windows::decode(Some(&w.windows.encode())), w.windows);
    }
}
