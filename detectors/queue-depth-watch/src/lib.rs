//! `queue_depth_watch` (stock sentinel, polling): a number read over HTTP
//! crosses `threshold`.
//!
//! Reads the `queue` role: an HTTP JSON source (kind `response`) whose
//! `jsonpath` the host evaluates on the body it fetched (RFC 9535, in the
//! host: the guest has no network, and the body is host-read anyway), giving
//! the column `value` (a number, or null when the path selects no single
//! number). It fires when the value is at or above the threshold and the
//! previous reading was below it (or there was none): a crossing is the
//! fact, so a queue that stays deep fires once, and again only after it came
//! back below. A failed fetch or a missing value decides nothing and keeps
//! the previous reading. The evidence is the URL; the body never leaves the
//! host.

use sentinel_sdk::prelude::*;

pub const KIND: &str = "queue_depth_watch";
pub const ROLE: &str = "queue";

#[derive(Debug)]
pub struct QueueDepthWatch {
    pub threshold: f64,
    /// Whether the last reading was at or above the threshold.
    pub above: Option<bool>,
    pub scan_time: i64,
}

impl QueueDepthWatch {
    pub fn reading(&mut self, value: f64, url: &str) -> Option<Observation> {
        if value.is_nan() {
            return None;
        }
        let above = value >= self.threshold;
        let crossed = above && self.above != Some(true);
        self.above = Some(above);
        if !crossed {
            return None;
        }
        let title = format!("the watched queue depth reached the threshold of {}", self.threshold);
        Some(
            Observation::new(KIND, url, &title, self.scan_time, &format!("crossed:{}", self.scan_time), (ROLE, url))
                .origin(Origin::Harness)
                .severity(Severity::Medium),
        )
    }
}

impl Detector for QueueDepthWatch {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION")).emits(KIND).subscribe(ROLE, "response").config_float(
            "threshold",
            100.0,
            "fires when the value the source's jsonpath selects reaches this from below",
        )
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        let threshold = ctx.float("threshold")?;
        if !threshold.is_finite() {
            return Err(DetectorError::BadConfig(format!("`threshold` must be a finite number, got {threshold}")));
        }
        let above = match ctx.state() {
            Some(b"above") => Some(true),
            Some(b"below") => Some(false),
            _ => None,
        };
        Ok(QueueDepthWatch { threshold, above, scan_time: ctx.scan_time })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is(ROLE, "response") {
            return Ok(());
        }
        let (value, url, status) = (batch.column("value"), batch.column("url"), batch.column("status"));
        for row in 0..batch.rows() {
            let ok = status.and_then(|c| batch.int(c, row)).is_some_and(|s| (200..300).contains(&s));
            let Some(v) = value.and_then(|c| batch.float(c, row)) else { continue };
            if ok {
                let url = url.and_then(|c| batch.text(c, row)).unwrap_or("-");
                out.extend(self.reading(v, url));
            }
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        Ok(self.above.map(|a| if a { b"above".to_vec() } else { b"below".to_vec() }))
    }
}

sentinel_sdk::export_detector!(QueueDepthWatch);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crossing_fires_once_until_the_value_comes_back_below() {
        let mut w = QueueDepthWatch { threshold: 10.0, above: None, scan_time: 1 };
        assert!(w.reading(3.0, "u").is_none());
        assert!(w.reading(10.0, "u").is_some());
        assert!(w.reading(50.0, "u").is_none(), "still deep: no new fact");
        assert!(w.reading(f64::NAN, "u").is_none());
        assert!(w.reading(2.0, "u").is_none());
        assert!(w.reading(11.0, "u").is_some());
    }
}
