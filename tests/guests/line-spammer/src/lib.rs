//! Hostile fixture `line_spammer`: logs 20 000 empty lines per batch (twenty
//! times the host's line cap, few enough that a loaded machine still makes
//! the 100 ms deadline: the subject is the count, not the clock). Empty lines
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
        for _ in 0..20_000 {
            log(LogLevel::Info, "");
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Hostile);
