//! Fixture `sleeper`: uses almost no fuel, but sleeps in a loop, that is,
//! blocks inside the host's `poll`. Time in the sandbox is frozen, so every
//! sleep returns at once and the loop meets fuel or the deadline like any
//! other; it must never hold the scan for its 10-minute nap.

use std::time::Duration;

use sentinel_sdk::prelude::*;

struct Sleeper;

impl Detector for Sleeper {
    fn describe() -> Descriptor {
        Descriptor::new("sleeper", "0.0.1").emits("sleeper").subscribe("messages", "tool-failure")
    }
    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Sleeper)
    }
    fn push(&mut self, batch: &Batch, _: &mut Vec<Observation>) -> Result<(), DetectorError> {
        loop {
            std::thread::sleep(Duration::from_secs(600 + batch.rows() as u64));
        }
    }
}

sentinel_sdk::export_detector!(Sleeper);
