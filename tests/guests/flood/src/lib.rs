//! Fixture `flood`: returns 100 000 observations from one call; the host
//! must refuse the output and name the limit.

use sentinel_sdk::prelude::*;

struct Flood;

impl Detector for Flood {
    fn describe() -> Descriptor {
        Descriptor::new("flood", "0.0.1").emits("flood").subscribe("messages", "tool-failure")
    }
    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Flood)
    }
    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        for i in 0..100_000 + batch.rows() {
            let key = i.to_string();
            out.push(Observation::new("flood", "x", "flood", 0, &key, ("messages", "-")));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Flood);
