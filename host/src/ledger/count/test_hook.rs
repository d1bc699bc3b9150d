//! A test-only rendezvous inside the commit, so the end-to-end tests can
//! signal the real binary at a known point of it (tests/e2e/signals.rs)
//! instead of guessing with timers.
//!
//! It owns [`pause`], called at two points of
//! [`Ledger::commit`](crate::ledger::Ledger::commit): `commit-transaction`
//! (every write of the scan made, the transaction not yet committed) and
//! `commit-export` (committed, `issues.jsonl` and the fire log not yet
//! exported). In a **debug build only**, when the environment variable
//! `SENTINEL_TEST_PAUSE` is `<point>:<dir>` and the commit reaches `<point>`,
//! it creates `<dir>/<point>.paused` and waits until `<dir>/<point>.go`
//! exists (at most ten minutes), then goes on. A release build, the one any
//! install runs, compiles it to nothing. It never changes what the commit
//! writes, and never reads any other variable.

/// The variable that names the point and the rendezvous folder.
pub const VAR: &str = "SENTINEL_TEST_PAUSE";

/// Waits at `point` when a debug build's [`VAR`] asks for it; otherwise
/// returns at once.
pub(crate) fn pause(point: &str) {
    #[cfg(debug_assertions)]
    {
        use std::time::{Duration, Instant};
        let Some(value) = std::env::var_os(VAR) else { return };
        let value = value.to_string_lossy();
        let Some((at, dir)) = value.split_once(':') else { return };
        if at != point {
            return;
        }
        let dir = std::path::Path::new(dir);
        if std::fs::write(dir.join(format!("{point}.paused")), b"").is_err() {
            return;
        }
        let go = dir.join(format!("{point}.go"));
        let until = Instant::now() + Duration::from_secs(600);
        while !go.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = point;
}
