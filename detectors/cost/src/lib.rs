//! `cost`: a single turn that cost more than `cost` USD (5 by default,
//! `--cost` on the command line).
//!
//! Reads `events` / `turn-completed`. One issue per bot, origin `harness`
//! (the application spent it), severity `high` (the scanner spec ranks
//! harness failures high); the event id is the occurrence. A turn without a
//! usable `created_at` is skipped; a float one is truncated to whole ms.

use sentinel_sdk::prelude::*;

pub const KIND: &str = "cost";

#[derive(Debug)]
pub struct Cost {
    threshold: f64,
    /// The same for every fire of a scan: formatted once.
    title: String,
}

impl Cost {
    pub fn new(threshold: f64) -> Self {
        Cost { threshold, title: format!("a turn cost more than ${threshold:.2}") }
    }

    pub fn observe(
        &self,
        id: &str,
        cost: f64,
        at: i64,
        bot: Option<&str>,
        thread: Option<&str>,
        turn: Option<&str>,
    ) -> Option<Observation> {
        if cost.is_nan() || cost <= self.threshold {
            return None;
        }
        Some(
            Observation::new(KIND, bot.unwrap_or("-"), &self.title, at, id, ("events", id))
                .origin(Origin::Harness)
                .severity(Severity::High)
                .bot(bot)
                .thread(thread)
                .turn(turn),
        )
    }
}

impl Detector for Cost {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION")).emits(KIND).subscribe("events", "turn-completed").config_float(
            "cost",
            5.0,
            "USD above which a single turn is reported",
        )
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        let threshold = ctx.float("cost")?;
        if !threshold.is_finite() || threshold < 0.0 {
            return Err(DetectorError::BadConfig(format!("`cost` must be a non-negative number, got {threshold}")));
        }
        Ok(Cost::new(threshold))
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is("events", "turn-completed") {
            return Ok(());
        }
        // Columns are looked up once per batch, not once per row.
        let c = |name| batch.column(name);
        let (id, cost, created_at, bot, thread, turn) =
            (c("id"), c("cost"), c("created_at"), c("bot_id"), c("thread_id"), c("turn_id"));
        let text = |col: Option<usize>, row| col.and_then(|col| batch.text(col, row));
        for row in 0..batch.rows() {
            let (Some(id), Some(cost)) = (text(id, row), cost.and_then(|col| batch.float(col, row))) else {
                continue;
            };
            // A turn without a usable time is skipped, never stamped 1970.
            let Some(at) = created_at.and_then(|col| batch.time(col, row)) else {
                continue;
            };
            out.extend(self.observe(id, cost, at, text(bot, row), text(thread, row), text(turn, row)));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Cost);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_turns_above_the_threshold_fire() {
        let c = Cost::new(5.0);
        assert!(c.observe("e1", 5.0, 0, None, None, None).is_none());
        assert!(c.observe("e2", f64::NAN, 0, None, None, None).is_none());
        let o = c.observe("e3", 5.01, 0, Some("bot-1"), None, None).unwrap();
        assert_eq!(o.title(), "a turn cost more than $5.00");
    }
}
