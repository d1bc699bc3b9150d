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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::ledger::Ledger;

    fn opts(tmp: &std::path::Path) -> ScanOptions {
        for d in ["data", "detectors"] {
            std::fs::create_dir_all(tmp.join(d)).unwrap();
        }
        std::fs::write(tmp.join("data/bots.json"), r#"{"bots": []}"#).unwrap();
        let mut o = ScanOptions::new(tmp.join("detectors"));
        o.data_dir = Some(tmp.join("data"));
        o.out = Some(tmp.join("out"));
        o.stop = Some(Arc::new(AtomicBool::new(false)));
        o
    }

    /// A stop flag set by the progress observer when the scan reaches `phase`.
    fn stop_at(o: &mut ScanOptions, phase: &'static str) {
        std::fs::write(o.data_dir.as_ref().unwrap().join("bots.json"), r#"{"bots": [{"id": "b1", "name": "Ada"}]}"#)
            .unwrap();
        let stop = Arc::clone(o.stop.as_ref().unwrap());
        o.progress = Some(crate::scan::ProgressFn(Arc::new(move |p: &crate::scan::Progress| {
            if p.phase == phase {
                stop.store(true, Ordering::SeqCst);
            }
        })));
    }

    #[test]
    fn a_stop_while_sources_are_read_commits_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let mut o = opts(tmp.path());
        stop_at(&mut o, "reading");
        assert!(matches!(run_scan(&o), Err(ScanError::Interrupted)));
        let ledger = Ledger::open(&tmp.path().join("out")).unwrap();
        assert_eq!(ledger.meta("last_scan").unwrap(), None, "no scan was committed");
    }

    #[test]
    fn a_stop_once_the_commit_began_lets_it_finish() {
        let tmp = tempfile::tempdir().unwrap();
        let mut o = opts(tmp.path());
        stop_at(&mut o, "committing");
        let report = run_scan(&o).expect("the scan in its commit completes");
        let ledger = Ledger::open(&tmp.path().join("out")).unwrap();
        assert_eq!(ledger.meta("last_scan").unwrap(), Some(report.scan_time.to_string()));
    }

    #[test]
    fn a_stop_before_a_scan_commits_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let o = opts(tmp.path());
        o.stop.as_ref().unwrap().store(true, Ordering::SeqCst);
        assert!(matches!(run_scan(&o), Err(ScanError::Interrupted)));
        let ledger = Ledger::open(&tmp.path().join("out")).unwrap();
        assert_eq!(ledger.meta("last_scan").unwrap(), None, "no scan was committed");
        assert!(!tmp.path().join("out/issues.jsonl").exists());
    }

    #[test]
    fn the_loop_scans_until_the_flag_is_set_between_scans() {
        let tmp = tempfile::tempdir().unwrap();
        let o = opts(tmp.path());
        let stop = Arc::clone(o.stop.as_ref().unwrap());
        let mut scans = 0;
        let end = run_every(&o, Duration::from_millis(10), |r| {
            assert!(r.is_ok(), "{r:?}");
            scans += 1;
            if scans == 3 {
                stop.store(true, Ordering::SeqCst);
            }
            true
        });
        assert_eq!((end, scans), (LoopEnd::Stopped, 3));
        let end = run_every(&o, Duration::from_millis(10), |_| false);
        assert_eq!(end, LoopEnd::Stopped, "a flag already set stops before any scan");
    }
}
