//! The connection to NATS and the two streams.
//!
//! It owns connecting (the `[fleet]` URL, the token read from its file) and
//! [`ensure_streams`]: `SENTINEL_FIRES` (subjects `sentinel.fires.>`, file
//! storage, limits retention, the configured duplicate window, `max_age`,
//! `max_bytes`, `discard: new`) and `SENTINEL_HEADS` (`sentinel.heads.>`, a
//! few heads per subject) are created when missing; an existing one is used
//! when compatible (same subjects, file storage, limits retention, a
//! duplicate window, and at least each limit the config sets: see
//! [`compatible`]) and refused otherwise with [`FleetError::Incompatible`]
//! naming the stream and the setting. It never changes an existing stream
//! (its limits are the operator's) and never reads the fire log.

use std::time::Duration;

use async_nats::jetstream::{self, stream};

use crate::config::FleetConfig;

pub const FIRES_STREAM: &str = "SENTINEL_FIRES";
pub const HEADS_STREAM: &str = "SENTINEL_HEADS";
/// Heads kept per install in `SENTINEL_HEADS`.
const HEADS_PER_SUBJECT: i64 = 8;

/// What stops the shipper, or one of its sessions.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("cannot read the NATS token file {path}")]
    Token { path: std::path::PathBuf, source: std::io::Error },
    #[error("cannot connect to {url}")]
    Connect { url: String, source: async_nats::ConnectError },
    #[error(
        "the stream {stream} exists with settings the shipper cannot use: {setting} (edit the stream, or the [fleet] config)"
    )]
    Incompatible { stream: &'static str, setting: String },
    #[error("JetStream refused {what}: {message}")]
    Server { what: &'static str, message: String },
    #[error("no ack for the publish of entry {seq}")]
    NoAck { seq: u64 },
    #[error("JetStream refused entry {seq}: the stream is full ({message}); the backlog waits for room")]
    Full { seq: u64, message: String },
    #[error("the server's last message on {subject} (seq {seq}) is not this log's entry {seq}")]
    Diverged { subject: String, seq: u64 },
    #[error("cannot read the fire log")]
    Ledger(#[from] crate::ledger::LedgerError),
}

impl FleetError {
    pub(crate) fn server(what: &'static str, e: impl std::fmt::Display) -> FleetError {
        FleetError::Server { what, message: e.to_string() }
    }
    /// A setting no retry can change: the shipper stops and says so.
    pub fn is_permanent(&self) -> bool {
        matches!(self, FleetError::Incompatible { .. } | FleetError::Diverged { .. } | FleetError::Token { .. })
    }
}

/// Connects once (no background reconnect: a lost connection ends the
/// session, and the next one reconciles from the server).
pub async fn connect(cfg: &FleetConfig) -> Result<jetstream::Context, FleetError> {
    let mut opts = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .max_reconnects(Some(1))
        .request_timeout(Some(Duration::from_secs(5)));
    if let Some(path) = &cfg.token_file {
        let token = std::fs::read_to_string(path).map_err(|source| FleetError::Token { path: path.clone(), source })?;
        opts = opts.token(token.trim().to_owned());
    }
    let client = async_nats::connect_with_options(cfg.nats.as_str(), opts)
        .await
        .map_err(|source| FleetError::Connect { url: cfg.nats.clone(), source })?;
    let mut js = jetstream::new(client);
    js.set_timeout(Duration::from_secs(5));
    Ok(js)
}

fn fires_config(cfg: &FleetConfig) -> stream::Config {
    stream::Config {
        name: FIRES_STREAM.into(),
        subjects: vec!["sentinel.fires.>".into()],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::New,
        duplicate_window: Duration::from_secs(
            cfg.duplicate_window_secs.unwrap_or(FleetConfig::DEFAULT_DUPLICATE_WINDOW).max(1),
        ),
        max_age: Duration::from_secs(cfg.max_age_secs.unwrap_or(0)),
        max_bytes: cfg.max_bytes.unwrap_or(-1),
        ..Default::default()
    }
}

fn heads_config() -> stream::Config {
    stream::Config {
        name: HEADS_STREAM.into(),
        subjects: vec!["sentinel.heads.>".into()],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        max_messages_per_subject: HEADS_PER_SUBJECT,
        ..Default::default()
    }
}

/// Creates both streams when missing, checks them when present; returns
/// the fires stream (for the reconcile's direct get).
pub async fn ensure_streams(js: &jetstream::Context, cfg: &FleetConfig) -> Result<stream::Stream, FleetError> {
    let fires = ensure(js, FIRES_STREAM, fires_config(cfg)).await?;
    limits_hold(FIRES_STREAM, cfg, &fires.cached_info().config)?;
    ensure(js, HEADS_STREAM, heads_config()).await?;
    Ok(fires)
}

async fn ensure(
    js: &jetstream::Context,
    name: &'static str,
    want: stream::Config,
) -> Result<stream::Stream, FleetError> {
    let got = js.get_or_create_stream(want.clone()).await.map_err(|e| FleetError::server("the stream", e))?;
    compatible(name, &want, &got.cached_info().config)?;
    Ok(got)
}

/// Each limit `[fleet]` sets is a floor an existing stream must reach: a
/// duplicate window as long (a resend inside it is stored once), a
/// `max_age` as long or none (fires kept as long as the config says), a
/// `max_bytes` as large or none (room as the config says). A limit left out
/// of the config takes the stream's.
pub fn limits_hold(stream: &'static str, cfg: &FleetConfig, got: &stream::Config) -> Result<(), FleetError> {
    let bad = |setting: String| Err(FleetError::Incompatible { stream, setting });
    if let Some(w) = cfg.duplicate_window_secs
        && got.duplicate_window < Duration::from_secs(w.max(1))
    {
        let has = got.duplicate_window.as_secs();
        return bad(format!("duplicate window {has}s, shorter than the config's duplicate_window_secs = {w}"));
    }
    if let Some(age) = cfg.max_age_secs
        && !got.max_age.is_zero()
        && (age == 0 || got.max_age < Duration::from_secs(age))
    {
        let has = got.max_age.as_secs();
        return bad(format!("max_age {has}s, shorter than the config's max_age_secs = {age} (0: for ever)"));
    }
    if let Some(bytes) = cfg.max_bytes
        && got.max_bytes >= 0
        && (bytes < 0 || got.max_bytes < bytes)
    {
        let has = got.max_bytes;
        return bad(format!("max_bytes {has}, below the config's max_bytes = {bytes} (-1: no limit)"));
    }
    Ok(())
}

/// An existing stream is used when it takes our subjects, keeps them on
/// file under limits, and deduplicates.
pub fn compatible(stream: &'static str, want: &stream::Config, got: &stream::Config) -> Result<(), FleetError> {
    let bad = |setting: String| Err(FleetError::Incompatible { stream, setting });
    if !want.subjects.iter().all(|s| got.subjects.contains(s)) {
        return bad(format!("subjects {:?}, not {:?}", got.subjects, want.subjects));
    }
    if got.storage != stream::StorageType::File {
        return bad(format!("storage {:?}, not file", got.storage));
    }
    if got.retention != stream::RetentionPolicy::Limits {
        return bad(format!("retention {:?}, not limits", got.retention));
    }
    if got.duplicate_window.is_zero() {
        return bad("no duplicate window".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_on_memory_or_other_subjects_is_refused_naming_the_setting() {
        let cfg: FleetConfig = toml::from_str("nats = \"nats://127.0.0.1:1\"").unwrap();
        let want = fires_config(&cfg);
        assert!(compatible(FIRES_STREAM, &want, &want).is_ok());
        let memory = stream::Config { storage: stream::StorageType::Memory, ..want.clone() };
        let err = compatible(FIRES_STREAM, &want, &memory).unwrap_err().to_string();
        assert!(err.contains("SENTINEL_FIRES") && err.contains("Memory"), "{err}");
        let other = stream::Config { subjects: vec!["other.>".into()], ..want.clone() };
        assert!(compatible(FIRES_STREAM, &want, &other).unwrap_err().to_string().contains("other.>"));
    }

    fn fleet(extra: &str) -> FleetConfig {
        toml::from_str(&format!("nats = \"nats://127.0.0.1:1\"\n{extra}")).unwrap()
    }

    #[test]
    fn a_stream_short_of_a_limit_the_config_sets_is_refused_naming_it_and_one_left_out_takes_the_streams() {
        let stream = fires_config(&fleet("duplicate_window_secs = 60\nmax_age_secs = 3600\nmax_bytes = 4096"));
        // Left out of the config: whatever the stream has.
        assert!(limits_hold(FIRES_STREAM, &fleet(""), &stream).is_ok());
        // As much, or more (none is more), is used.
        assert!(limits_hold(FIRES_STREAM, &fleet("max_bytes = 4096\nmax_age_secs = 3600"), &stream).is_ok());
        let open = stream::Config { max_bytes: -1, max_age: Duration::ZERO, ..stream.clone() };
        assert!(limits_hold(FIRES_STREAM, &fleet("max_bytes = 1000000\nmax_age_secs = 0"), &open).is_ok());
        for (config, named) in [
            ("duplicate_window_secs = 120", "duplicate window 60s"),
            ("max_age_secs = 7200", "max_age 3600s"),
            ("max_age_secs = 0", "max_age 3600s"),
            ("max_bytes = 8192", "max_bytes 4096"),
            ("max_bytes = -1", "max_bytes 4096"),
        ] {
            let err = limits_hold(FIRES_STREAM, &fleet(config), &stream).unwrap_err().to_string();
            assert!(err.contains("SENTINEL_FIRES") && err.contains(named), "{config}: {err}");
        }
    }
}
