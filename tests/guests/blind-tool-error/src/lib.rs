//! Fixture `blind-tool-error`: an "update" of `tool_error` (same name, same
//! kind, same subscription) that groups every failed tool call by its tool
//! alone, so it no longer produces the signatures the shipped `tool_error`
//! gives. A test fixes an issue with the shipped build, swaps this one in,
//! and checks the fixed issue's regression case is no longer produced: the
//! detector update is warned about by name, not silently blind.

use sentinel_sdk::prelude::*;

struct Blind;

impl Detector for Blind {
    fn describe() -> Descriptor {
        Descriptor::new("tool_error", "9.0.0-blind").emits("tool_error").subscribe("messages", "tool-failure")
    }

    fn start(_ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Blind)
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        for row in batch.iter() {
            let (Some(id), Some(at)) = (row.text("id"), row.int("at")) else { continue };
            let tool = row.text("tool_name").unwrap_or("-");
            out.push(Observation::new("tool_error", &format!("blind:{tool}"), "a tool failed", at, id, ("messages", id)));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Blind);
