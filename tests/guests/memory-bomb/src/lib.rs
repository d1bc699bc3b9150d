//! Hostile fixture `memory_bomb`: grows linear memory without bound; the memory cap must stop it.

use sentinel_sdk::prelude::*;

struct Hostile;

impl Detector for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new("memory_bomb", "0.0.1").emits("memory_bomb").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hostile)
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            // Reserve without touching: memory.grow is what the cap sees.
            hoard.push(Vec::with_capacity((16 << 20) + batch.rows()));
            std::hint::black_box(&hoard);
        }
    }
}

sentinel_sdk::export_detector!(Hostile);
