//! A fire log entry, typed: what every entry has, and what its type adds.
//!
//! It owns [`FireType`], [`FireEntry`] (the fields every entry has and a
//! [`FireBody`], one variant per type carrying just that type's fields),
//! [`FireEntryRef`] (the same, borrowed and not yet sealed: what the commit
//! appends) and the one-line summary a fire is shown with. It never encodes
//! an entry: the segment line and the hash input are [`super::line`]'s, the
//! flat shape the log has always had.

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use super::KeyChange;
use crate::model::observation::{Origin, Severity};

/// What kind of fact an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FireType {
    /// An occurrence counted for the first time.
    Occurrence,
    /// A detector benched: by its failures or by the operator.
    Quarantine,
    /// A detector let back (on probation) by the operator.
    Release,
    /// A diagnostic fire: the operator's force-wake (the watch API), with
    /// the tenant it landed in named in `reason`.
    Diagnostic,
    /// An issue marked fixed by the operator (`sig`, the note in `reason`).
    Fix,
    /// A fixed or regressed issue set open again by the operator (`sig`).
    Reopen,
    /// A fixed issue seen again: a new occurrence counted after its fix.
    Regression,
    /// The daily digest of a period that was not quiet: `reason` names its
    /// file in the output folder and its totals (docs/cli.md, `report`).
    Digest,
    /// Issue `sig` crossed the configured threshold (`[report]`'s count or
    /// wasted turns in its window): once per crossing; `reason` says which.
    Threshold,
    /// The operator replaced the signing key (`key rotate`) while the old
    /// one was there: `key` names the new key, signed by the old one.
    KeyRotation,
    /// The operator replaced a signing key that was gone: `key` names the
    /// new key, and nothing vouches for it (a finding `verify` reports).
    KeyLost,
}

impl FireType {
    /// Every type, in the order the docs list them.
    pub const ALL: [FireType; 11] = [
        FireType::Occurrence,
        FireType::Quarantine,
        FireType::Release,
        FireType::Diagnostic,
        FireType::Fix,
        FireType::Reopen,
        FireType::Regression,
        FireType::Digest,
        FireType::Threshold,
        FireType::KeyRotation,
        FireType::KeyLost,
    ];

    /// The name the JSON shows.
    pub fn as_str(self) -> &'static str {
        match self {
            FireType::Occurrence => "occurrence",
            FireType::Quarantine => "quarantine",
            FireType::Release => "release",
            FireType::Diagnostic => "diagnostic",
            FireType::Fix => "fix",
            FireType::Reopen => "reopen",
            FireType::Regression => "regression",
            FireType::Digest => "digest",
            FireType::Threshold => "threshold",
            FireType::KeyRotation => "key-rotation",
            FireType::KeyLost => "key-lost",
        }
    }

    /// Whether an entry of this type changes the signing key (and carries
    /// the `key` field, hashed after `reason`).
    pub fn changes_key(self) -> bool {
        matches!(self, FireType::KeyRotation | FireType::KeyLost)
    }

    /// The type named `name` as the JSON shows it.
    pub fn parse(name: &str) -> Option<FireType> {
        FireType::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether a fire of this type warms its sentinel: occurrences and
    /// diagnostic fires do, health changes do not.
    pub fn warms(self) -> bool {
        matches!(self, FireType::Occurrence | FireType::Diagnostic)
    }
}

/// What an entry's type adds to the fields every entry has: each variant
/// carries just the fields that type has (an `Option` where the host writes
/// it only sometimes). Owned in a [`FireEntry`]; borrowed (`S` = `&str`,
/// `K` = `&KeyChange`) in a [`FireEntryRef`]. Never raw content: references,
/// the signature's hash and normalized fields only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireBody<S = String, K = KeyChange> {
    /// An occurrence counted for the first time: what its issue carries.
    Occurrence {
        kind: S,
        /// The issue signature (`kind:` and a hash of the grouping key).
        sig: S,
        origin: Origin,
        severity: Severity,
        tool: Option<S>,
        bot_id: Option<S>,
        thread_id: Option<S>,
        turn_id: Option<S>,
        evidence_source: S,
        evidence_id: S,
    },
    /// Why: the failures in a row and the last one, or the operator.
    Quarantine { reason: S },
    /// Why: the operator.
    Release { reason: S },
    /// Where the force-wake landed, or (with the issue named) why a detector
    /// update no longer produces a fixed issue.
    Diagnostic { reason: S, kind: Option<S>, sig: Option<S> },
    /// The issue marked fixed, and the operator's note in `reason`.
    Fix { kind: S, sig: S, reason: Option<S> },
    /// The issue set open again.
    Reopen { kind: S, sig: S },
    /// The fixed issue seen again: how many new occurrences.
    Regression { kind: S, sig: S, reason: S },
    /// The digest's file and totals.
    Digest { reason: S },
    /// The issue that crossed the threshold, and which threshold.
    Threshold { kind: S, sig: S, reason: S },
    /// The keys before and after, signed by the old one; `reason` names them.
    KeyRotation { reason: S, key: K },
    /// The keys before and after, unsigned; `reason` names them.
    KeyLost { reason: S, key: K },
}

impl<S: AsRef<str>, K: Borrow<KeyChange>> FireBody<S, K> {
    /// The entry's type, from its variant.
    pub fn fire_type(&self) -> FireType {
        match self {
            FireBody::Occurrence { .. } => FireType::Occurrence,
            FireBody::Quarantine { .. } => FireType::Quarantine,
            FireBody::Release { .. } => FireType::Release,
            FireBody::Diagnostic { .. } => FireType::Diagnostic,
            FireBody::Fix { .. } => FireType::Fix,
            FireBody::Reopen { .. } => FireType::Reopen,
            FireBody::Regression { .. } => FireType::Regression,
            FireBody::Digest { .. } => FireType::Digest,
            FireBody::Threshold { .. } => FireType::Threshold,
            FireBody::KeyRotation { .. } => FireType::KeyRotation,
            FireBody::KeyLost { .. } => FireType::KeyLost,
        }
    }

    /// The kind, for an entry that names an issue. This and the
    /// accessors below read the body as its line does ([`super::line`]'s
    /// slots), so the fields a type has are written down once.
    pub fn kind(&self) -> Option<&str> {
        self.slots().kind
    }

    /// The signature, for an entry that names an issue.
    pub fn sig(&self) -> Option<&str> {
        self.slots().sig
    }

    /// Why, or what the fact says in words (the operator's note on a fix),
    /// for an entry that has it.
    pub fn reason(&self) -> Option<&str> {
        self.slots().reason
    }

    /// The keys before and after, for an entry that changes the key.
    pub fn key(&self) -> Option<&KeyChange> {
        self.slots().key
    }
}

impl FireBody {
    /// The same body, borrowed.
    pub fn borrowed(&self) -> FireBody<&str, &KeyChange> {
        match self {
            FireBody::Occurrence {
                kind,
                sig,
                origin,
                severity,
                tool,
                bot_id,
                thread_id,
                turn_id,
                evidence_source,
                evidence_id,
            } => FireBody::Occurrence {
                kind: kind.as_str(),
                sig: sig.as_str(),
                origin: *origin,
                severity: *severity,
                tool: tool.as_deref(),
                bot_id: bot_id.as_deref(),
                thread_id: thread_id.as_deref(),
                turn_id: turn_id.as_deref(),
                evidence_source: evidence_source.as_str(),
                evidence_id: evidence_id.as_str(),
            },
            FireBody::Quarantine { reason } => FireBody::Quarantine { reason: reason.as_str() },
            FireBody::Release { reason } => FireBody::Release { reason: reason.as_str() },
            FireBody::Diagnostic { reason, kind, sig } => {
                FireBody::Diagnostic { reason: reason.as_str(), kind: kind.as_deref(), sig: sig.as_deref() }
            }
            FireBody::Fix { kind, sig, reason } => {
                FireBody::Fix { kind: kind.as_str(), sig: sig.as_str(), reason: reason.as_deref() }
            }
            FireBody::Reopen { kind, sig } => FireBody::Reopen { kind: kind.as_str(), sig: sig.as_str() },
            FireBody::Regression { kind, sig, reason } => {
                FireBody::Regression { kind: kind.as_str(), sig: sig.as_str(), reason: reason.as_str() }
            }
            FireBody::Digest { reason } => FireBody::Digest { reason: reason.as_str() },
            FireBody::Threshold { kind, sig, reason } => {
                FireBody::Threshold { kind: kind.as_str(), sig: sig.as_str(), reason: reason.as_str() }
            }
            FireBody::KeyRotation { reason, key } => FireBody::KeyRotation { reason: reason.as_str(), key },
            FireBody::KeyLost { reason, key } => FireBody::KeyLost { reason: reason.as_str(), key },
        }
    }
}

/// One entry of the fire log: the fields every entry has and its
/// [`FireBody`]. Its segment line (its JSON) and its hash are the flat shape
/// of [`super::line`], byte for byte what the log has always held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireEntry {
    pub seq: u64,
    /// The scan (or command) that recorded it, ms.
    pub recorded_at: i64,
    /// When the fact held (the occurrence's time), ms.
    pub at: i64,
    pub detector: String,
    pub detector_version: Option<String>,
    /// Fired by a detector on probation (the spec's `[PROBATION]`, as a flag).
    pub probation: bool,
    pub body: FireBody,
    /// The previous entry's hash (64 zeros before the first).
    pub prev: String,
    /// This entry's hash: see [`FireEntry::compute_hash`].
    pub hash: String,
}

/// What prefixes a probation fire's summary wherever a fire is shown.
pub const PROBATION_MARKER: &str = "[PROBATION] ";

impl FireEntry {
    /// The entry's type, from its body.
    pub fn fire_type(&self) -> FireType {
        self.body.fire_type()
    }

    /// One line naming the fire: `[PROBATION] ` first for a fire from a
    /// sentinel on probation, then its type, sentinel and kind (what the
    /// watch API, the status page and the dispatcher show).
    pub fn summary(&self) -> String {
        format!(
            "{}{} by {}{}",
            if self.probation { PROBATION_MARKER } else { "" },
            self.fire_type().as_str(),
            self.detector,
            self.body.kind().map(|k| format!(": {k}")).unwrap_or_default()
        )
    }

    /// SHA-256 of `"sentinel-fire-v1\0"`, the previous hash (32 bytes), then
    /// every field but `prev` and `hash` in the order of the line, each as a
    /// 4-byte big-endian length and its UTF-8 text (integers in decimal,
    /// booleans `true`/`false`), an absent field as the length `0xFFFFFFFF`.
    pub fn compute_hash(&self, prev: &[u8; 32]) -> [u8; 32] {
        self.view().hash(self.seq, prev)
    }

    /// Chains this entry after `prev`: sets `prev` and `hash`.
    pub fn seal(&mut self, prev: &[u8; 32]) -> [u8; 32] {
        let hash = self.compute_hash(prev);
        self.prev = crate::base::hex(prev);
        self.hash = crate::base::hex(&hash);
        hash
    }

    /// This entry's fields but `seq`, `prev` and `hash`, borrowed.
    pub fn view(&self) -> FireEntryRef<'_> {
        FireEntryRef {
            recorded_at: self.recorded_at,
            at: self.at,
            detector: &self.detector,
            detector_version: self.detector_version.as_deref(),
            probation: self.probation,
            body: self.body.borrowed(),
        }
    }
}

/// An entry before it is sealed, borrowed from what it records: what the
/// commit appends without copying a field. Its hash and its line are
/// [`FireEntry`]'s, byte for byte ([`FireEntryRef::seal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FireEntryRef<'a> {
    pub recorded_at: i64,
    pub at: i64,
    pub detector: &'a str,
    pub detector_version: Option<&'a str>,
    pub probation: bool,
    pub body: FireBody<&'a str, &'a KeyChange>,
}

impl FireEntryRef<'_> {
    /// The entry's type, from its body.
    pub fn fire_type(&self) -> FireType {
        self.body.fire_type()
    }

    /// Seals the entry as entry `seq` after `prev`: its hash, and its line
    /// as a segment holds it (the JSON of the sealed [`FireEntry`]).
    pub fn seal(&self, seq: u64, prev: &[u8; 32]) -> ([u8; 32], String) {
        let hash = self.hash(seq, prev);
        (hash, self.line_json(seq, &crate::base::hex(prev), &crate::base::hex(&hash)))
    }
}
