//! `{{name}}`: a turn that did not end ok (made by `cargo xtask new-detector`).
//!
//! Reads `events` / `turn-completed`. One issue per bot, origin `harness`,
//! severity `low`; the event id is the occurrence. Replace the rule with
//! yours, and the replay case in `cases/` with cases of your own.

use sentinel_sdk::prelude::*;

pub const KIND: &str = "{{name}}";

#[derive(Debug)]
pub struct {{Type}};

impl Detector for {{Type}} {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION")).emits(KIND).subscribe("events", "turn-completed")
    }

    fn start(_ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok({{Type}})
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is("events", "turn-completed") {
            return Ok(());
        }
        for row in batch.iter() {
            let (Some(id), Some(false)) = (row.text("id"), row.boolean("ok")) else { continue };
            let bot = row.text("bot_id");
            let at = row.int("created_at").unwrap_or(0);
            out.push(
                Observation::new(KIND, bot.unwrap_or("-"), "a turn did not end ok", at, id, ("events", id))
                    .origin(Origin::Harness)
                    .severity(Severity::Low)
                    .bot(bot)
                    .thread(row.text("thread_id"))
                    .turn(row.text("turn_id"))
                    .wasted_turns(1),
            );
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!({{Type}});
