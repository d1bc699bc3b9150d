//! Hostile fixture `line_spammer`: logs 100 000 empty lines per batch. Empty lines
//! cost nothing by bytes; the host must count them per line, keep at most its
//! line cap and say how many it dropped.

use sentinel_sdk::prelude::*;
use sentinel_sdk::{LogLevel, log};

struct Hostile;

impl Detector for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new("line_spammer", "0.0.1").emits("line_spammer").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hostile)
    }

    fn push(&mut self, _batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        for _ in 0..100_000 {
            log(LogLevel::Info, "");
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Hostile);
