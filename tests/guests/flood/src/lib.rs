//! Fixture `flood`: returns one observation more than the per-call cap
//! (10 000) from every `push`; the host must refuse the output and name the
//! limit. Just past the cap, so neither fuel, the deadline nor the hostcall
//! budget is what stops it when the test raises the first two.

use sentinel_sdk::prelude::*;

struct Flood;

impl Detector for Flood {
    fn describe() -> Descriptor {
        Descriptor::new("flood", "0.0.1").emits("flood").subscribe("messages", "tool-failure")
    }
    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Flood)
    }
    fn push(&mut self, _: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        for i in 0..10_001 {
            let key = i.to_string();
            out.push(Observation::new("flood", "x", "flood", 0, &key, ("messages", "-")));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Flood);
