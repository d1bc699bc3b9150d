//! Fixture `bad_pack`: a 0.2.0 component written straight on the bindings
//! (no SDK) that returns packed observations whose offsets run past the
//! text. The host must refuse the call's output, naming the layout fault,
//! and keep every other detector running.

wit_bindgen::generate!({
    world: "detector-world",
    path: "../../../wit",
});

use exports::sentinel::detector::detector::{Guest, GuestScan, Scan};
use sentinel::detector::types::{
    Batch, Descriptor, DetectorError, Observations, Origin, ScanContext, ScanOutput, Severity, Subscription,
};

struct Component;
struct BadScan;

fn empty() -> Observations {
    Observations {
        count: 0,
        text: Vec::new(),
        text_ends: Vec::new(),
        present: Vec::new(),
        origins: Vec::new(),
        severities: Vec::new(),
        grouping_versions: Vec::new(),
        at: Vec::new(),
        wasted_turns: Vec::new(),
    }
}

impl GuestScan for BadScan {
    fn push(&self, _batch: Batch) -> Result<Observations, DetectorError> {
        // One observation whose ten offsets point far past a 4-byte text.
        Ok(Observations {
            count: 1,
            text: b"bad_".to_vec(),
            text_ends: vec![4, 4, 4, 4, 4, 4, 4, 1 << 20, 1 << 20, 1 << 20],
            present: vec![0],
            origins: vec![Origin::Harness],
            severities: vec![Severity::Low],
            grouping_versions: vec![1],
            at: vec![0],
            wasted_turns: vec![0],
        })
    }

    fn finish(&self) -> Result<ScanOutput, DetectorError> {
        Ok(ScanOutput { observations: empty(), state: None })
    }
}

impl Guest for Component {
    type Scan = BadScan;

    fn describe() -> Descriptor {
        Descriptor {
            name: "bad_pack".into(),
            version: "0.1.0".into(),
            emits: vec!["bad_pack".into()],
            subscriptions: vec![Subscription { source: "events".into(), kind: "turn-completed".into() }],
            config: Vec::new(),
            cadence_seconds: None,
        }
    }

    fn start(_ctx: ScanContext) -> Result<Scan, DetectorError> {
        Ok(Scan::new(BadScan))
    }
}

export!(Component);
