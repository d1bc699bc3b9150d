//! Hostile fixture `field_bomb`: one observation per batch whose identifiers
//! are 64 KiB (or hold escape sequences), whose `at` is `i64::MAX` and whose
//! wasted turns are `u32::MAX`. The host must store them clamped: identifiers
//! escaped and cut, `at` moved into the window around the scan time, wasted
//! turns at most one, and say so in the detector's log.

use sentinel_sdk::prelude::*;

struct Hostile {
    n: u32,
}

impl Detector for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new("field_bomb", "0.0.1").emits("field_bomb").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hostile { n: 0 })
    }

    fn push(&mut self, _batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        self.n += 1;
        let big = "x".repeat(64 << 10);
        let key = format!("bomb-{}", self.n);
        out.push(
            Observation::new("field_bomb", "bomb", "field bomb", i64::MAX, &key, ("messages", &big))
                .tool(Some(&big))
                .bot(Some("bot\u{1b}[2J\u{202e}"))
                .thread(Some(&big))
                .wasted_turns(u32::MAX),
        );
        Ok(())
    }
}

sentinel_sdk::export_detector!(Hostile);
