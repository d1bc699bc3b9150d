//! Where a session starts: the server's word against the local cursor.
//!
//! It owns [`position`]: at the start of every session (the first, after
//! an outage, after a crash) it fetches the last message on this install's
//! subject. Its payload is a fire entry; when its hash is this log's entry
//! at that `seq`, the server's word is where the session starts: ahead of
//! the cursor (a crash between an ack and the cursor), the cursor moves up
//! and nothing acked before is sent again, whatever the duplicate window;
//! behind it (a server back from a crash, or a restored store, without the
//! tail it once acked), the cursor moves down and the tail is sent again,
//! so the stream has no gap. When the subject is empty (never shipped, or
//! every message aged out) the cursor is taken as is. A last message that is not this log's entry is
//! [`FleetError::Diverged`]: the shipper stops rather than ship a second
//! history. It never publishes.

use std::path::Path;

use async_nats::jetstream::stream;

use super::cursor;
use super::link::FleetError;
use crate::firelog::FireEntry;
use crate::ledger::LedgerView;

/// The `seq` after which this session publishes.
pub async fn position(out: &Path, fires: &stream::Stream, subject: &str) -> Result<u64, FleetError> {
    let local = cursor::read(out);
    let last = match fires.get_last_raw_message_by_subject(subject).await {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), stream::LastRawMessageErrorKind::NoMessageFound) => return Ok(local),
        Err(e) => return Err(FleetError::server("the last message on the subject", e)),
    };
    let entry: FireEntry = serde_json::from_slice(&last.payload)
        .map_err(|_| FleetError::Diverged { subject: subject.to_owned(), seq: 0 })?;
    let diverged = || FleetError::Diverged { subject: subject.to_owned(), seq: entry.seq };
    let view = LedgerView::open(out)?.ok_or_else(diverged)?;
    if view.fire_hash(entry.seq)?.as_deref() != Some(entry.hash.as_str()) {
        return Err(diverged());
    }
    if entry.seq != local {
        if entry.seq > local {
            tracing::info!(
                cursor = local,
                server = entry.seq,
                "the server holds fires past the cursor: moving up to it"
            );
        } else {
            tracing::warn!(
                cursor = local,
                server = entry.seq,
                "the server lost fires it had acked: sending them again"
            );
        }
        if let Err(e) = cursor::store(out, entry.seq) {
            tracing::warn!(error = %e, "cannot store the fleet cursor");
        }
    }
    Ok(entry.seq)
}
