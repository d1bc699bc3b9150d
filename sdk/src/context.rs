//! The scan context: scan time, typed config and the state kept from the last scan.

use crate::__bindings::sentinel::detector::types;
use crate::{ConfigValue, DetectorError};

/// What a scan knows besides its records.
#[derive(Debug, Clone)]
pub struct ScanContext {
    /// The scan time, ms since the Unix epoch: use it instead of a clock.
    pub scan_time: i64,
    /// The earliest record time the host considered, ms since the Unix epoch.
    pub window_start: i64,
    config: Vec<(String, ConfigValue)>,
    state: Option<Vec<u8>>,
}

impl ScanContext {
    pub(crate) fn from_wit(c: types::ScanContext) -> Self {
        ScanContext { scan_time: c.scan_time, window_start: c.window_start, config: c.config, state: c.state }
    }

    /// A context for tests and replay cases.
    pub fn new(scan_time: i64, config: Vec<(String, ConfigValue)>, state: Option<Vec<u8>>) -> Self {
        ScanContext { scan_time, window_start: 0, config, state }
    }

    /// The state the last successful scan returned.
    pub fn state(&self) -> Option<&[u8]> {
        self.state.as_deref()
    }

    pub fn value(&self, key: &str) -> Option<&ConfigValue> {
        self.config.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn wrong(key: &str, want: &str) -> DetectorError {
        DetectorError::BadConfig(format!("`{key}` must be {want}"))
    }

    pub fn boolean(&self, key: &str) -> Result<bool, DetectorError> {
        match self.value(key) {
            Some(ConfigValue::Boolean(b)) => Ok(*b),
            _ => Err(Self::wrong(key, "a boolean")),
        }
    }
    pub fn integer(&self, key: &str) -> Result<i64, DetectorError> {
        match self.value(key) {
            Some(ConfigValue::Integer(i)) => Ok(*i),
            _ => Err(Self::wrong(key, "an integer")),
        }
    }
    pub fn float(&self, key: &str) -> Result<f64, DetectorError> {
        match self.value(key) {
            Some(ConfigValue::Float(f)) => Ok(*f),
            Some(ConfigValue::Integer(i)) => Ok(*i as f64),
            _ => Err(Self::wrong(key, "a number")),
        }
    }
    pub fn text(&self, key: &str) -> Result<&str, DetectorError> {
        match self.value(key) {
            Some(ConfigValue::Text(s)) => Ok(s),
            _ => Err(Self::wrong(key, "text")),
        }
    }
    /// A duration in milliseconds.
    pub fn duration_ms(&self, key: &str) -> Result<u64, DetectorError> {
        match self.value(key) {
            Some(ConfigValue::DurationMs(d)) => Ok(*d),
            _ => Err(Self::wrong(key, "a duration")),
        }
    }
}
