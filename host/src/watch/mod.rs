//! The watch API (`sentinel-host serve`): everything a sentinel sees,
//! readable over HTTP; mutations behind the admin token; arming behind a
//! principal of its own; the dispatcher behind its gate.
//!
//! It owns the HTTP side only: one thread running a tokio runtime that
//! serves axum ([`routes`]), reads through a fresh read-only
//! [`LedgerView`](crate::ledger::LedgerView) per request (SQLite WAL: a read
//! never waits for the scan's commit and never holds it up), sends every
//! mutation through the core's [`Handle`] and waits for the single writer's
//! answer, and, when its gate is open, the dispatcher's thread
//! ([`dispatch`]). It never opens the writer, never scans, never loads a
//! component and never prints: the core ([`crate::core::sentinel`]) and the
//! long-running loop ([`crate::core::daemon`]) keep doing that on their own
//! thread, exactly as `run --interval` does.

pub mod admin;
pub mod dispatch;
pub mod gates;
pub mod heat;
pub mod openapi;
pub mod page;
pub mod problem;
pub mod reads;
pub mod routes;

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
}

/// The running HTTP side; dropping it stops the server and the dispatcher.
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
    pub fn start(listen: SocketAddr, state: AppState) -> std::io::Result<WatchServer> {
        let listener = TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let dispatcher = state
            .env
            .dispatching()
            .then(|| dispatch::Dispatcher::start(state.out.clone(), state.env.clone(), Arc::clone(&state.gates)));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("watch-http")
            .enable_io()
            .enable_time()
            .build()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = routes::router(Arc::new(state));
        let thread = std::thread::Builder::new().name("watch-api".into()).spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!(error = %e, "the watch API cannot listen");
                        return;
                    }
                };
                let served = axum::serve(listener, app).with_graceful_shutdown(async {
                    let _ = rx.await;
                });
                if let Err(e) = served.await {
                    tracing::error!(error = %e, "the watch API stopped");
                }
            });
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
