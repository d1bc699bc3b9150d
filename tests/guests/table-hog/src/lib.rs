//! Hostile fixture `table_hog`: a plain detector whose component xtask pads past
//! a store's limit (see its Cargo.toml); instantiating it must fail on that
//! limit, named, and leave every other detector alone. With the limit raised
//! in `[limits]` it loads and runs (and reports nothing).

use sentinel_sdk::prelude::*;

struct Hog;

impl Detector for Hog {
    fn describe() -> Descriptor {
        Descriptor::new("table_hog", "0.0.1").emits("table_hog").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hog)
    }

    fn push(&mut self, _batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        Ok(())
    }
}

sentinel_sdk::export_detector!(Hog);
