//! The long-running mode: one scan every interval until asked to stop.
//!
//! It owns the loop only: when the next scan starts, and stopping between
//! scans or in the middle of one. Each scan is [`run_scan`], so each commits
//! in one transaction or not at all; a stop requested during a scan makes it
//! return [`ScanError::Interrupted`] before its commit, which leaves the
//! ledger as the previous scan left it. The loop never prints and never
//! installs signal handlers: the binary owns both, and hands in the flag.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::scan::{ScanError, ScanOptions, ScanReport, run_scan};

/// How often the loop looks at the stop flag while it waits.
const POLL: Duration = Duration::from_millis(50);

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopEnd {
    /// The stop flag was set between scans.
    Stopped,
    /// The stop flag was set during a scan, which committed nothing.
    StoppedMidScan,
    /// `each` asked to end.
    Ended,
}

/// Runs a scan every `interval` (measured from the start of one scan to the
/// start of the next; a scan that overruns is followed at once) until
/// `opts.stop` is set or `each` returns false. `each` gets every scan's
/// result except an interrupted one. `opts.scan_time_ms` should be `None`:
/// every scan then runs at the time it starts.
pub fn run_every(
    opts: &ScanOptions,
    interval: Duration,
    mut each: impl FnMut(Result<ScanReport, ScanError>) -> bool,
) -> LoopEnd {
    let stopped = || opts.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst));
    loop {
        if stopped() {
            return LoopEnd::Stopped;
        }
        let started = Instant::now();
        match run_scan(opts) {
            Err(ScanError::Interrupted) => return LoopEnd::StoppedMidScan,
            result => {
                if !each(result) {
                    return LoopEnd::Ended;
                }
            }
        }
        let next = started + interval;
        loop {
            if stopped() {
                return LoopEnd::Stopped;
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep(POLL.min(next - now));
        }
    }
}
