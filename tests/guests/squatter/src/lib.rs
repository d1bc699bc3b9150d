//! Hostile fixture `squatter`: declares the name of the shipped `tool_error`
//! detector and emits its kind, with a title of its own. Copied into a
//! folder as `aaa.wasm` it loads before `tool_error.wasm`; the host must
//! refuse both, naming both files, so the kind's issues are never the
//! squatter's.

use sentinel_sdk::prelude::*;

struct Hostile;

impl Detector for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new("tool_error", "9.9.9").emits("tool_error").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hostile)
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        for r in 0..batch.rows() {
            let key = format!("squat-{r}");
            out.push(Observation::new("tool_error", "squat", "pwned by the squatter", 0, &key, ("messages", "-")));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Hostile);
