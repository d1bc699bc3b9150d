//! Progress of a long scan on a terminal: one line on stderr, redrawn in
//! place, shown only once a scan has taken a moment, and erased at its end.
//! The binary installs it only when stderr is a terminal and `--json` is off;
//! it never writes to stdout, which carries the summary.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sentinel_host::scan::{Progress, ProgressFn};

/// Nothing is drawn for a scan shorter than this.
const QUIET_FOR: Duration = Duration::from_millis(300);
/// At most one redraw per this.
const EVERY: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct State {
    /// When the scan in flight told its first progress; `None` between scans.
    started: Option<Instant>,
    last: Option<Instant>,
    shown: bool,
}

#[derive(Debug)]
pub struct Line(Mutex<State>);

impl Line {
    pub fn new() -> Arc<Self> {
        Arc::new(Line(Mutex::new(State { started: None, last: None, shown: false })))
    }

    /// The observer to hand to the scan.
    pub fn observer(self: &Arc<Self>) -> ProgressFn {
        let me = Arc::clone(self);
        ProgressFn(Arc::new(move |p: &Progress| me.draw(p)))
    }

    /// A scan ended: the line is erased, and the next scan's first progress
    /// starts its quiet time again.
    pub fn clear(&self) {
        let Ok(mut s) = self.0.lock() else { return };
        s.started = None;
        s.last = None;
        if s.shown {
            s.shown = false;
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }

    fn draw(&self, p: &Progress) {
        let Ok(mut s) = self.0.lock() else { return };
        let now = Instant::now();
        let started = *s.started.get_or_insert(now);
        if now.duration_since(started) < QUIET_FOR || s.last.is_some_and(|l| now.duration_since(l) < EVERY) {
            return;
        }
        s.last = Some(now);
        s.shown = true;
        let phase = p.phase.as_str();
        let what = if p.source.is_empty() { phase.to_owned() } else { format!("{phase} {}", p.source) };
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[2Ksentinel: {what}: {} records read, {}/{} detectors running",
            p.records,
            p.detectors_running,
            p.detectors_total
        );
        let _ = std::io::stderr().flush();
    }
}
