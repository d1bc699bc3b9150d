//! The fleet shipper: every fire-log entry into NATS JetStream exactly once,
//! and every signed head to a witness stream (docs/fleet.md).
//!
//! It owns the shipper's thread ([`Shipper`], in the long-running mode and
//! `serve`), the bounded shipping at the end of `run --once` ([`ship_for`]),
//! the session loop (connect, streams, reconcile, publish, back off, again)
//! and the figures `/v1/fleet` and the summary show ([`Stats`]). It tails
//! the log through a read-only [`LedgerView`] like the dispatcher: it never
//! writes the ledger and a fire never waits for it (it runs beside the
//! scan, never in its commit). It runs only when `[fleet]` is configured.
//! `verify --witness` reads the heads back ([`witness`]).

pub mod cursor;
pub mod link;
pub mod publish;
pub mod reconcile;
pub mod witness;

/// Fire-log entries read per query of the view (the publishes of a page go
/// out `in_flight` at a time).
const READ_PAGE: u32 = 256;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

pub use link::FleetError;

use crate::config::FleetConfig;
use crate::ledger::LedgerView;

/// How often the log is looked at for new fires.
const POLL: Duration = Duration::from_millis(200);
/// The longest pause between two sessions.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Where the shipper stands, for `/v1/fleet` and the summary.
#[derive(Debug, Default)]
pub struct Stats {
    shipping: AtomicBool,
    connected: AtomicBool,
    cursor: AtomicU64,
    head: AtomicU64,
    last_ack_ms: AtomicI64,
    duplicates: AtomicU64,
    resent: AtomicU64,
    full: AtomicBool,
    bytes: AtomicU64,
}

/// The figures, as read at one moment.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatsView {
    /// `[fleet]` is configured and the shipper runs.
    pub shipping: bool,
    /// A session is open with the server.
    pub connected: bool,
    /// Every fire up to this `seq` is acked by the server.
    pub cursor: u64,
    /// Fires in the local log not yet acked.
    pub backlog: u64,
    /// When the last ack came, ms (0: none since this start).
    pub last_ack_ms: i64,
    /// Publishes the server reported as duplicates (retries it absorbed).
    pub duplicates: u64,
    /// Publishes sent again because their ack did not come.
    pub resent: u64,
    /// The stream refused the last publish as full (`discard: new`): the
    /// shipper backs off and the backlog waits for room.
    pub full: bool,
    /// Payload bytes published since this start.
    pub bytes: u64,
}

impl Stats {
    pub fn view(&self) -> StatsView {
        let cursor = self.cursor.load(Ordering::SeqCst);
        StatsView {
            shipping: self.shipping.load(Ordering::SeqCst),
            connected: self.connected.load(Ordering::SeqCst),
            cursor,
            backlog: self.head.load(Ordering::SeqCst).saturating_sub(cursor),
            last_ack_ms: self.last_ack_ms.load(Ordering::SeqCst),
            duplicates: self.duplicates.load(Ordering::SeqCst),
            resent: self.resent.load(Ordering::SeqCst),
            full: self.full.load(Ordering::SeqCst),
            bytes: self.bytes.load(Ordering::SeqCst),
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// When the shipping ends.
#[derive(Debug, Clone, Copy)]
enum Until {
    /// At the stop flag (the long-running mode, `serve`).
    Stopped,
    /// When the log is shipped, or at this instant (`run --once`).
    Caught(Instant),
}

/// The running shipper; dropping it stops it (what was not acked stays
/// after the cursor for the next start).
#[derive(Debug)]
pub struct Shipper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Shipper {
    pub fn start(out: PathBuf, cfg: FleetConfig, stats: Arc<Stats>) -> Shipper {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let url = cfg.nats.clone();
        stats.shipping.store(true, Ordering::SeqCst);
        let thread = std::thread::Builder::new()
            .name("fleet-shipper".into())
            .spawn(move || {
                if let Err(e) = ship(&out, &cfg, &stats, &flag, Until::Stopped) {
                    tracing::error!(error = %crate::base::errors::error_chain(&e), "the fleet shipper stopped");
                }
            })
            .map_err(|e| tracing::error!(error = %e, "cannot start the fleet shipper"))
            .ok();
        tracing::info!(nats = %url, "fleet shipper started");
        Shipper { stop, thread }
    }
}

impl Drop for Shipper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Ships what the log holds, for at most `budget` (`run --once`); returns
/// the figures at the end. A server that is down costs the budget, never
/// the run: what is not shipped goes at the next run.
pub fn ship_for(out: &Path, cfg: &FleetConfig, budget: Duration) -> Result<StatsView, FleetError> {
    let stats = Stats::default();
    let stop = AtomicBool::new(false);
    ship(out, cfg, &stats, &stop, Until::Caught(Instant::now() + budget))?;
    Ok(stats.view())
}

fn ship(out: &Path, cfg: &FleetConfig, stats: &Stats, stop: &AtomicBool, until: Until) -> Result<(), FleetError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| FleetError::server("a runtime", e))?;
    let mut backoff = POLL;
    loop {
        local_figures(out, stats);
        let acks_before = stats.last_ack_ms.load(Ordering::SeqCst);
        let session = session(out, cfg, stats, stop, until);
        let result = match until {
            Until::Caught(at) => rt
                .block_on(async { tokio::time::timeout(at.saturating_duration_since(Instant::now()), session).await })
                .unwrap_or(Ok(Done::Budget)),
            Until::Stopped => rt.block_on(session),
        };
        stats.connected.store(false, Ordering::SeqCst);
        match result {
            Ok(_) => return Ok(()),
            Err(e) if e.is_permanent() => return Err(e),
            Err(e) => {
                stats.full.store(matches!(e, FleetError::Full { .. }), Ordering::SeqCst);
                tracing::warn!(error = %crate::base::errors::error_chain(&e), "fleet session ended; trying again")
            }
        }
        // A session that shipped something starts the back-off over.
        if stats.last_ack_ms.load(Ordering::SeqCst) != acks_before {
            backoff = POLL;
        }
        if !pause(backoff, stop, until) {
            return Ok(());
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// The cursor and the log's newest `seq` as the output folder has them, so
/// the backlog shows while no session is open.
fn local_figures(out: &Path, stats: &Stats) {
    stats.cursor.store(cursor::read(out), Ordering::SeqCst);
    if let Ok(Some(v)) = LedgerView::open(out)
        && let Ok(last) = v.last_fire_seq()
    {
        stats.head.store(u64::try_from(last).unwrap_or(0), Ordering::SeqCst);
    }
}

/// Sleeps `d` unless stopped or past the deadline first; false to end.
fn pause(d: Duration, stop: &AtomicBool, until: Until) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::SeqCst) || matches!(until, Until::Caught(at) if Instant::now() >= at) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// How a session ended without an error.
enum Done {
    Caught,
    Stopped,
    Budget,
}

async fn session(
    out: &Path,
    cfg: &FleetConfig,
    stats: &Stats,
    stop: &AtomicBool,
    until: Until,
) -> Result<Done, FleetError> {
    let js = link::connect(cfg).await?;
    let fires = link::ensure_streams(&js, cfg).await?;
    stats.connected.store(true, Ordering::SeqCst);
    let mut place: Option<(String, String, u64)> = None;
    let mut witnessed = String::new();
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(Done::Stopped);
        }
        let view = LedgerView::open(out)?;
        if place.is_none()
            && let Some(install) = view.as_ref().and_then(cursor::install_id)
        {
            let subject = format!("sentinel.fires.{install}");
            let at = reconcile::position(out, &fires, &subject).await?;
            place = Some((install, subject, at));
        }
        let entries = match (&view, &place) {
            (Some(v), Some((_, _, at))) => {
                stats.head.store(u64::try_from(v.last_fire_seq()?).unwrap_or(0), Ordering::SeqCst);
                stats.cursor.store(*at, Ordering::SeqCst);
                v.fires_after(*at, READ_PAGE.max(u32::try_from(cfg.in_flight).unwrap_or(u32::MAX)))?
            }
            _ => Vec::new(),
        };
        if let Some((install, subject, at)) = place.as_mut() {
            if !entries.is_empty() {
                *at = publish::batch(&js, out, subject, &entries, cfg.in_flight, stats).await?;
                continue;
            }
            if let Some(head) = view.as_ref().map(LedgerView::fire_head).transpose()?.flatten()
                && head.hash != witnessed
                && head.count <= *at
            {
                publish::witness(&js, install, &head).await?;
                witnessed = head.hash;
            }
        }
        if matches!(until, Until::Caught(_)) && place.is_some() {
            return Ok(Done::Caught);
        }
        tokio::time::sleep(POLL).await;
    }
}
