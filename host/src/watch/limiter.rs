//! The limit on failed admin and arming attempts, per client address.
//!
//! It owns counting the 401s each client address earned in a window of
//! [`WINDOW`], and refusing that address (429 with `Retry-After`) once it
//! earned [`MAX_FAILURES`], until the window ends, even with the right
//! token: guessing stops being cheap. The table is bounded
//! ([`MAX_CLIENTS`]); when it is full of live windows a new address is
//! refused at once (an attacker with that many addresses is told to wait,
//! not given a fresh budget). It never checks a token itself: the gates do,
//! and report each failure here.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::StatusCode;

use super::problem::Problem;

/// Failed attempts allowed per client address in one window, by default.
pub const MAX_FAILURES: u32 = 5;
/// The window they are counted over.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Client addresses tracked at once.
pub const MAX_CLIENTS: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Count {
    since: Instant,
    failures: u32,
}

/// Failed attempts per client address.
#[derive(Debug)]
pub struct FailedAttempts {
    allowed: u32,
    table: Mutex<HashMap<IpAddr, Count>>,
}

impl Default for FailedAttempts {
    fn default() -> Self {
        FailedAttempts::new(MAX_FAILURES)
    }
}

fn too_many(allowed: u32, retry_after: Duration) -> Problem {
    let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
    Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_failed_attempts",
        format!("{allowed} failed token attempts from this address within {} s; wait {secs} s", WINDOW.as_secs()),
    )
    .retry_after(secs)
}

impl FailedAttempts {
    /// `allowed` failures per address and window (at least 1).
    pub fn new(allowed: u32) -> Self {
        FailedAttempts { allowed: allowed.max(1), table: Mutex::default() }
    }

    /// Refuses `client` while it is over its failures.
    pub fn check(&self, client: IpAddr, now: Instant) -> Result<(), Problem> {
        let table = self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match table.get(&client) {
            Some(c) if c.failures >= self.allowed && now < c.since + WINDOW => {
                Err(too_many(self.allowed, c.since + WINDOW - now))
            }
            _ => Ok(()),
        }
    }

    /// Counts one failure of `client`.
    pub fn failed(&self, client: IpAddr, now: Instant) {
        let mut table = self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if table.len() >= MAX_CLIENTS && !table.contains_key(&client) {
            table.retain(|_, c| now < c.since + WINDOW);
        }
        if table.len() >= MAX_CLIENTS && !table.contains_key(&client) {
            tracing::warn!(clients = MAX_CLIENTS, "failed token attempts from too many addresses: not counted");
            return;
        }
        let c = table.entry(client).or_insert(Count { since: now, failures: 0 });
        if now >= c.since + WINDOW {
            *c = Count { since: now, failures: 0 };
        }
        c.failures += 1;
        if c.failures == self.allowed {
            tracing::warn!(%client, failures = self.allowed, "failed token attempts: this address waits until its window ends");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_over_its_failures_waits_out_the_window_and_others_do_not() {
        let limit = FailedAttempts::default();
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..MAX_FAILURES {
            assert!(limit.check(a, t0).is_ok());
            limit.failed(a, t0);
        }
        let refused = limit.check(a, t0 + Duration::from_secs(1)).unwrap_err();
        assert_eq!((refused.status, refused.retry_after), (429, Some(59)));
        assert!(limit.check(b, t0).is_ok(), "another address keeps its own count");
        assert!(limit.check(a, t0 + WINDOW).is_ok(), "the window ends");
        limit.failed(a, t0 + WINDOW);
        assert!(limit.check(a, t0 + WINDOW).is_ok(), "a new window starts from one failure");
    }
}
