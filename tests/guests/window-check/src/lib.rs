//! Fixture `window-check`: the normalizer's gate window tests and the
//! secret rules' key words, run in wasm on every failed call's output.
//! They read sixteen bytes at a time there (`simd128`), which the SDK's
//! unit tests, run natively, never execute; this compares that code with
//! its references (one window at a time; the key words by their table) on
//! the same line, in the same guest. Each row becomes an observation whose
//! signature is the bits of the tests that hit (`hits:00101011010`, the
//! key words' flags in the top three), or `mismatch:<fast>:<reference>`
//! where the two differ, or `scalar` in a build without vectors (where
//! there is nothing to compare).

use sentinel_sdk::prelude::*;

struct WindowCheck;

impl Detector for WindowCheck {
    fn describe() -> Descriptor {
        Descriptor::new("window_check", "0.1.0").emits("window_check").subscribe("messages", "tool-failure")
    }

    fn start(_ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(WindowCheck)
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        for row in batch.iter() {
            let (Some(id), Some(at)) = (row.text("id"), row.int("at")) else { continue };
            let line = row.text("output").unwrap_or("");
            let (fast, each) = sentinel_sdk::__private::window_tests(line.as_bytes());
            let signature = match () {
                _ if !sentinel_sdk::__private::WINDOWS_IN_VECTORS => "scalar".to_owned(),
                _ if fast == each => format!("hits:{each:011b}"),
                _ => format!("mismatch:{fast:011b}:{each:011b}"),
            };
            out.push(Observation::new("window_check", &signature, &signature, at, id, ("messages", id)));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(WindowCheck);
