//! The publish loop of one session: entries out, acks in, cursor after.
//!
//! It owns [`batch`]: up to `in_flight` entries are published at once,
//! each to `sentinel.fires.<install>` with `Nats-Msg-Id` = the entry's hash
//! and the entry as the payload; their acks are awaited in order and the
//! cursor is stored after each (a crash between an ack and its cursor is
//! what the reconcile and the duplicate window absorb). A refused publish
//! (JetStream full with `discard: new`, a lost ack, a dropped connection)
//! ends the batch with an error: the session is dropped and the next one
//! reconciles first. It also owns [`witness`], which publishes the signed
//! head to `sentinel.heads.<install>`. It never writes the ledger.

use std::path::Path;
use std::sync::atomic::Ordering;

use async_nats::jetstream::{self, message::PublishMessage};

use super::Stats;
use super::cursor;
use super::link::{FIRES_STREAM, FleetError};
use crate::firelog::{FireEntry, Head};

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
    let mut acked = cursor::read(out);
    for chunk in entries.chunks(in_flight.max(1)) {
        let mut pending = Vec::with_capacity(chunk.len());
        for e in chunk {
            let payload = serde_json::to_vec(e).expect("a fire entry always serializes");
            stats.bytes.fetch_add(payload.len() as u64, Ordering::SeqCst);
            let publish = PublishMessage::build().payload(payload.into()).message_id(&e.hash);
            let ack =
                js.send_publish(subject.to_owned(), publish).await.map_err(|e| FleetError::server("a publish", e))?;
            pending.push((e.seq, ack));
        }
        for (seq, ack) in pending {
            let ack = ack.await.map_err(|e| FleetError::server("a publish", e))?;
            if ack.stream != FIRES_STREAM {
                return Err(FleetError::server("a publish", format!("stored in {} instead", ack.stream)));
            }
            if ack.duplicate {
                stats.duplicates.fetch_add(1, Ordering::SeqCst);
            }
            crate::ledger::count::test_hook::pause("fleet-acked");
            if let Err(e) = cursor::store(out, seq) {
                tracing::warn!(error = %e, "cannot store the fleet cursor; the next session reconciles");
            }
            acked = seq;
            stats.cursor.store(seq, Ordering::SeqCst);
            stats.last_ack_ms.store(super::now_ms(), Ordering::SeqCst);
        }
    }
    Ok(acked)
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
