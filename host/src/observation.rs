//! What detectors report, in the host's own types.
//!
//! The runtime converts the WIT `observation` and `descriptor` records into
//! these at its edge, after checking them; the ledger consumes them. Nothing
//! here is stored as is: the ledger hashes signatures and occurrence keys.

use serde::Serialize;

/// Titles are capped at this many characters (privacy rule of the scanner spec).
pub const TITLE_CHARS: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Harness,
    Shell,
    External,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Harness => "harness",
            Origin::Shell => "shell",
            Origin::External => "external",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "harness" => Origin::Harness,
            "shell" => Origin::Shell,
            "external" => Origin::External,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "low" => Severity::Low,
            "medium" => Severity::Medium,
            "high" => Severity::High,
            _ => return None,
        })
    }
}

/// One observation, as returned by a detector and checked by the runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The detector that reported it.
    pub detector: String,
    pub kind: String,
    /// The detector's grouping key. Hashed by the ledger, never stored.
    pub signature: String,
    /// The version of the rules that built `signature`.
    pub grouping_version: u32,
    pub title: String,
    pub origin: Origin,
    pub severity: Severity,
    pub tool: Option<String>,
    pub bot_id: Option<String>,
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    pub at: i64,
    /// Hashed by the ledger, never stored.
    pub occurrence: String,
    pub evidence_source: String,
    pub evidence_id: String,
    pub wasted_turns: u32,
    /// Made by a detector on probation: a field of the fire and of its
    /// issue, never part of the title.
    pub probation: bool,
}

/// A typed config value, mirroring the WIT `config-value`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ConfigValue {
    Boolean(bool),
    Integer(i64),
    Float(f64),
    Text(String),
    DurationMs(u64),
}

impl ConfigValue {
    pub fn type_name(&self) -> &'static str {
        match self {
            ConfigValue::Boolean(_) => "boolean",
            ConfigValue::Integer(_) => "integer",
            ConfigValue::Float(_) => "float",
            ConfigValue::Text(_) => "text",
            ConfigValue::DurationMs(_) => "duration",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigKey {
    pub name: String,
    pub doc: String,
    pub default: ConfigValue,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subscription {
    pub source: String,
    pub kind: String,
}

/// What a detector says about itself at load.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub name: String,
    pub version: String,
    pub emits: Vec<String>,
    pub subscriptions: Vec<Subscription>,
    pub config: Vec<ConfigKey>,
    pub cadence_seconds: Option<u32>,
}
