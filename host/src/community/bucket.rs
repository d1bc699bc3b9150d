//! The JetStream key-value bucket `sentinel_community`.
//!
//! It owns the bucket's creation when missing (file storage, one value kept
//! per key, values capped at [`VALUE_MAX`] bytes, made as a plain stream: see [`ensure`]), putting records, and
//! reading the newest value of every key (an ordered consumer, last value
//! per subject, deletes skipped). The connection is the fleet's
//! ([`crate::fleet::link::connect`]: its URL and token). It never builds a
//! record and never touches a file.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, stream};
use futures_util::StreamExt as _;

use super::CommunityError;
use super::record::{Record, VALUE_MAX};
use crate::config::FleetConfig;

pub const BUCKET: &str = "sentinel_community";

fn server(what: &'static str, e: impl std::fmt::Display) -> CommunityError {
    CommunityError::Server { what, message: e.to_string() }
}

pub async fn connect(cfg: &FleetConfig) -> Result<jetstream::Context, CommunityError> {
    Ok(crate::fleet::link::connect(cfg).await?)
}

/// The bucket, created when missing. Its stream is made as the KV API
/// makes it (`KV_sentinel_community`, `$KV.sentinel_community.>`, rollups,
/// direct gets, no deletes, `discard: new`), but by a plain stream create:
/// the KV API's own create first asks for the account's info, which
/// async-nats 0.51 cannot parse from a 2.9 server (Debian's).
pub async fn ensure(js: &jetstream::Context) -> Result<kv::Store, CommunityError> {
    if let Ok(store) = js.get_key_value(BUCKET).await {
        return Ok(store);
    }
    let config = stream::Config {
        name: format!("KV_{BUCKET}"),
        description: Some("sentinel community counts: {sig, kind, origin, tool, count} per issue and week".into()),
        subjects: vec![format!("$KV.{BUCKET}.>")],
        max_messages_per_subject: 1,
        max_bytes: -1,
        max_message_size: i32::try_from(VALUE_MAX).unwrap_or(i32::MAX),
        storage: stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        num_replicas: 1,
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    };
    // Another install may make it in between: either way it is there after.
    js.get_or_create_stream(config).await.map_err(|e| server("the bucket", e))?;
    js.get_key_value(BUCKET).await.map_err(|e| server("the bucket", e))
}

/// Puts `records`, calling `acked` after each one the server acked.
pub async fn put(store: &kv::Store, records: &[&Record], mut acked: impl FnMut(&Record)) -> Result<(), CommunityError> {
    for r in records {
        store.put(&r.key, r.bytes.clone().into()).await.map_err(|e| server("a put", e))?;
        acked(r);
    }
    Ok(())
}

/// The newest value of every key under `filter` (`>` for all, `KIND.*.*`
/// for one kind), with its key.
pub async fn read_all(
    js: &jetstream::Context,
    store: &kv::Store,
    filter: &str,
) -> Result<Vec<(String, Vec<u8>)>, CommunityError> {
    let consumer = store
        .stream
        .create_consumer(consumer::push::OrderedConfig {
            deliver_subject: js.client().new_inbox(),
            filter_subject: format!("{}{filter}", store.prefix),
            deliver_policy: consumer::DeliverPolicy::LastPerSubject,
            replay_policy: consumer::ReplayPolicy::Instant,
            ..Default::default()
        })
        .await
        .map_err(|e| server("a reader of the bucket", e))?;
    let mut pending = consumer.cached_info().num_pending;
    let mut messages = consumer.messages().await.map_err(|e| server("a reader of the bucket", e))?;
    let mut out = Vec::new();
    while pending > 0 {
        let Ok(next) = tokio::time::timeout(Duration::from_secs(10), messages.next()).await else {
            return Err(server("a read of the bucket", "no message within 10 s"));
        };
        let Some(message) = next else { break };
        let message = message.map_err(|e| server("a read of the bucket", e))?;
        pending = message.info().map_err(|e| server("a read of the bucket", e))?.pending;
        let deleted = message.headers.as_ref().and_then(|h| h.get("KV-Operation")).is_some();
        if let (false, Some(key)) = (deleted, message.subject.strip_prefix(store.prefix.as_str())) {
            out.push((key.to_owned(), message.payload.to_vec()));
        }
    }
    Ok(out)
}
