//! Building the descriptor a detector returns from `describe`.

use crate::__bindings::sentinel::detector::types;
use crate::ConfigValue;

/// What a detector says about itself: build it with the chained methods.
#[derive(Debug, Clone)]
pub struct Descriptor {
    inner: types::Descriptor,
}

impl Descriptor {
    pub fn new(name: &str, version: &str) -> Self {
        Descriptor {
            inner: types::Descriptor {
                name: name.into(),
                version: version.into(),
                emits: Vec::new(),
                subscriptions: Vec::new(),
                config: Vec::new(),
                cadence_seconds: None,
            },
        }
    }

    /// An observation kind this detector may emit.
    pub fn emits(mut self, kind: &str) -> Self {
        self.inner.emits.push(kind.into());
        self
    }

    /// Records of `kind` from `source` are wanted.
    pub fn subscribe(mut self, source: &str, kind: &str) -> Self {
        self.inner.subscriptions.push(types::Subscription { source: source.into(), kind: kind.into() });
        self
    }

    pub fn config(mut self, name: &str, default: ConfigValue, doc: &str) -> Self {
        self.inner.config.push(types::ConfigKey { name: name.into(), doc: doc.into(), default });
        self
    }
    pub fn config_bool(self, name: &str, default: bool, doc: &str) -> Self {
        self.config(name, ConfigValue::Boolean(default), doc)
    }
    pub fn config_int(self, name: &str, default: i64, doc: &str) -> Self {
        self.config(name, ConfigValue::Integer(default), doc)
    }
    pub fn config_float(self, name: &str, default: f64, doc: &str) -> Self {
        self.config(name, ConfigValue::Float(default), doc)
    }
    pub fn config_text(self, name: &str, default: &str, doc: &str) -> Self {
        self.config(name, ConfigValue::Text(default.into()), doc)
    }
    pub fn config_duration_ms(self, name: &str, default_ms: u64, doc: &str) -> Self {
        self.config(name, ConfigValue::DurationMs(default_ms), doc)
    }

    /// Asks to run every `seconds` rather than on every scan. The host runs
    /// it on the first scan at or after that long since its last run, and
    /// also on any scan that reads a source it subscribes to (the host keeps
    /// one cursor per source, so a cadence never loses records).
    pub fn cadence_seconds(mut self, seconds: u32) -> Self {
        self.inner.cadence_seconds = Some(seconds);
        self
    }

    /// The config defaults, for building a [`crate::ScanContext`] in tests.
    pub fn defaults(&self) -> Vec<(String, ConfigValue)> {
        self.inner.config.iter().map(|k| (k.name.clone(), k.default.clone())).collect()
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub(crate) fn into_wit(self) -> types::Descriptor {
        self.inner
    }
}
