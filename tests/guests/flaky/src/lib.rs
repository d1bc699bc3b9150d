//! Fixture `flaky`: traps while a failed tool call named `boom` is in its
//! input, and otherwise reports one `flaky` observation per scan, so the
//! quarantine and probation life cycle can be driven by the data.

use sentinel_sdk::prelude::*;

struct Flaky {
    scan_time: i64,
    rows: usize,
}

impl Detector for Flaky {
    fn describe() -> Descriptor {
        Descriptor::new("flaky", "0.0.1").emits("flaky").subscribe("messages", "tool-failure")
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Flaky { scan_time: ctx.scan_time, rows: 0 })
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if batch.iter().any(|r| r.text("tool_name") == Some("boom")) {
            panic!("boom is in the input");
        }
        self.rows += batch.rows();
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        let occurrence = format!("scan-{}", self.scan_time);
        let title = format!("saw {} rows", self.rows);
        out.push(Observation::new("flaky", "rows", &title, self.scan_time, &occurrence, ("messages", "-")));
        Ok(None)
    }
}

sentinel_sdk::export_detector!(Flaky);
