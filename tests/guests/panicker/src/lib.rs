//! Hostile fixture `panicker`: panics in push; the trap must be reported with the panic message.

use sentinel_sdk::prelude::*;

struct Hostile;

impl Detector for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new("panicker", "0.0.1").emits("panicker").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hostile)
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        panic!("panicker refuses batch of {} rows", batch.rows());
    }
}

sentinel_sdk::export_detector!(Hostile);
