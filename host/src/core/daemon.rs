//! The long-running mode: one scan every interval until asked to stop, with
//! the operator's commands applied between scans.
//!
//! It owns the loop only: when the next scan starts (at the interval, or
//! sooner when a detector's cooldown makes it due), taking commands from the
//! [`Handle`](crate::core::sentinel::Handle)'s channel while it waits (a command
//! that asks for a scan starts one at once), and stopping between scans or in
//! the middle of one. The [`Sentinel`] it drives keeps the runtime, the
//! loaded detectors and the ledger across scans, so each component is loaded
//! once (and again only when its file changes). Each scan commits in one
//! transaction or not at all; a stop requested during a scan makes it return
//! [`ScanError::Interrupted`] before its commit, which leaves the ledger as
//! the previous scan left it. The loop never prints and never installs
//! signal handlers: the binary owns both, and hands in the flag.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::core::sentinel::{Request, Sentinel};
use crate::scan::{ScanError, ScanReport};

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
/// start of the next; a scan that overruns is followed at once) until the
/// sentinel's stop flag is set or `each` returns false, applying the
/// commands that arrive on `commands` between scans. `each` gets every
/// scan's result except an interrupted one. The options' `scan_time_ms`
/// should be `None`: every scan then runs at the time it starts.
pub fn run_every(
    sentinel: &mut Sentinel,
    interval: Duration,
    commands: Option<&Receiver<Request>>,
    mut each: impl FnMut(Result<ScanReport, ScanError>) -> bool,
) -> LoopEnd {
    let mut commands = commands;
    // The first cooldown due (ms), from the last full scan: a scan that found
    // nothing changed ran no detector and leaves it where it was.
    let mut due: Option<i64> = None;
    loop {
        if sentinel.options().stopped() {
            return LoopEnd::Stopped;
        }
        let started = Instant::now();
        let mut next = started + interval;
        match sentinel.scan() {
            Err(ScanError::Interrupted) => return LoopEnd::StoppedMidScan,
            result => {
                if let Ok(report) = &result
                    && report.unchanged_since.is_none()
                {
                    due = report.detectors.iter().filter_map(|d| d.next_due).min();
                }
                if let Some(wait) = due.map(cooldown_wait) {
                    next = next.min(Instant::now() + wait);
                }
                if !each(result) {
                    return LoopEnd::Ended;
                }
            }
        }
        if let Some(end) = wait(sentinel, next, &mut commands) {
            return end;
        }
    }
}

/// How long until `due`, the first detector's cooldown due time (at least
/// a second), so polling and deep sentinels
/// tick on their cooldown whatever the interval. Measured on the wall clock
/// the due time is on, so the scan it brings is at or past it.
fn cooldown_wait(due: i64) -> Duration {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let ms = u64::try_from(i128::from(due) + 1 - now as i128).unwrap_or(0);
    Duration::from_millis(ms).max(Duration::from_secs(1))
}

/// Waits until `next`, applying commands; `Some` when the loop must end.
fn wait(sentinel: &mut Sentinel, next: Instant, commands: &mut Option<&Receiver<Request>>) -> Option<LoopEnd> {
    loop {
        if sentinel.options().stopped() {
            return Some(LoopEnd::Stopped);
        }
        let now = Instant::now();
        if now >= next {
            return None;
        }
        let slice = POLL.min(next - now);
        let Some(rx) = commands else {
            std::thread::sleep(slice);
            continue;
        };
        match rx.recv_timeout(slice) {
            Ok(request) => {
                let result = sentinel.apply(&request.command);
                let scan_now = result.is_ok() && request.command.scans();
                match &result {
                    Ok(applied) => tracing::info!(command = ?request.command, ?applied, "command applied"),
                    Err(e) => tracing::warn!(command = ?request.command, error = %e, "command refused"),
                }
                let _ = request.reply.send(result);
                if scan_now {
                    return None;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            // Nobody can send any more: wait without a channel.
            Err(RecvTimeoutError::Disconnected) => *commands = None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::core::sentinel::run_scan;
    use crate::core::sentinel::{Applied, Command, Handle};
    use crate::ledger::LedgerView;
    use crate::scan::ScanOptions;

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
            if p.phase.as_str() == phase {
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
        let ledger = LedgerView::open(&tmp.path().join("out")).unwrap().unwrap();
        assert_eq!(ledger.meta(&crate::ledger::MetaKey::LastScan).unwrap(), None, "no scan was committed");
    }

    #[test]
    fn a_stop_once_the_commit_began_lets_it_finish() {
        let tmp = tempfile::tempdir().unwrap();
        let mut o = opts(tmp.path());
        stop_at(&mut o, "committing");
        let report = run_scan(&o).expect("the scan in its commit completes");
        let ledger = LedgerView::open(&tmp.path().join("out")).unwrap().unwrap();
        assert_eq!(ledger.meta(&crate::ledger::MetaKey::LastScan).unwrap(), Some(report.scan_time.to_string()));
    }

    #[test]
    fn a_stop_before_a_scan_commits_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let o = opts(tmp.path());
        o.stop.as_ref().unwrap().store(true, Ordering::SeqCst);
        assert!(matches!(run_scan(&o), Err(ScanError::Interrupted)));
        let ledger = LedgerView::open(&tmp.path().join("out")).unwrap();
        assert!(
            ledger.is_none_or(|l| l.meta(&crate::ledger::MetaKey::LastScan).unwrap().is_none()),
            "no scan was committed"
        );
        assert!(!tmp.path().join("out/issues.jsonl").exists());
    }

    #[test]
    fn the_loop_scans_until_the_flag_is_set_between_scans() {
        let tmp = tempfile::tempdir().unwrap();
        let o = opts(tmp.path());
        let stop = Arc::clone(o.stop.as_ref().unwrap());
        let mut sentinel = Sentinel::open(o).unwrap();
        let mut scans = 0;
        let end = run_every(&mut sentinel, Duration::from_millis(10), None, |r| {
            assert!(r.is_ok(), "{r:?}");
            scans += 1;
            if scans == 3 {
                stop.store(true, Ordering::SeqCst);
            }
            true
        });
        assert_eq!((end, scans), (LoopEnd::Stopped, 3));
        let end = run_every(&mut sentinel, Duration::from_millis(10), None, |_| false);
        assert_eq!(end, LoopEnd::Stopped, "a flag already set stops before any scan");
    }

    #[test]
    fn a_second_writer_on_one_output_folder_is_refused_while_the_first_lives() {
        let tmp = tempfile::tempdir().unwrap();
        let first = Sentinel::open(opts(tmp.path())).unwrap();
        let err = Sentinel::open(opts(tmp.path())).unwrap_err();
        assert!(err.to_string().contains("in use by another sentinel-host"), "{err}");
        drop(first);
        Sentinel::open(opts(tmp.path())).expect("free once the first is gone");
    }

    #[test]
    fn a_command_that_asks_for_a_scan_cuts_the_wait_short_and_an_unknown_name_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let o = opts(tmp.path());
        let stop = Arc::clone(o.stop.as_ref().unwrap());
        let mut sentinel = Sentinel::open(o).unwrap();
        let (handle, rx) = Handle::channel();
        let sender = std::thread::spawn(move || {
            let refused = handle.send(Command::Disable("nobody".into()));
            let queued = handle.send(Command::ScanNow);
            (refused, queued)
        });
        let started = Instant::now();
        let mut scans = 0;
        // An hour's interval: only the command can bring the second scan.
        run_every(&mut sentinel, Duration::from_secs(3600), Some(&rx), |r| {
            assert!(r.is_ok(), "{r:?}");
            scans += 1;
            if scans == 2 {
                stop.store(true, Ordering::SeqCst);
            }
            true
        });
        let (refused, queued) = sender.join().unwrap();
        assert!(matches!(refused, Err(crate::core::sentinel::CommandError::UnknownDetector(_))), "{refused:?}");
        assert_eq!(queued.unwrap(), Applied::ScanQueued);
        assert_eq!(scans, 2);
        assert!(started.elapsed() < Duration::from_secs(3600));
    }
}
