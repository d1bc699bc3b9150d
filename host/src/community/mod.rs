//! Community counts: opt-in, inspectable, nothing but counts
//! (docs/community.md, the scanner spec's stage 5).
//!
//! It owns what an install shares: one record per issue and ISO week with
//! occurrences, `{sig, kind, origin, tool, count}` ([`record`]), under the
//! key `<kind>.<hash>.<period pseudonym>` ([`period`], keyed by the
//! install's secret, [`secret`]); [`preview`] (every record, byte for byte,
//! whether sharing is on or not); putting the records whose value changed
//! ([`sent`]) into the bucket `sentinel_community` ([`bucket`]) after a scan,
//! bounded at the end of `run --once` ([`share_for`]) and on a thread of its
//! own in the long-running mode and `serve` ([`Sharer`]), never in a scan's
//! commit, and a server that is down never failing a scan; and `community
//! totals` ([`totals`]). It reads the ledger only through a [`LedgerView`];
//! it never sends a title, an id, evidence, a bot, a path or a text.

pub mod bucket;
pub mod period;
pub mod record;
pub mod secret;
pub mod sent;
pub mod totals;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use serde::Serialize;

pub use record::{Record, Value};
pub use totals::{Total, Totals};

use crate::config::FleetConfig;
use crate::ledger::LedgerView;

/// What stops a preview, a share or a read of the totals.
#[derive(Debug, thiserror::Error)]
pub enum CommunityError {
    #[error("cannot place the community secret beside the signing key")]
    Key(#[from] crate::firelog::KeyError),
    #[error("no randomness for a new community secret")]
    Random(#[source] getrandom::Error),
    #[error("cannot read or create the community secret {path}")]
    Secret { path: PathBuf, source: std::io::Error },
    #[error("the community secret {path} is refused: {problem}; it was left untouched")]
    BadSecret { path: PathBuf, problem: String },
    #[error("cannot write {path}")]
    Sent { path: PathBuf, source: std::io::Error },
    #[error("cannot read the ledger")]
    Ledger(#[from] crate::ledger::LedgerError),
    #[error(transparent)]
    Connect(#[from] crate::fleet::FleetError),
    #[error("JetStream refused {what}: {message}")]
    Server { what: &'static str, message: String },
    #[error("the bucket was not reached within {0:?}")]
    Budget(Duration),
}

/// Every record the output folder `out` would share now, sorted by key
/// (the secret beside the signing key is made when missing).
pub fn records(out: &Path, key_file: Option<&Path>) -> Result<Vec<Record>, CommunityError> {
    let secret = secret::open_or_create(&secret::path(out, key_file)?)?;
    let days = match LedgerView::open(out)? {
        Some(view) => view.issue_day_counts()?,
        None => Vec::new(),
    };
    Ok(record::build(&secret, &days))
}

/// `community preview`: whether sharing is on, where to, and every record.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    pub enabled: bool,
    /// The server the records go to when enabled.
    pub nats: Option<String>,
    pub bucket: &'static str,
    pub records: Vec<PreviewRecord>,
}

/// One record as previewed: its key and the exact text of its value.
#[derive(Debug, Clone, Serialize)]
pub struct PreviewRecord {
    pub key: String,
    pub value: String,
}

pub fn preview(out: &Path, key_file: Option<&Path>, server: Option<&FleetConfig>) -> Result<Preview, CommunityError> {
    let records = records(out, key_file)?
        .into_iter()
        .map(|r| PreviewRecord { key: r.key, value: String::from_utf8_lossy(&r.bytes).into_owned() })
        .collect();
    Ok(Preview { enabled: server.is_some(), nats: server.map(|s| s.nats.clone()), bucket: bucket::BUCKET, records })
}

/// What one share did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Shared {
    /// Records put (acked by the server).
    pub put: usize,
    /// Records whose value was already put: skipped.
    pub unchanged: usize,
}

/// Puts the records whose value changed since the last put, within
/// `budget`. Nothing changed: no connection at all.
pub fn share_for(
    out: &Path,
    key_file: Option<&Path>,
    cfg: &FleetConfig,
    budget: Duration,
) -> Result<Shared, CommunityError> {
    let all = records(out, key_file)?;
    let mut sent = sent::Sent::read(out);
    let changed = sent.changed(&all);
    let mut shared = Shared { put: 0, unchanged: all.len() - changed.len() };
    if changed.is_empty() {
        return Ok(shared);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CommunityError::Server { what: "a runtime", message: e.to_string() })?;
    let result = rt.block_on(async {
        let session = async {
            let js = bucket::connect(cfg).await?;
            let store = bucket::ensure(&js).await?;
            bucket::put(&store, &changed, |r| {
                sent.mark(r);
                shared.put += 1;
            })
            .await
        };
        tokio::time::timeout(budget, session).await.unwrap_or(Err(CommunityError::Budget(budget)))
    });
    // What was acked stays acked, whatever came after.
    sent.keep_only(&all);
    sent.write(out)?;
    result.map(|()| shared)
}

/// `community totals`: the newest value of every key (of `kind` only, when
/// given) summed per signature.
pub fn totals(cfg: &FleetConfig, kind: Option<&str>) -> Result<Totals, CommunityError> {
    let filter = match kind {
        Some(k) => format!("{k}.*.*"),
        None => ">".to_owned(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CommunityError::Server { what: "a runtime", message: e.to_string() })?;
    let entries = rt.block_on(async {
        let js = bucket::connect(cfg).await?;
        let store = match js.get_key_value(bucket::BUCKET).await {
            Ok(s) => s,
            Err(_) => return Ok(Vec::new()),
        };
        bucket::read_all(&js, &store, &filter).await
    })?;
    Ok(totals::sum(&entries))
}

/// How long one share of the long-running mode may take.
const SHARE_BUDGET: Duration = Duration::from_secs(5);
/// How often a share that failed is tried again.
const RETRY: Duration = Duration::from_secs(30);

/// The long-running mode's sharer: a thread that shares after each scan
/// that counted something ([`Sharer::nudge`]), and again every 30 s while
/// a share failed. Dropping it stops it.
#[derive(Debug)]
pub struct Sharer {
    nudge: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sharer {
    pub fn start(out: PathBuf, key_file: Option<PathBuf>, cfg: FleetConfig) -> Sharer {
        let (tx, rx) = mpsc::channel::<()>();
        let url = cfg.nats.clone();
        let thread = std::thread::Builder::new()
            .name("community".into())
            .spawn(move || share_loop(&out, key_file.as_deref(), &cfg, &rx))
            .map_err(|e| tracing::error!(error = %e, "cannot start the community sharer"))
            .ok();
        tracing::info!(nats = %url, "community counts are shared");
        let sharer = Sharer { nudge: Some(tx), thread };
        // What an earlier run counted and did not get to put.
        sharer.nudge();
        sharer
    }

    /// A scan counted something: share when the thread is free.
    pub fn nudge(&self) {
        if let Some(tx) = &self.nudge {
            let _ = tx.send(());
        }
    }
}

impl Drop for Sharer {
    fn drop(&mut self) {
        drop(self.nudge.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn share_loop(out: &Path, key_file: Option<&Path>, cfg: &FleetConfig, rx: &mpsc::Receiver<()>) {
    let mut due = false;
    loop {
        match rx.recv_timeout(RETRY) {
            Ok(()) => due = true,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        // Nudges that came while a share ran are one share.
        while rx.try_recv().is_ok() {}
        if !due {
            continue;
        }
        match share_for(out, key_file, cfg, SHARE_BUDGET) {
            Ok(s) => {
                due = false;
                if s.put > 0 {
                    tracing::info!(put = s.put, unchanged = s.unchanged, "community counts put");
                }
            }
            Err(e) => {
                tracing::warn!(error = %crate::base::errors::error_chain(&e), "community counts not put; trying again")
            }
        }
    }
}
