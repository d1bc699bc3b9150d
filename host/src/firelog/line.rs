//! A fire log entry's wire shape: its segment line and its hash input.
//!
//! It owns the flat shape every entry has on the wire (one JSON object, the
//! fields in one order, an absent field omitted; docs/fire-log.md), the
//! entry's JSON both ways ([`FireEntry`]'s `Serialize` and `Deserialize`),
//! the canonical encoding its hash covers, and the one check the typed entry
//! adds when a line is read: every field the line has belongs to its type,
//! and every field its type must have is there (a [`FieldError`], named).
//! It never decides what an entry holds ([`super::entry`] does) and never
//! reads or writes a file.

use std::borrow::Borrow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use super::entry::{FireBody, FireEntry, FireEntryRef, FireType};
use super::{ENTRY_DOMAIN, KeyChange};
use crate::model::observation::{Origin, Severity};

/// A line whose fields do not fit its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("an entry of type `{}` cannot have the field `{field}`", fire_type.as_str())]
    Foreign { fire_type: FireType, field: &'static str },
    #[error("an entry of type `{}` must have the field `{field}`", fire_type.as_str())]
    Missing { fire_type: FireType, field: &'static str },
}

/// An entry as one line of a segment: the fields every entry has and every
/// type's own, flat, in the order the line and the hash have them, an absent
/// one omitted. Owned when a line is read, borrowed when one is written.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(bound(deserialize = "S: Deserialize<'de>, K: Deserialize<'de>"))]
struct Line<S, K> {
    seq: u64,
    #[serde(rename = "type")]
    fire_type: FireType,
    recorded_at: i64,
    at: i64,
    detector: S,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    detector_version: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sig: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<Origin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    severity: Option<Severity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bot_id: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    thread_id: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    turn_id: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    evidence_source: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    evidence_id: Option<S>,
    probation: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<K>,
    prev: S,
    hash: S,
}

/// The fields a type may add, flat as the line has them (each may be
/// absent), in [`SLOT_NAMES`]' order.
pub(super) struct Slots<S, K> {
    pub(super) kind: Option<S>,
    pub(super) sig: Option<S>,
    origin: Option<Origin>,
    severity: Option<Severity>,
    tool: Option<S>,
    bot_id: Option<S>,
    thread_id: Option<S>,
    turn_id: Option<S>,
    evidence_source: Option<S>,
    evidence_id: Option<S>,
    pub(super) reason: Option<S>,
    pub(super) key: Option<K>,
}

/// The names the line gives [`Slots`]' fields.
const SLOT_NAMES: [&str; 12] = [
    "kind",
    "sig",
    "origin",
    "severity",
    "tool",
    "botId",
    "threadId",
    "turnId",
    "evidenceSource",
    "evidenceId",
    "reason",
    "key",
];

impl<S, K> Default for Slots<S, K> {
    fn default() -> Self {
        Slots {
            kind: None,
            sig: None,
            origin: None,
            severity: None,
            tool: None,
            bot_id: None,
            thread_id: None,
            turn_id: None,
            evidence_source: None,
            evidence_id: None,
            reason: None,
            key: None,
        }
    }
}

impl<S, K> Slots<S, K> {
    /// Which fields are there, in [`SLOT_NAMES`]' order.
    fn present(&self) -> [bool; 12] {
        [
            self.kind.is_some(),
            self.sig.is_some(),
            self.origin.is_some(),
            self.severity.is_some(),
            self.tool.is_some(),
            self.bot_id.is_some(),
            self.thread_id.is_some(),
            self.turn_id.is_some(),
            self.evidence_source.is_some(),
            self.evidence_id.is_some(),
            self.reason.is_some(),
            self.key.is_some(),
        ]
    }
}

fn some<S: AsRef<str>>(v: &S) -> Option<&str> {
    Some(v.as_ref())
}

fn opt<S: AsRef<str>>(v: &Option<S>) -> Option<&str> {
    v.as_ref().map(AsRef::as_ref)
}

impl<S: AsRef<str>, K: Borrow<KeyChange>> FireBody<S, K> {
    /// This body's fields as the line has them.
    pub(super) fn slots(&self) -> Slots<&str, &KeyChange> {
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
            } => Slots {
                kind: some(kind),
                sig: some(sig),
                origin: Some(*origin),
                severity: Some(*severity),
                tool: opt(tool),
                bot_id: opt(bot_id),
                thread_id: opt(thread_id),
                turn_id: opt(turn_id),
                evidence_source: some(evidence_source),
                evidence_id: some(evidence_id),
                ..Slots::default()
            },
            FireBody::Quarantine { reason } | FireBody::Release { reason } | FireBody::Digest { reason } => {
                Slots { reason: some(reason), ..Slots::default() }
            }
            FireBody::Diagnostic { reason, kind, sig } => {
                Slots { kind: opt(kind), sig: opt(sig), reason: some(reason), ..Slots::default() }
            }
            FireBody::Fix { kind, sig, reason } => {
                Slots { kind: some(kind), sig: some(sig), reason: opt(reason), ..Slots::default() }
            }
            FireBody::Reopen { kind, sig } => Slots { kind: some(kind), sig: some(sig), ..Slots::default() },
            FireBody::Regression { kind, sig, reason } | FireBody::Threshold { kind, sig, reason } => {
                Slots { kind: some(kind), sig: some(sig), reason: some(reason), ..Slots::default() }
            }
            FireBody::KeyRotation { reason, key } | FireBody::KeyLost { reason, key } => {
                Slots { reason: some(reason), key: Some(key.borrow()), ..Slots::default() }
            }
        }
    }
}

/// Takes the fields a type must have, naming the one missing.
struct Need(FireType);

impl Need {
    fn of<T>(&self, field: &'static str, v: Option<T>) -> Result<T, FieldError> {
        v.ok_or(FieldError::Missing { fire_type: self.0, field })
    }
}

impl FireBody {
    /// The body of an entry of type `t` from the line's fields: every field
    /// `t` must have there, and none it does not have.
    fn from_slots(t: FireType, s: Slots<String, KeyChange>) -> Result<Self, FieldError> {
        let given = s.present();
        let body = Self::take(t, s)?;
        let kept = body.slots().present();
        match SLOT_NAMES.iter().zip(given.into_iter().zip(kept)).find(|(_, (g, k))| *g && !k) {
            Some((field, _)) => Err(FieldError::Foreign { fire_type: t, field }),
            None => Ok(body),
        }
    }

    /// Moves out of `s` the fields type `t` has (the others stay behind).
    fn take(t: FireType, s: Slots<String, KeyChange>) -> Result<Self, FieldError> {
        let n = Need(t);
        Ok(match t {
            FireType::Occurrence => FireBody::Occurrence {
                kind: n.of("kind", s.kind)?,
                sig: n.of("sig", s.sig)?,
                origin: n.of("origin", s.origin)?,
                severity: n.of("severity", s.severity)?,
                tool: s.tool,
                bot_id: s.bot_id,
                thread_id: s.thread_id,
                turn_id: s.turn_id,
                evidence_source: n.of("evidenceSource", s.evidence_source)?,
                evidence_id: n.of("evidenceId", s.evidence_id)?,
            },
            FireType::Quarantine => FireBody::Quarantine { reason: n.of("reason", s.reason)? },
            FireType::Release => FireBody::Release { reason: n.of("reason", s.reason)? },
            FireType::Diagnostic => {
                FireBody::Diagnostic { reason: n.of("reason", s.reason)?, kind: s.kind, sig: s.sig }
            }
            FireType::Fix => FireBody::Fix { kind: n.of("kind", s.kind)?, sig: n.of("sig", s.sig)?, reason: s.reason },
            FireType::Reopen => FireBody::Reopen { kind: n.of("kind", s.kind)?, sig: n.of("sig", s.sig)? },
            FireType::Regression => FireBody::Regression {
                kind: n.of("kind", s.kind)?,
                sig: n.of("sig", s.sig)?,
                reason: n.of("reason", s.reason)?,
            },
            FireType::Digest => FireBody::Digest { reason: n.of("reason", s.reason)? },
            FireType::Threshold => FireBody::Threshold {
                kind: n.of("kind", s.kind)?,
                sig: n.of("sig", s.sig)?,
                reason: n.of("reason", s.reason)?,
            },
            FireType::KeyRotation => {
                FireBody::KeyRotation { reason: n.of("reason", s.reason)?, key: n.of("key", s.key)? }
            }
            FireType::KeyLost => FireBody::KeyLost { reason: n.of("reason", s.reason)?, key: n.of("key", s.key)? },
        })
    }
}

impl Line<String, KeyChange> {
    fn into_entry(self) -> Result<FireEntry, FieldError> {
        let slots = Slots {
            kind: self.kind,
            sig: self.sig,
            origin: self.origin,
            severity: self.severity,
            tool: self.tool,
            bot_id: self.bot_id,
            thread_id: self.thread_id,
            turn_id: self.turn_id,
            evidence_source: self.evidence_source,
            evidence_id: self.evidence_id,
            reason: self.reason,
            key: self.key,
        };
        Ok(FireEntry {
            seq: self.seq,
            recorded_at: self.recorded_at,
            at: self.at,
            detector: self.detector,
            detector_version: self.detector_version,
            probation: self.probation,
            body: FireBody::from_slots(self.fire_type, slots)?,
            prev: self.prev,
            hash: self.hash,
        })
    }
}

impl FireEntryRef<'_> {
    /// The entry as its line, sealed as entry `seq` with `prev` and `hash` (hex).
    fn line<'b>(&'b self, seq: u64, prev: &'b str, hash: &'b str) -> Line<&'b str, &'b KeyChange> {
        let s = self.body.slots();
        Line {
            seq,
            fire_type: self.fire_type(),
            recorded_at: self.recorded_at,
            at: self.at,
            detector: self.detector,
            detector_version: self.detector_version,
            kind: s.kind,
            sig: s.sig,
            origin: s.origin,
            severity: s.severity,
            tool: s.tool,
            bot_id: s.bot_id,
            thread_id: s.thread_id,
            turn_id: s.turn_id,
            evidence_source: s.evidence_source,
            evidence_id: s.evidence_id,
            probation: self.probation,
            reason: s.reason,
            key: s.key,
            prev,
            hash,
        }
    }

    /// The entry's hash as entry `seq` after `prev`: see
    /// [`FireEntry::compute_hash`], which is this.
    pub fn hash(&self, seq: u64, prev: &[u8; 32]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(ENTRY_DOMAIN);
        h.update(prev);
        let mut field = |v: Option<&str>| match v {
            Some(s) => {
                h.update((s.len() as u32).to_be_bytes());
                h.update(s.as_bytes());
            }
            None => h.update(u32::MAX.to_be_bytes()),
        };
        let s = self.body.slots();
        field(Some(&seq.to_string()));
        field(Some(self.fire_type().as_str()));
        field(Some(&self.recorded_at.to_string()));
        field(Some(&self.at.to_string()));
        field(Some(self.detector));
        for v in [
            self.detector_version,
            s.kind,
            s.sig,
            s.origin.map(Origin::as_str),
            s.severity.map(Severity::as_str),
            s.tool,
            s.bot_id,
            s.thread_id,
            s.turn_id,
            s.evidence_source,
            s.evidence_id,
        ] {
            field(v);
        }
        field(Some(if self.probation { "true" } else { "false" }));
        field(s.reason);
        // Only an entry that changes the key has these (and always all three,
        // an absent one as absent): every other entry hashes as it always did.
        if self.fire_type().changes_key() {
            let key = s.key;
            field(key.and_then(|k| k.previous_key.as_deref()));
            field(key.map(|k| k.public_key.as_str()));
            field(key.and_then(|k| k.signature.as_deref()));
        }
        h.finalize().into()
    }

    /// The line of this entry sealed as entry `seq` after `prev`, with `hash`.
    pub(super) fn line_json(&self, seq: u64, prev: &str, hash: &str) -> String {
        serde_json::to_string(&self.line(seq, prev, hash)).expect("a fire entry always serializes")
    }
}

impl Serialize for FireEntry {
    fn serialize<Z: Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        self.view().line(self.seq, &self.prev, &self.hash).serialize(s)
    }
}

impl<'de> Deserialize<'de> for FireEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Line::<String, KeyChange>::deserialize(d)?.into_entry().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::verify::check_entry;
    use super::*;

    /// The entry as it was before it was typed (one struct, every field
    /// but the common ones optional), kept here alone as the oracle: its JSON
    /// and its hash are what every log written so far holds.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct FlatEntry {
        seq: u64,
        #[serde(rename = "type")]
        fire_type: FireType,
        recorded_at: i64,
        at: i64,
        detector: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detector_version: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sig: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<Origin>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        severity: Option<Severity>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bot_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evidence_source: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evidence_id: Option<String>,
        probation: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<KeyChange>,
        prev: String,
        hash: String,
    }

    impl FlatEntry {
        /// The hash as the flat entry computed it (the code before the
        /// entry was typed, word for word).
        fn hash(&self, prev: &[u8; 32]) -> [u8; 32] {
            let mut h = Sha256::new();
            h.update(ENTRY_DOMAIN);
            h.update(prev);
            let mut field = |v: Option<&str>| match v {
                Some(s) => {
                    h.update((s.len() as u32).to_be_bytes());
                    h.update(s.as_bytes());
                }
                None => h.update(u32::MAX.to_be_bytes()),
            };
            field(Some(&self.seq.to_string()));
            field(Some(self.fire_type.as_str()));
            field(Some(&self.recorded_at.to_string()));
            field(Some(&self.at.to_string()));
            field(Some(&self.detector));
            for v in [
                self.detector_version.as_deref(),
                self.kind.as_deref(),
                self.sig.as_deref(),
                self.origin.map(Origin::as_str),
                self.severity.map(Severity::as_str),
                self.tool.as_deref(),
                self.bot_id.as_deref(),
                self.thread_id.as_deref(),
                self.turn_id.as_deref(),
                self.evidence_source.as_deref(),
                self.evidence_id.as_deref(),
            ] {
                field(v);
            }
            field(Some(if self.probation { "true" } else { "false" }));
            field(self.reason.as_deref());
            if self.fire_type.changes_key() {
                let key = self.key.as_ref();
                field(key.and_then(|k| k.previous_key.as_deref()));
                field(key.map(|k| k.public_key.as_str()));
                field(key.and_then(|k| k.signature.as_deref()));
            }
            h.finalize().into()
        }

        /// Sealed after `prev`, as the flat entry sealed itself: its hash and line.
        fn sealed(mut self, prev: &[u8; 32]) -> ([u8; 32], String) {
            let hash = self.hash(prev);
            (self.prev, self.hash) = (crate::base::hex(prev), crate::base::hex(&hash));
            (hash, serde_json::to_string(&self).unwrap())
        }

        /// The line's field `name` (as [`SLOT_NAMES`] names it) set to a
        /// value that parses, or cleared.
        fn set(&mut self, name: &str, on: bool) {
            let text = on.then(|| format!("{name} value"));
            match name {
                "kind" => self.kind = text,
                "sig" => self.sig = text,
                "origin" => self.origin = on.then_some(Origin::External),
                "severity" => self.severity = on.then_some(Severity::High),
                "tool" => self.tool = text,
                "botId" => self.bot_id = text,
                "threadId" => self.thread_id = text,
                "turnId" => self.turn_id = text,
                "evidenceSource" => self.evidence_source = text,
                "evidenceId" => self.evidence_id = text,
                "reason" => self.reason = text,
                "key" => {
                    self.key =
                        on.then(|| KeyChange { previous_key: None, public_key: "cd".repeat(32), signature: None })
                }
                _ => unreachable!("{name}"),
            }
        }
    }

    /// What each type carries, as docs/fire-log.md and the code that makes
    /// each fire say, written here apart from the variants: (required, optional).
    fn fields_of(t: FireType) -> (&'static [&'static str], &'static [&'static str]) {
        match t {
            FireType::Occurrence => (
                &["kind", "sig", "origin", "severity", "evidenceSource", "evidenceId"],
                &["tool", "botId", "threadId", "turnId"],
            ),
            FireType::Quarantine | FireType::Release | FireType::Digest => (&["reason"], &[]),
            FireType::Diagnostic => (&["reason"], &["kind", "sig"]),
            FireType::Fix => (&["kind", "sig"], &["reason"]),
            FireType::Reopen => (&["kind", "sig"], &[]),
            FireType::Regression | FireType::Threshold => (&["kind", "sig", "reason"], &[]),
            FireType::KeyRotation | FireType::KeyLost => (&["reason", "key"], &[]),
        }
    }

    /// Every field of every type there, with text that needs escaping.
    fn full(t: FireType, seq: u64) -> FlatEntry {
        let text = |s: &str| Some(format!("{s} \"é\u{1b}[2J\u{2028}"));
        let (required, optional) = fields_of(t);
        let has = |n: &str| required.contains(&n) || optional.contains(&n);
        let key = KeyChange {
            previous_key: Some("ab".repeat(32)),
            public_key: "cd".repeat(32),
            signature: Some("ef".repeat(64)),
        };
        FlatEntry {
            seq,
            fire_type: t,
            recorded_at: 17,
            at: -3,
            detector: "tool_error".into(),
            detector_version: text("1.2.0"),
            kind: text("tool_error").filter(|_| has("kind")),
            sig: text("tool_error:0123").filter(|_| has("sig")),
            origin: Some(Origin::Shell).filter(|_| has("origin")),
            severity: Some(Severity::Medium).filter(|_| has("severity")),
            tool: text("bash").filter(|_| has("tool")),
            bot_id: text("bot").filter(|_| has("botId")),
            thread_id: text("thread").filter(|_| has("threadId")),
            turn_id: text("turn").filter(|_| has("turnId")),
            evidence_source: text("messages").filter(|_| has("evidenceSource")),
            evidence_id: text("m1").filter(|_| has("evidenceId")),
            probation: t == FireType::Occurrence,
            reason: text("why").filter(|_| has("reason")),
            key: Some(key).filter(|_| has("key")),
            prev: String::new(),
            hash: String::new(),
        }
    }

    /// `flat` as the typed entry reads it: its line written again byte for
    /// byte, the same hash, the borrowed view sealing to the same line, and
    /// `verify`'s check of the line passing.
    fn alike(flat: FlatEntry, prev: [u8; 32]) {
        let seq = flat.seq;
        let (hash, line) = flat.sealed(&prev);
        let typed: FireEntry = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(serde_json::to_string(&typed).unwrap(), line, "the line, written again");
        assert_eq!(typed.compute_hash(&prev), hash, "{line}");
        assert_eq!(typed.view().seal(seq, &prev), (hash, line.clone()), "the borrowed view seals alike");
        let mut resealed = typed.clone();
        assert_eq!((resealed.seal(&prev), &resealed), (hash, &typed), "sealing again changes nothing");
        assert_eq!(check_entry(&line, seq, &prev), Ok(hash));
    }

    #[test]
    fn one_entry_of_each_type_reads_writes_and_hashes_as_the_flat_entry_did() {
        for t in FireType::ALL {
            alike(full(t, 1), [0; 32]);
            // Its optional fields absent.
            let mut bare = full(t, 4096);
            bare.detector_version = None;
            for name in fields_of(t).1 {
                bare.set(name, false);
            }
            alike(bare, [7; 32]);
        }
        // A key-lost entry's key without its previous key and signature.
        let mut lost = full(FireType::KeyLost, u64::MAX);
        lost.key.as_mut().unwrap().signature = None;
        lost.key.as_mut().unwrap().previous_key = None;
        alike(lost.clone(), [255; 32]);
        let mut moved = lost.clone();
        moved.key.as_mut().unwrap().public_key = "ef".repeat(32);
        let typed = |f: FlatEntry| serde_json::from_str::<FireEntry>(&f.sealed(&[0; 32]).1).unwrap();
        assert_ne!(typed(lost).compute_hash(&[0; 32]), typed(moved).compute_hash(&[0; 32]), "the hash covers the key");
    }

    #[test]
    fn a_typed_entry_names_its_type_from_its_variant() {
        for t in FireType::ALL {
            let (_, line) = full(t, 1).sealed(&[0; 32]);
            let typed: FireEntry = serde_json::from_str(&line).unwrap();
            assert_eq!((typed.fire_type(), typed.view().fire_type()), (t, t));
        }
    }

    #[test]
    fn a_field_its_type_must_have_is_required_by_name() {
        for t in FireType::ALL {
            for name in fields_of(t).0 {
                let mut flat = full(t, 1);
                flat.set(name, false);
                let (_, line) = flat.sealed(&[0; 32]);
                let e = serde_json::from_str::<FireEntry>(&line).unwrap_err().to_string();
                let want = format!("an entry of type `{}` must have the field `{name}`", t.as_str());
                assert!(e.contains(&want), "{e}");
            }
        }
    }

    /// The typed entry's one tightening: a line with a field its type does
    /// not have (a `key` on an occurrence, an occurrence's `tool` on a
    /// quarantine) is refused, naming the type and the field; so is it by
    /// `verify`'s check of a line, even when its hash was made to match.
    #[test]
    fn a_field_that_does_not_belong_to_its_type_is_refused_by_name() {
        for t in FireType::ALL {
            let (required, optional) = fields_of(t);
            for name in SLOT_NAMES.into_iter().filter(|n| !required.contains(n) && !optional.contains(n)) {
                let mut flat = full(t, 1);
                flat.set(name, true);
                let (_, line) = flat.clone().sealed(&[0; 32]);
                let e = serde_json::from_str::<FireEntry>(&line).unwrap_err().to_string();
                let want = format!("an entry of type `{}` cannot have the field `{name}`", t.as_str());
                assert!(e.contains(&want), "{e}");
                assert!(check_entry(&line, 1, &[0; 32]).unwrap_err().contains(&want), "{line}");
            }
        }
    }

    fn text() -> impl Strategy<Value = Option<String>> {
        proptest::option::of(".{0,12}")
    }

    prop_compose! {
        /// An entry that fits its type: any type, any text in its fields,
        /// any of its optional fields absent.
        fn fitting()(
            t in proptest::sample::select(FireType::ALL.to_vec()),
            seq in 1u64..u64::MAX,
            times in any::<(i64, i64)>(),
            detector in ".{0,12}",
            version in text(),
            texts in proptest::collection::vec(text(), 11),
            origin in proptest::sample::select(vec![Origin::Harness, Origin::Shell, Origin::External]),
            severity in proptest::sample::select(vec![Severity::Low, Severity::Medium, Severity::High]),
            key in (text(), ".{0,12}", text()),
            probation in any::<bool>(),
        ) -> FlatEntry {
            let (required, optional) = fields_of(t);
            let mut texts = texts.into_iter();
            let mut slot = |name: &str| {
                let v = texts.next().unwrap();
                if required.contains(&name) {
                    Some(v.unwrap_or_default())
                } else {
                    v.filter(|_| optional.contains(&name))
                }
            };
            FlatEntry {
                seq,
                fire_type: t,
                recorded_at: times.0,
                at: times.1,
                detector,
                detector_version: version,
                kind: slot("kind"),
                sig: slot("sig"),
                origin: slot("origin").map(|_| origin),
                severity: slot("severity").map(|_| severity),
                tool: slot("tool"),
                bot_id: slot("botId"),
                thread_id: slot("threadId"),
                turn_id: slot("turnId"),
                evidence_source: slot("evidenceSource"),
                evidence_id: slot("evidenceId"),
                probation,
                reason: slot("reason"),
                key: t.changes_key().then(|| KeyChange { previous_key: key.0.clone(), public_key: key.1.clone(), signature: key.2.clone() }),
                prev: String::new(),
                hash: String::new(),
            }
        }
    }

    proptest! {
        #[test]
        fn any_entry_that_fits_its_type_reads_writes_and_hashes_as_the_flat_entry_did(
            flat in fitting(),
            prev in any::<[u8; 32]>(),
        ) {
            alike(flat, prev);
        }
    }
}
