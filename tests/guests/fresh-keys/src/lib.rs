//! Hostile fixture `fresh_keys`: for every record it is handed it reports
//! `per_record` (config, default 100) observations, each with an
//! occurrence key no scan saw before, so every one would be a new,
//! permanent fire. It keeps a state (the records it saw, 8 bytes) so a test
//! can tell whether anything of its scan was committed. The host must stop
//! it at its cap on new fires (`[limits] fires_per_scan`, or one per record)
//! and commit nothing of its scan (docs/sandbox.md).

use sentinel_sdk::prelude::*;

struct FreshKeys {
    per_record: i64,
    seen: u64,
}

impl Detector for FreshKeys {
    fn describe() -> Descriptor {
        Descriptor::new("fresh_keys", "0.0.1").emits("fresh_keys").subscribe("messages", "tool-failure").config_int(
            "per_record",
            100,
            "observations with a fresh key reported for each record",
        )
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(FreshKeys { per_record: ctx.integer("per_record")?, seen: 0 })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        for _ in 0..batch.rows() {
            self.seen += 1;
            for j in 0..self.per_record {
                let key = format!("record-{}-{j}", self.seen);
                out.push(Observation::new("fresh_keys", "fresh", "a fresh key", 0, &key, ("messages", "-")));
            }
        }
        Ok(())
    }

    fn finish(&mut self, _: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        Ok(Some(self.seen.to_le_bytes().to_vec()))
    }
}

sentinel_sdk::export_detector!(FreshKeys);
