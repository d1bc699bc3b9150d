//! Hostile fixture `escaper`: fails with an error text full of terminal
//! escape sequences (OSC 52 writes the clipboard, `ESC[2J` clears the screen,
//! U+202E reverses what follows), logs them, and writes them to stderr. The
//! host must show every one of them escaped, never raw.

use sentinel_sdk::prelude::*;

struct Hostile;

/// What a hostile detector would like the operator's terminal to run.
const PAYLOAD: &str = "\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}[2J\u{202e}desrever\u{9b}31m\r\nok       forged: line";

impl Detector for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new("escaper", "0.0.1").emits("escaper").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hostile)
    }

    fn push(&mut self, _batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        eprintln!("stderr {PAYLOAD}");
        Err(DetectorError::Failed(format!("error {PAYLOAD}")))
    }
}

sentinel_sdk::export_detector!(Hostile);
