//! `watch_health_watch` (stock sentinel, meta): another sentinel was
//! quarantined or hard-killed (deadline, fuel, memory), or the fire log's
//! hash chain does not verify.
//!
//! Reads the `health` role: a source the host synthesizes about itself each
//! scan (kind `health`: `detector`, `event`, `detail`, `at`, `key`). It owns
//! the rule only: rows about itself are dropped first, whatever they say (a
//! watcher reporting on its own health is how horror stories start);
//! `quarantined`, `killed` and `chain-broken` fire; `probation` fires only
//! with `fire_on_probation`. The host's `key` names the event (the detector
//! and when it happened), so each event fires once however many scans see it.

use sentinel_sdk::prelude::*;

pub const KIND: &str = "watch_health_watch";
pub const ROLE: &str = "health";

#[derive(Debug)]
pub struct WatchHealthWatch {
    pub fire_on_probation: bool,
}

impl WatchHealthWatch {
    pub fn observe(
        &self,
        detector: &str,
        event: &str,
        detail: Option<&str>,
        at: i64,
        key: &str,
    ) -> Option<Observation> {
        if detector == KIND {
            return None;
        }
        let title = match event {
            "quarantined" => "a sentinel was quarantined".to_owned(),
            "killed" => format!("a sentinel was hard-killed ({})", detail.unwrap_or("limit")),
            "chain-broken" => "the fire log's hash chain does not verify".to_owned(),
            "probation" if self.fire_on_probation => "a sentinel is on probation".to_owned(),
            _ => return None,
        };
        let signature = format!("{detector}\n{event}");
        let severity = if event == "probation" { Severity::Low } else { Severity::High };
        Some(
            Observation::new(KIND, &signature, &title, at, key, (ROLE, detector))
                .origin(Origin::Harness)
                .severity(severity),
        )
    }
}

impl Detector for WatchHealthWatch {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION")).emits(KIND).subscribe(ROLE, "health").config_bool(
            "fire_on_probation",
            false,
            "also fire when a sentinel comes back on probation",
        )
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(WatchHealthWatch { fire_on_probation: ctx.boolean("fire_on_probation")? })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is(ROLE, "health") {
            return Ok(());
        }
        let c = |n| batch.column(n);
        let (det, event, detail, at, key) = (c("detector"), c("event"), c("detail"), c("at"), c("key"));
        for row in 0..batch.rows() {
            let text = |col: Option<usize>| col.and_then(|col| batch.text(col, row));
            let (Some(d), Some(e), Some(k)) = (text(det), text(event), text(key)) else { continue };
            let at = at.and_then(|col| batch.int(col, row)).unwrap_or(0);
            out.extend(self.observe(d, e, text(detail), at, k));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(WatchHealthWatch);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_never_reports_on_itself() {
        let w = WatchHealthWatch { fire_on_probation: true };
        assert!(w.observe(KIND, "quarantined", None, 1, "k").is_none());
        assert!(w.observe("endless_loop", "quarantined", None, 1, "k").is_some());
        assert_eq!(
            w.observe("x", "killed", Some("fuel"), 1, "k").unwrap().title(),
            "a sentinel was hard-killed (fuel)"
        );
        assert!(WatchHealthWatch { fire_on_probation: false }.observe("x", "probation", None, 1, "k").is_none());
        assert!(w.observe("x", "ok", None, 1, "k").is_none());
    }
}
