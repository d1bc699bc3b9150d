//! Why a detector did not complete a scan, as data: the kind of failure and
//! the call it happened in.
//!
//! It owns [`FailureKind`] (each kind's stable label, the text the ledger
//! stores and the JSON summary shows), [`Phase`] (which call), and
//! [`Failure`], the pair a detector's health keeps (`fuel in push`, never a
//! message). The runtime classifies a call's error into a kind; the scan
//! adds the host's own reasons (refused at load, a config that does not fit,
//! quarantined); the standing rule counts it; text is made only where it is
//! stored or shown. It never holds a message a detector wrote.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// Which call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Describe,
    Instantiate,
    Start,
    Push,
    Finish,
}

impl Phase {
    const ALL: [Phase; 5] = [Phase::Describe, Phase::Instantiate, Phase::Start, Phase::Push, Phase::Finish];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Describe => "describe",
            Phase::Instantiate => "instantiate",
            Phase::Start => "start",
            Phase::Push => "push",
            Phase::Finish => "finish",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Phase::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Phase {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What went wrong, precisely enough to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The call outlived the epoch deadline (the 100 ms fire rule).
    Deadline,
    /// The call used up its fuel.
    Fuel,
    /// The linear memory cap was hit.
    Memory,
    /// The table cap was hit.
    Table,
    /// More core instances, tables or memories than a store may create.
    Instances,
    Tables,
    Memories,
    /// The guest overflowed its stack.
    Stack,
    /// Any other trap (a panic is `unreachable`).
    Trap,
    /// The detector returned an error of its own.
    DetectorError,
    /// The detector returned something the host will not accept.
    InvalidOutput,
    /// Anything else the runtime reported.
    Host,
    /// The host refused the component when loading it.
    Load,
    /// The operator's config does not fit the detector's declared keys.
    BadConfig,
    /// Not run: the detector is quarantined.
    Quarantined,
    /// Its scan would add more new fires or new issues than the cap
    /// (`[limits] fires_per_scan`, or one per record it read): nothing of
    /// that scan is committed.
    OverLimit,
}

impl FailureKind {
    pub const ALL: [FailureKind; 16] = [
        FailureKind::Deadline,
        FailureKind::Fuel,
        FailureKind::Memory,
        FailureKind::Table,
        FailureKind::Instances,
        FailureKind::Tables,
        FailureKind::Memories,
        FailureKind::Stack,
        FailureKind::Trap,
        FailureKind::DetectorError,
        FailureKind::InvalidOutput,
        FailureKind::Host,
        FailureKind::Load,
        FailureKind::BadConfig,
        FailureKind::Quarantined,
        FailureKind::OverLimit,
    ];

    /// A short stable label for summaries, JSON and the ledger.
    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Deadline => "deadline",
            FailureKind::Fuel => "fuel",
            FailureKind::Memory => "memory",
            FailureKind::Table => "table",
            FailureKind::Instances => "instances",
            FailureKind::Tables => "tables",
            FailureKind::Memories => "memories",
            FailureKind::Stack => "stack",
            FailureKind::Trap => "trap",
            FailureKind::DetectorError => "detector-error",
            FailureKind::InvalidOutput => "invalid-output",
            FailureKind::Host => "host",
            FailureKind::Load => "load",
            FailureKind::BadConfig => "bad-config",
            FailureKind::Quarantined => "quarantined",
            FailureKind::OverLimit => "over-limit",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        FailureKind::ALL.into_iter().find(|k| k.label() == s)
    }

    /// A hard kill by the sandbox: the deadline, fuel or the memory cap.
    pub fn is_kill(self) -> bool {
        matches!(self, FailureKind::Deadline | FailureKind::Fuel | FailureKind::Memory)
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl Serialize for FailureKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.label())
    }
}

/// A failure as a detector's health keeps it: the kind, and the call when
/// one failed. It reads `fuel in push`, or `load` alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub phase: Option<Phase>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.phase {
            Some(p) => write!(f, "{} in {p}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl Serialize for Failure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Text that is not what [`Failure`]'s `Display` writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a failure (a kind, or a kind `in` a phase)")]
pub struct NotAFailure(pub String);

impl FromStr for Failure {
    type Err = NotAFailure;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || NotAFailure(s.to_owned());
        let (kind, phase) = match s.split_once(" in ") {
            Some((k, p)) => (k, Some(Phase::parse(p).ok_or_else(bad)?)),
            None => (s, None),
        };
        Ok(Failure { kind: FailureKind::parse(kind).ok_or_else(bad)?, phase })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reads_back_from_the_text_the_ledger_stores() {
        for kind in FailureKind::ALL {
            for phase in [None].into_iter().chain(Phase::ALL.map(Some)) {
                let f = Failure { kind, phase };
                assert_eq!(f.to_string().parse(), Ok(f), "{f}");
            }
        }
        assert_eq!("fuel in push".parse(), Ok(Failure { kind: FailureKind::Fuel, phase: Some(Phase::Push) }));
        for text in ["", "fuel in", "fuel in lunch", "ran out of fuel", "Fuel"] {
            assert!(text.parse::<Failure>().is_err(), "{text}");
        }
    }
}
