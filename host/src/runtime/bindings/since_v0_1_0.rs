//! `sentinel:detector@0.1.0`, frozen: the bindings generated from
//! `wit/since_v0.1.0/detector.wit` (never edited after its release) and the
//! conversions between its types and the newest ones.
//!
//! Owns: those conversions and the 0.1.0 host interfaces. Never: checks on
//! what a 0.1.0 detector returns (its observations are records, which the
//! session checks field by field like packed ones).
//!
//! Only the observations differ from 0.2.0 (records of strings here, packed
//! there); every other type has the same shape and converts field by field.

wasmtime::component::bindgen!({
    world: "detector-world",
    path: "../wit/since_v0.1.0",
});

use self::sentinel::detector::host as host_api;
pub(crate) use self::sentinel::detector::types;
use super::types as latest;
use crate::runtime::sandbox::{LogLevel, StoreData};

impl types::Host for StoreData {}

impl host_api::Host for StoreData {
    fn log(&mut self, level: host_api::Level, message: String) {
        let level = match level {
            host_api::Level::Debug => LogLevel::Debug,
            host_api::Level::Info => LogLevel::Info,
            host_api::Level::Warn => LogLevel::Warn,
            host_api::Level::Error => LogLevel::Error,
        };
        self.log.push(level, message);
    }
}

fn config_value(v: types::ConfigValue) -> latest::ConfigValue {
    match v {
        types::ConfigValue::Boolean(b) => latest::ConfigValue::Boolean(b),
        types::ConfigValue::Integer(i) => latest::ConfigValue::Integer(i),
        types::ConfigValue::Float(f) => latest::ConfigValue::Float(f),
        types::ConfigValue::Text(s) => latest::ConfigValue::Text(s),
        types::ConfigValue::DurationMs(d) => latest::ConfigValue::DurationMs(d),
    }
}

fn config_value_back(v: &latest::ConfigValue) -> types::ConfigValue {
    match v {
        latest::ConfigValue::Boolean(b) => types::ConfigValue::Boolean(*b),
        latest::ConfigValue::Integer(i) => types::ConfigValue::Integer(*i),
        latest::ConfigValue::Float(f) => types::ConfigValue::Float(*f),
        latest::ConfigValue::Text(s) => types::ConfigValue::Text(s.clone()),
        latest::ConfigValue::DurationMs(d) => types::ConfigValue::DurationMs(*d),
    }
}

/// A 0.1.0 descriptor in the newest shape (the same fields).
pub(crate) fn descriptor(d: types::Descriptor) -> latest::Descriptor {
    latest::Descriptor {
        name: d.name,
        version: d.version,
        emits: d.emits,
        subscriptions: d
            .subscriptions
            .into_iter()
            .map(|s| latest::Subscription { source: s.source, kind: s.kind })
            .collect(),
        config: d
            .config
            .into_iter()
            .map(|k| latest::ConfigKey { name: k.name, doc: k.doc, default: config_value(k.default) })
            .collect(),
        cadence_seconds: d.cadence_seconds,
    }
}

/// The newest scan context in the 0.1.0 shape (the same fields).
pub(crate) fn scan_context(c: &latest::ScanContext) -> types::ScanContext {
    types::ScanContext {
        scan_time: c.scan_time,
        window_start: c.window_start,
        config: c.config.iter().map(|(k, v)| (k.clone(), config_value_back(v))).collect(),
        state: c.state.clone(),
    }
}

pub(crate) fn error(e: types::DetectorError) -> latest::DetectorError {
    match e {
        types::DetectorError::BadConfig(m) => latest::DetectorError::BadConfig(m),
        types::DetectorError::BadInput(m) => latest::DetectorError::BadInput(m),
        types::DetectorError::Failed(m) => latest::DetectorError::Failed(m),
    }
}

/// The newest batch in the 0.1.0 shape (the same layout, copied once per
/// batch however many 0.1.0 detectors take it).
pub(crate) fn batch(b: &latest::Batch) -> types::Batch {
    types::Batch {
        source: b.source.clone(),
        kind: b.kind.clone(),
        columns: b
            .columns
            .iter()
            .map(|c| types::Column {
                name: c.name.clone(),
                ty: match c.ty {
                    latest::ColumnType::Text => types::ColumnType::Text,
                    latest::ColumnType::Int => types::ColumnType::Int,
                    latest::ColumnType::Float => types::ColumnType::Float,
                    latest::ColumnType::Boolean => types::ColumnType::Boolean,
                },
            })
            .collect(),
        rows: b.rows,
        text: b.text.clone(),
        text_ends: b.text_ends.clone(),
        ints: b.ints.clone(),
        floats: b.floats.clone(),
        nulls: b.nulls.clone(),
    }
}

pub(crate) fn origin(o: types::Origin) -> latest::Origin {
    match o {
        types::Origin::Harness => latest::Origin::Harness,
        types::Origin::Shell => latest::Origin::Shell,
        types::Origin::External => latest::Origin::External,
    }
}

pub(crate) fn severity(s: types::Severity) -> latest::Severity {
    match s {
        types::Severity::Low => latest::Severity::Low,
        types::Severity::Medium => latest::Severity::Medium,
        types::Severity::High => latest::Severity::High,
    }
}
