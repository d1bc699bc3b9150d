//! The publish loop of one session: entries out, acks in, cursor after.
//!
//! It owns [`batch`]: up to `in_flight` entries are published at once,
//! each to `sentinel.fires.<install>` with `Nats-Msg-Id` = the entry's hash
//! and the entry as the payload; their acks are awaited in order, and the
//! cursor is stored once the batch (a read page, at most 256 entries) is
//! acked or stops: an fsynced write per ack would cap the shipper at the
//! disk's sync rate, and a cursor left behind by a crash is what the
//! reconcile moves up (the server's last message on the subject is the
//! word, the cursor only where to start when the subject is empty). A publish whose ack
//! does not come (lost on the way, the connection cut after the server took
//! it) is sent again with the same id, from that entry on, a few times: the
//! server reports the copy it already holds as a `duplicate` and stores
//! nothing. Any other refusal (JetStream full with `discard: new`
//! ([`FleetError::Full`]), a dropped connection) ends the batch with an
//! error: the session is dropped and the next one reconciles first. It also
//! owns [`witness`], which publishes the signed head to
//! `sentinel.heads.<install>`. It never writes the ledger.

use std::path::Path;
use std::sync::atomic::Ordering;

use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::{self, message::PublishMessage};

use super::Stats;
use super::cursor;
use super::link::{FIRES_STREAM, FleetError};
use crate::firelog::{FireEntry, Head};

/// Times one entry is sent again for a lost ack before the session ends.
const RESENDS: u32 = 3;

/// Publishes `entries` (in `seq` order, following the cursor) and returns
/// the last `seq` acked.
pub async fn batch(
    js: &jetstream::Context,
    out: &Path,
    subject: &str,
    entries: &[FireEntry],
    in_flight: usize,
    stats: &Stats,
) -> Result<u64, FleetError> {
    let stored = cursor::read(out);
    let mut acked = stored;
    let result = publish_all(js, subject, entries, in_flight, stats, &mut acked).await;
    if acked != stored
        && let Err(e) = cursor::store(out, acked)
    {
        tracing::warn!(error = %e, "cannot store the fleet cursor; the next session reconciles");
    }
    result.map(|()| acked)
}

/// The loop of [`batch`]: `acked` follows the acks as they come.
async fn publish_all(
    js: &jetstream::Context,
    subject: &str,
    entries: &[FireEntry],
    in_flight: usize,
    stats: &Stats,
    acked: &mut u64,
) -> Result<(), FleetError> {
    let mut rest = entries;
    let mut resends = 0;
    while !rest.is_empty() {
        let chunk = &rest[..in_flight.clamp(1, rest.len())];
        let (done, lost) = chunk_out(js, subject, chunk, stats).await;
        if let Some(last) = chunk[..done].last() {
            *acked = last.seq;
            resends = 0;
        }
        rest = &rest[done..];
        match lost {
            None => {}
            Some(FleetError::NoAck { seq }) if resends < RESENDS => {
                resends += 1;
                stats.resent.fetch_add(1, Ordering::SeqCst);
                tracing::warn!(seq, "no ack for a publish: sending it again with the same id");
            }
            Some(e) => return Err(e),
        }
    }
    Ok(())
}

/// Publishes `chunk` and awaits its acks in order: how many were acked,
/// and what stopped the rest.
async fn chunk_out(
    js: &jetstream::Context,
    subject: &str,
    chunk: &[FireEntry],
    stats: &Stats,
) -> (usize, Option<FleetError>) {
    let mut pending = Vec::with_capacity(chunk.len());
    for e in chunk {
        let payload = serde_json::to_vec(e).expect("a fire entry always serializes");
        stats.bytes.fetch_add(payload.len() as u64, Ordering::SeqCst);
        let publish = PublishMessage::build().payload(payload.into()).message_id(&e.hash);
        match js.send_publish(subject.to_owned(), publish).await {
            Ok(ack) => pending.push((e.seq, ack)),
            Err(err) => return (0, Some(refused(e.seq, &err))),
        }
    }
    for (done, (seq, ack)) in pending.into_iter().enumerate() {
        let ack = match ack.await {
            Ok(ack) if ack.stream == FIRES_STREAM => ack,
            Ok(ack) => {
                return (done, Some(FleetError::server("a publish", format!("stored in {} instead", ack.stream))));
            }
            Err(err) => return (done, Some(refused(seq, &err))),
        };
        if ack.duplicate {
            stats.duplicates.fetch_add(1, Ordering::SeqCst);
        }
        stats.full.store(false, Ordering::SeqCst);
        crate::ledger::count::test_hook::pause("fleet-acked");
        stats.cursor.store(seq, Ordering::SeqCst);
        stats.last_ack_ms.store(super::now_ms(), Ordering::SeqCst);
    }
    (chunk.len(), None)
}

/// What a failed publish of entry `seq` means for the shipper.
fn refused(seq: u64, err: &PublishError) -> FleetError {
    match err.kind() {
        PublishErrorKind::TimedOut | PublishErrorKind::BrokenPipe => FleetError::NoAck { seq },
        _ if is_full(err) => FleetError::Full { seq, message: crate::base::errors::error_chain(err) },
        _ => FleetError::server("a publish", crate::base::errors::error_chain(err)),
    }
}

/// JetStream refused to store: the stream is at a limit with `discard: new`
/// (`maximum bytes exceeded`, `maximum messages exceeded`, error 10077).
fn is_full(err: &PublishError) -> bool {
    use std::error::Error as _;
    err.source()
        .and_then(|s| s.downcast_ref::<jetstream::Error>())
        .is_some_and(|e| e.error_code() == jetstream::ErrorCode::STREAM_STORE_FAILED)
}

/// Publishes the signed head; the message id makes a repeat a duplicate.
pub async fn witness(js: &jetstream::Context, install: &str, head: &Head) -> Result<(), FleetError> {
    let payload = serde_json::to_vec(head).expect("a head always serializes");
    let id = format!("head-{}-{}-{}", head.count, head.hash, head.signed_at);
    let publish = PublishMessage::build().payload(payload.into()).message_id(id);
    let ack = js
        .send_publish(format!("sentinel.heads.{install}"), publish)
        .await
        .map_err(|e| FleetError::server("the head", e))?;
    ack.await.map_err(|e| FleetError::server("the head", e))?;
    Ok(())
}
