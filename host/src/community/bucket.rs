//! The JetStream key-value bucket `sentinel_community`.
//!
//! It owns the bucket's creation when missing (file storage, one value kept
//! per key, values capped at [`VALUE_MAX`] bytes), putting records, and
//! reading the newest value of every key (an ordered consumer, last value
//! per subject, deletes skipped). The connection is the fleet's
//! ([`crate::fleet::link::connect`]: its URL and token). It never builds a
//! record and never touches a file.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv};
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

/// The bucket, created when missing.
pub async fn ensure(js: &jetstream::Context) -> Result<kv::Store, CommunityError> {
    if let Ok(store) = js.get_key_value(BUCKET).await {
        return Ok(store);
    }
    let config = kv::Config {
        bucket: BUCKET.into(),
        description: "sentinel community counts: {sig, kind, origin, tool, count} per issue and week".into(),
        history: 1,
        max_value_size: i32::try_from(VALUE_MAX).unwrap_or(i32::MAX),
        storage: jetstream::stream::StorageType::File,
        ..Default::default()
    };
    match js.create_key_value(config).await {
        Ok(store) => Ok(store),
        // Another install made it in between.
        Err(e) => js.get_key_value(BUCKET).await.map_err(|_| server("the bucket", e)),
    }
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
