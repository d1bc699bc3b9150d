//! Fixture `keeper`: keeps state and breaks the output rules on request, so
//! the tests can check what the host promises about both (docs/sandbox.md).
//!
//! Its state is the number of scans it completed (8 bytes, little endian),
//! followed by `pad` zero bytes. Each scan it reports one observation whose
//! signature and title say the count it was given (`state=N`, `none` on its
//! first scan) and whose key is new each scan. Its config `mode`:
//!
//! - `ok`: as above;
//! - `fail`: returns an error from `finish` after computing a new state;
//! - `undeclared-kind`: reports a kind its descriptor does not declare;
//! - `empty-key`: reports an empty occurrence key;
//! - `stdio`: reads stdin, writes 100 lines of 1000 bytes to stdout and to
//!   stderr, and fails with what each got (the host shows stderr's tail).

use std::io::{Read, Write};

use sentinel_sdk::prelude::*;

struct Keeper {
    mode: String,
    pad: usize,
    count: Option<u64>,
}

/// Writes 1000-byte lines to `w` until 100 have been tried; the number accepted.
fn fill(w: &mut dyn Write, mark: u8) -> usize {
    let mut line = vec![mark; 999];
    line.push(b'\n');
    (0..100).filter(|_| w.write_all(&line).and_then(|()| w.flush()).is_ok()).count()
}

impl Detector for Keeper {
    fn describe() -> Descriptor {
        Descriptor::new("keeper", "0.0.1")
            .emits("keeper")
            .subscribe("messages", "tool-failure")
            .config_text("mode", "ok", "ok, fail, undeclared-kind, empty-key or stdio")
            .config_int("pad", 0, "zero bytes after the count in the state")
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        let count = match ctx.state() {
            None => None,
            Some(s) if s.len() >= 8 => Some(u64::from_le_bytes(s[..8].try_into().unwrap())),
            Some(s) => return Err(DetectorError::BadInput(format!("a state of {} bytes", s.len()))),
        };
        let pad = usize::try_from(ctx.integer("pad")?).map_err(|_| DetectorError::BadConfig("pad".into()))?;
        Ok(Keeper { mode: ctx.text("mode")?.to_owned(), pad, count })
    }

    fn push(&mut self, _: &Batch, _: &mut Vec<Observation>) -> Result<(), DetectorError> {
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        let seen = self.count.map_or("none".to_owned(), |c| c.to_string());
        let title = format!("state={seen}");
        let next = self.count.unwrap_or(0) + 1;
        let key = format!("scan-{next}");
        let kind = if self.mode == "undeclared-kind" { "not_mine" } else { "keeper" };
        let key = if self.mode == "empty-key" { String::new() } else { key };
        out.push(Observation::new(kind, &title, &title, 0, &key, ("messages", "-")));
        let mut state = next.to_le_bytes().to_vec();
        state.resize(8 + self.pad, 0);
        match self.mode.as_str() {
            "fail" => Err(DetectorError::Failed(format!("keeper fails on purpose (it was given {seen})"))),
            "stdio" => {
                let mut buf = [0u8; 64];
                let stdin = match std::io::stdin().read(&mut buf) {
                    Ok(n) => n.to_string(),
                    Err(e) => format!("error {:?}", e.kind()),
                };
                let stdout = fill(&mut std::io::stdout(), b'o');
                let stderr = fill(&mut std::io::stderr(), b'e');
                Err(DetectorError::Failed(format!("stdin={stdin} stdout-lines={stdout} stderr-lines={stderr}")))
            }
            _ => Ok(Some(state)),
        }
    }
}

sentinel_sdk::export_detector!(Keeper);
