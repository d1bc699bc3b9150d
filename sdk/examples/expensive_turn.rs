//! A whole detector: a turn that cost more than `cost` USD.
//!
//! Build it as a component with
//! `cargo build -p sentinel-sdk --example expensive_turn --target wasm32-wasip2 --release`
//! and replay or scan with the `.wasm` it makes
//! (`target/wasm32-wasip2/release/examples/expensive_turn.wasm`).

use sentinel_sdk::prelude::*;

// Made by the host through the component's exports, which only a wasm32 build has.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct ExpensiveTurn {
    threshold: f64,
}

impl Detector for ExpensiveTurn {
    fn describe() -> Descriptor {
        Descriptor::new("expensive_turn", env!("CARGO_PKG_VERSION"))
            .emits("expensive_turn")
            .subscribe("events", "turn-completed")
            .config_float("cost", 5.0, "USD above which one turn is reported")
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(ExpensiveTurn { threshold: ctx.float("cost")? })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is("events", "turn-completed") {
            return Ok(());
        }
        let (id, cost, at, bot) =
            (batch.column("id"), batch.column("cost"), batch.column("created_at"), batch.column("bot_id"));
        for row in 0..batch.rows() {
            let (Some(id), Some(cost)) = (id.and_then(|c| batch.text(c, row)), cost.and_then(|c| batch.float(c, row)))
            else {
                continue;
            };
            if cost <= self.threshold {
                continue;
            }
            let bot = bot.and_then(|c| batch.text(c, row));
            let at = at.and_then(|c| batch.int(c, row)).unwrap_or(0);
            let title = format!("a turn cost more than ${:.2}", self.threshold);
            out.push(
                Observation::new("expensive_turn", bot.unwrap_or("-"), &title, at, id, ("events", id))
                    .severity(Severity::Medium)
                    .bot(bot),
            );
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(ExpensiveTurn);
