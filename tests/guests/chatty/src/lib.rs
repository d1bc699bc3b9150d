//! Fixture `chatty`: writes 10 MB of log in one scan; the host keeps its
//! budget, drops and counts the rest, and the scan goes on.

use sentinel_sdk::prelude::*;
use sentinel_sdk::{LogLevel, log};

struct Chatty;

impl Detector for Chatty {
    fn describe() -> Descriptor {
        Descriptor::new("chatty", "0.0.1").emits("chatty").subscribe("messages", "tool-failure")
    }
    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Chatty)
    }
    fn push(&mut self, _: &Batch, _: &mut Vec<Observation>) -> Result<(), DetectorError> {
        let line = "x".repeat(1000);
        for _ in 0..10_000 {
            log(LogLevel::Info, &line);
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Chatty);
