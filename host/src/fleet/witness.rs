//! `verify --witness`: the newest head the fleet's witness holds for this
//! install, fetched and held against the local log.
//!
//! It owns [`check`]: connect to the witness (bounded by [`WITHIN`]: a
//! witness that cannot be reached in time gives no verdict), read the last
//! message on `sentinel.heads.<install>` in `SENTINEL_HEADS` (the shipper
//! publishes each signed head there, docs/fleet.md), and hand it to
//! [`crate::firelog::check_witnessed`], which marks the witness check ok or
//! failed. When no verdict can be had (unreachable, no stream, no head of
//! this install, an empty log) the check is marked not-checked with why,
//! and [`Outcome::NoVerdict`] lets the caller say so. It never creates a
//! stream, never publishes and never writes.

use std::time::Duration;

use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::stream;

use super::link::{self, HEADS_STREAM};
use crate::config::FleetConfig;
use crate::firelog::{CheckName, Head, Status, Verification};

/// How long the witness may take, connecting and reading together.
pub const WITHIN: Duration = Duration::from_secs(5);

/// What came of asking the witness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The witness check is ok or failed (a finding), or the log had a
    /// finding before it (the witness is not reached).
    Verdict,
    /// The witness gave no verdict: the check is not-checked, with why.
    NoVerdict,
}

/// Why the witness gave no verdict, or what it holds.
enum Fetched {
    Head(Box<Head>),
    NotAHead(String),
    Nothing(String),
}

/// Asks the witness at `cfg.nats` (with `cfg.token_file`) for this log's
/// newest witnessed head and checks the verified log `v` against it.
pub fn check(v: &mut Verification, cfg: &FleetConfig) -> Outcome {
    if !v.ok {
        return Outcome::Verdict;
    }
    let Some(install) = crate::firelog::install_id(&v.dir) else {
        return no_verdict(v, "the log is empty: no install id yet, so nothing to ask the witness for".into());
    };
    let subject = format!("sentinel.heads.{install}");
    let fetched = match fetch_within(cfg, &subject) {
        Ok(f) => f,
        Err(why) => return no_verdict(v, why),
    };
    match fetched {
        Fetched::Head(head) => crate::firelog::check_witnessed(v, &head, &subject),
        Fetched::NotAHead(why) => v.fail(
            CheckName::Witness,
            crate::firelog::finding(None, None, None, format!("the witness's last message on {subject} {why}")),
        ),
        Fetched::Nothing(why) => return no_verdict(v, why),
    }
    Outcome::Verdict
}

fn no_verdict(v: &mut Verification, why: String) -> Outcome {
    v.mark(CheckName::Witness, Status::NotChecked, Some(why));
    Outcome::NoVerdict
}

/// [`fetch`] on its own runtime, within [`WITHIN`].
fn fetch_within(cfg: &FleetConfig, subject: &str) -> Result<Fetched, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime to ask the witness: {e}"))?;
    let url = &cfg.nats;
    rt.block_on(async { tokio::time::timeout(WITHIN, fetch(cfg, subject)).await })
        .map_err(|_| format!("cannot reach the witness at {url}: no answer within {} s", WITHIN.as_secs()))?
}

async fn fetch(cfg: &FleetConfig, subject: &str) -> Result<Fetched, String> {
    let url = &cfg.nats;
    let js = link::connect(cfg)
        .await
        .map_err(|e| format!("cannot reach the witness: {}", crate::base::errors::error_chain(&e)))?;
    let heads = match js.get_stream(HEADS_STREAM).await {
        Ok(s) => s,
        Err(e) => {
            let missing = matches!(e.kind(), GetStreamErrorKind::JetStream(j)
                if j.error_code() == async_nats::jetstream::ErrorCode::STREAM_NOT_FOUND);
            if missing {
                return Ok(Fetched::Nothing(format!("the witness at {url} has no {HEADS_STREAM} stream")));
            }
            return Err(format!("the witness at {url} did not give its {HEADS_STREAM} stream: {e}"));
        }
    };
    let last = match heads.get_last_raw_message_by_subject(subject).await {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), stream::LastRawMessageErrorKind::NoMessageFound) => {
            return Ok(Fetched::Nothing(format!(
                "the witness at {url} holds no head on {subject} (this log's heads were never shipped there)"
            )));
        }
        Err(e) => return Err(format!("the witness at {url} did not give the last head on {subject}: {e}")),
    };
    Ok(match serde_json::from_slice::<Head>(&last.payload) {
        Ok(h) => Fetched::Head(Box::new(h)),
        Err(e) => Fetched::NotAHead(format!("is not a signed fire-log head ({e}): the witness was written by another")),
    })
}
