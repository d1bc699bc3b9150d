//! Hostile fixture `endless_loop`: loops forever in push; fuel or the epoch deadline must stop it.

use sentinel_sdk::prelude::*;

struct Hostile;

impl Detector for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new("endless_loop", "0.0.1").emits("endless_loop").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hostile)
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        let mut n: u64 = batch.rows() as u64;
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

sentinel_sdk::export_detector!(Hostile);
