//! Fixture `cadenced`: asks for a 60 s cadence and reports one `cadenced`
//! observation per `turn.completed` event it is given, so a test can tell
//! whether a scan that skipped it lost any event.

use sentinel_sdk::prelude::*;

struct Cadenced;

impl Detector for Cadenced {
    fn describe() -> Descriptor {
        Descriptor::new("cadenced", "0.0.1")
            .emits("cadenced")
            .subscribe("events", "turn-completed")
            .cadence_seconds(60)
    }

    fn start(_ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Cadenced)
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        for row in batch.iter() {
            let (Some(id), Some(at)) = (row.text("id"), row.int("created_at")) else { continue };
            out.push(Observation::new("cadenced", "event", "an event", at, id, ("events", id)));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Cadenced);
