//! Hostile fixture `deep_recursion`: recurses without bound; the stack cap must stop it.

use sentinel_sdk::prelude::*;

struct Hostile;

impl Detector for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new("deep_recursion", "0.0.1").emits("deep_recursion").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hostile)
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        fn dive(n: u64) -> u64 {
            if n == 0 { 0 } else { std::hint::black_box(dive(std::hint::black_box(n + 1)) + 1) }
        }
        let _ = dive(batch.rows() as u64 + 1);
        Ok(())
    }
}

sentinel_sdk::export_detector!(Hostile);
