//! The watch API (`sentinel-host serve`): everything a sentinel sees,
//! readable over HTTP; mutations behind the admin token; arming behind a
//! principal of its own; the dispatcher behind its gate.
//!
//! It owns the HTTP side only: one thread running a tokio runtime whose
//! accept loop ([`server`]: hyper with its timeouts and a connection cap)
//! serves axum ([`routes`]) behind the `Host` and `Origin` check
//! ([`guard`]), reads through a fresh read-only
//! [`LedgerView`](crate::ledger::LedgerView) per request (SQLite WAL: a read
//! never waits for the scan's commit and never holds it up), sends every
//! mutation through the core's [`Handle`] and waits for the single writer's
//! answer, and, when its gate is open, the dispatcher's threads
//! ([`dispatch`]). Dropping it stops all of that within a bound, whatever
//! clients do. It never opens the writer, never scans, never loads a
//! component and never prints: the core ([`crate::core::sentinel`]) and the
//! long-running loop ([`crate::core::daemon`]) keep doing that on their own
//! thread, exactly as `run --interval` does.

pub mod admin;
pub mod chain;
pub mod deliver;
pub mod dispatch;
pub mod gates;
pub mod guard;
pub mod heat;
pub mod issue_page;
pub mod limiter;
pub mod metrics;
pub mod openapi;
pub mod page;
pub mod problem;
pub mod process;
pub mod reads;
pub mod routes;
pub mod scans;
pub mod server;
pub mod tally;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde::Serialize;

use crate::core::sentinel::{Handle, Roster};
use crate::scan::{DetectorStatus, ScanReport};
pub use gates::{Gates, WatchEnv};

/// What the core last said about each detector: published by the loop after
/// every scan, read by the API without waiting for one.
#[derive(Debug, Default)]
pub struct Live(RwLock<LiveInner>);

#[derive(Debug, Default, Clone)]
struct LiveInner {
    last_scan: Option<i64>,
    last_kick: Option<i64>,
    seen: HashMap<String, Seen>,
    /// The scans' running figures for `/metrics`.
    scans: scans::ScanMetrics,
}

/// One detector as the last scans left it.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Seen {
    /// Its status in the last full scan (`ok`, `failed`, `quarantined`, `not-due`, `disabled`).
    #[schema(value_type = Option<String>)]
    pub status: Option<DetectorStatus>,
    /// When it last ran (completed or failed), ms.
    pub last_run_at: Option<i64>,
    /// For a detector with a cadence: when it is next due, ms.
    pub next_due: Option<i64>,
}

impl Live {
    /// Takes in one scan's report (a fast-path scan changes only its time).
    pub fn record(&self, report: &ScanReport) {
        let Ok(mut live) = self.0.write() else { return };
        live.last_scan = Some(report.scan_time);
        live.scans.record(report);
        if report.last_kick.is_some() {
            live.last_kick = report.last_kick;
        }
        for d in &report.detectors {
            let seen = live.seen.entry(d.name.clone()).or_default();
            seen.status = Some(d.status);
            seen.next_due = d.next_due;
            if matches!(d.status, DetectorStatus::Ok | DetectorStatus::Failed) {
                seen.last_run_at = Some(report.scan_time);
            }
        }
    }

    pub fn seen(&self, name: &str) -> Seen {
        self.0.read().ok().and_then(|l| l.seen.get(name).cloned()).unwrap_or_default()
    }

    pub fn last_scan(&self) -> Option<i64> {
        self.0.read().ok().and_then(|l| l.last_scan)
    }

    /// The scans' running figures (a clone shares them).
    pub fn scans(&self) -> scans::ScanMetrics {
        self.0.read().map(|l| l.scans.clone()).unwrap_or_default()
    }

    pub fn last_kick(&self) -> Option<i64> {
        self.0.read().ok().and_then(|l| l.last_kick)
    }
}

/// Everything a request may use.
#[derive(Debug)]
pub struct AppState {
    /// The output folder: the ledger is read here, never written.
    pub out: PathBuf,
    pub handle: Handle,
    pub roster: Roster,
    pub live: Arc<Live>,
    pub env: WatchEnv,
    pub gates: Arc<Gates>,
    /// The newest fires the heat is counted over, kept between reads.
    pub heat: std::sync::Mutex<heat::HeatWindow>,
    /// The fire log's totals `/metrics` shows, kept between scrapes.
    pub fires: std::sync::Mutex<tally::FireTally>,
    /// The names requests may carry in `Host` and `Origin` (set when bound).
    pub hosts: guard::AllowedHosts,
    /// Failed token attempts per client address.
    pub attempts: limiter::FailedAttempts,
    /// Where the dispatcher stands (all zero while it does not run).
    pub dispatch: Arc<dispatch::Stats>,
    /// Where the fleet shipper stands (all zero while `[fleet]` is off).
    pub fleet: Arc<crate::fleet::Stats>,
    /// The chain's verification, kept while the log is unchanged.
    pub chain: chain::ChainCache,
    /// Titles (the page, issues, failure details) are public: the server
    /// listens on loopback. Elsewhere they need `WATCH_READ_TOKEN`.
    pub public_titles: bool,
}

#[cfg(test)]
impl AppState {
    /// A state over the output folder `out` for the watch API's unit tests:
    /// nothing running behind it, titles public.
    pub(crate) fn for_tests(out: &std::path::Path) -> AppState {
        AppState {
            out: out.to_owned(),
            handle: Handle::channel().0,
            roster: Roster::default(),
            live: Default::default(),
            env: Default::default(),
            gates: Default::default(),
            heat: Default::default(),
            fires: Default::default(),
            hosts: Default::default(),
            attempts: Default::default(),
            dispatch: Default::default(),
            fleet: Default::default(),
            chain: Default::default(),
            public_titles: true,
        }
    }
}

/// What `serve`'s flags say about the HTTP side.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub listen: SocketAddr,
    /// `--allow-host`: names beyond the listening address and loopback.
    pub allow_hosts: Vec<String>,
    /// The connections' bounds in time and count.
    pub bounds: server::Bounds,
}

/// Reads running at once on blocking threads (SQLite calls, the chain's
/// verification); more wait in line.
const MAX_BLOCKING: usize = 16;

/// What a stop waits, after the drain, for reads still on a blocking thread.
const SHUTDOWN_LEFTOVERS: std::time::Duration = std::time::Duration::from_millis(500);

/// The running HTTP side; dropping it stops the server and the dispatcher,
/// within [`server::Bounds::drain`] and [`SHUTDOWN_LEFTOVERS`] whatever
/// clients do.
#[derive(Debug)]
pub struct WatchServer {
    pub addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    dispatcher: Option<dispatch::Dispatcher>,
}

impl WatchServer {
    /// Binds `listen` (so the bound address, an OS-chosen port included, is
    /// known at once) and serves on a thread of its own; starts the
    /// dispatcher when its gate is open.
    pub fn start(options: &HttpOptions, mut state: AppState) -> std::io::Result<WatchServer> {
        let listener = TcpListener::bind(options.listen)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        state.hosts = guard::AllowedHosts::new(addr, &options.allow_hosts);
        state.public_titles = addr.ip().is_loopback();
        let dispatcher = state.env.dispatching().then(|| {
            dispatch::Dispatcher::start(
                state.out.clone(),
                state.env.clone(),
                Arc::clone(&state.gates),
                Arc::clone(&state.dispatch),
            )
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("watch-http")
            .max_blocking_threads(MAX_BLOCKING)
            .enable_io()
            .enable_time()
            .build()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = routes::router(Arc::new(state));
        let bounds = options.bounds;
        let thread = std::thread::Builder::new().name("watch-api".into()).spawn(move || {
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => server::serve(listener, app, bounds, rx).await,
                    Err(e) => tracing::error!(error = %e, "the watch API cannot listen"),
                }
            });
            // A read still running on a blocking thread (a long ledger
            // query) does not hold the stop up.
            runtime.shutdown_timeout(SHUTDOWN_LEFTOVERS);
        })?;
        Ok(WatchServer { addr, shutdown: Some(tx), thread: Some(thread), dispatcher })
    }
}

impl Drop for WatchServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        drop(self.dispatcher.take());
    }
}
