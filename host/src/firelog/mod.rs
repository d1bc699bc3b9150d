//! The fire log's format: entries, the hash chain over a canonical encoding,
//! the signed head; the signing key ([`key`]) and `verify` over the exported
//! files ([`verify`]).
//!
//! It owns everything someone else needs to check the log without the host:
//! the canonical encoding (documented in `docs/fire-log.md`), SHA-256
//! chaining, the Ed25519 head signature with key id
//! `sidecar-v1-{first 8 hex of sha256(public key)}`, the key file outside the
//! output folder ([`key_file`]: where it lives, its owner and mode checked at
//! every open, the one-time move out of an older folder), the key-rotation
//! entries' signatures and the key followed through them ([`KeyTrail`]),
//! [`verify_dir`], which reads only the exported
//! `fires-*.ndjson` segments, `fires.head.json` and a public key, and
//! [`check_witnessed`], a head held by the fleet's witness against them. It imports
//! nothing of the ledger. It never decides what a fire is (the ledger's
//! commit does) and never writes a segment (the ledger's export does).

mod key;
pub mod key_file;
mod key_trail;
mod verify;
mod witness;

pub use key::{KeyChange, KeyError, PublicKeyFile, generate, kid, sign_head, sign_rotation};
pub use key_file::{KeyFile, KeyOpened, OpenedHow};
pub use key_trail::KeyTrail;
pub use verify::{
    Check, CheckName, Finding, NO_WITNESS, Resume, STOPPED, Status, Verification, finding, verify_dir, verify_dir_from,
};
pub use witness::{check_witnessed, install_id};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::observation::{Origin, Severity};

/// Entries per exported segment: closed segments are written once and never
/// again; the open one is replaced atomically after every commit.
/// (Four in this crate's unit tests, so that they can cut segments cheaply.)
pub const SEGMENT_ENTRIES: u64 = if cfg!(test) { 4 } else { 4096 };
pub const HEAD_FILE: &str = "fires.head.json";
pub const PUBLIC_KEY_FILE: &str = "fires.pub.json";
/// Where an older release kept the signing key: in the output folder, beside
/// the log. Found there, it is moved to its [`KeyFile`] once.
pub const KEY_FILE: &str = "fire-key.ed25519";
const ENTRY_DOMAIN: &[u8] = b"sentinel-fire-v1\0";
const HEAD_DOMAIN: &[u8] = b"sentinel-fire-head-v1\0";

/// A segment's file name: `fires-000001.ndjson` holds entries 1 to 4096.
pub fn segment_name(index: u64) -> String {
    format!("fires-{index:06}.ndjson")
}

/// The index of the segment named `name`, when `name` is exactly what
/// [`segment_name`] writes for it.
pub fn segment_index(name: &str) -> Option<u64> {
    let index = name.strip_prefix("fires-")?.strip_suffix(".ndjson")?.parse().ok()?;
    (segment_name(index) == name).then_some(index)
}

/// Whether `name` is one of the fire log's files in an output folder (a
/// segment, the head, the public key, or a file that looks like one: what
/// the health source and the fast path watch).
pub fn is_log_file(name: &str) -> bool {
    name.starts_with("fires") && (name.ends_with(".ndjson") || name.ends_with(".json"))
}

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

/// One entry of the fire log, as one line of a segment. Never raw content:
/// references, the signature's hash and normalized fields only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FireEntry {
    pub seq: u64,
    #[serde(rename = "type")]
    pub fire_type: FireType,
    /// The scan (or command) that recorded it, ms.
    pub recorded_at: i64,
    /// When the fact held (the occurrence's time), ms.
    pub at: i64,
    pub detector: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detector_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The issue signature (`kind:` and a hash of the grouping key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_id: Option<String>,
    /// Fired by a detector on probation (the spec's `[PROBATION]`, as a flag).
    pub probation: bool,
    /// For a quarantine or a release: why (failure kind and phase, or the operator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a key-rotation or a key-lost entry: the keys before and after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<KeyChange>,
    /// The previous entry's hash (64 zeros before the first).
    pub prev: String,
    /// This entry's hash: see [`FireEntry::compute_hash`].
    pub hash: String,
}

/// What prefixes a probation fire's summary wherever a fire is shown.
pub const PROBATION_MARKER: &str = "[PROBATION] ";

impl FireEntry {
    /// One line naming the fire: `[PROBATION] ` first for a fire from a
    /// sentinel on probation, then its type, sentinel and kind (what the
    /// watch API, the status page and the dispatcher show).
    pub fn summary(&self) -> String {
        format!(
            "{}{} by {}{}",
            if self.probation { PROBATION_MARKER } else { "" },
            self.fire_type.as_str(),
            self.detector,
            self.kind.as_deref().map(|k| format!(": {k}")).unwrap_or_default()
        )
    }

    /// SHA-256 of `"sentinel-fire-v1\0"`, the previous hash (32 bytes), then
    /// every field but `prev` and `hash` in declaration order, each as a
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
            fire_type: self.fire_type,
            recorded_at: self.recorded_at,
            at: self.at,
            detector: &self.detector,
            detector_version: self.detector_version.as_deref(),
            kind: self.kind.as_deref(),
            sig: self.sig.as_deref(),
            origin: self.origin,
            severity: self.severity,
            tool: self.tool.as_deref(),
            bot_id: self.bot_id.as_deref(),
            thread_id: self.thread_id.as_deref(),
            turn_id: self.turn_id.as_deref(),
            evidence_source: self.evidence_source.as_deref(),
            evidence_id: self.evidence_id.as_deref(),
            probation: self.probation,
            reason: self.reason.as_deref(),
            key: self.key.as_ref(),
        }
    }
}

/// An entry before it is sealed, borrowed from what it records: what the
/// commit appends without copying a field. Its hash and its line are
/// [`FireEntry`]'s, byte for byte ([`FireEntryRef::seal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FireEntryRef<'a> {
    pub fire_type: FireType,
    pub recorded_at: i64,
    pub at: i64,
    pub detector: &'a str,
    pub detector_version: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub sig: Option<&'a str>,
    pub origin: Option<Origin>,
    pub severity: Option<Severity>,
    pub tool: Option<&'a str>,
    pub bot_id: Option<&'a str>,
    pub thread_id: Option<&'a str>,
    pub turn_id: Option<&'a str>,
    pub evidence_source: Option<&'a str>,
    pub evidence_id: Option<&'a str>,
    pub probation: bool,
    pub reason: Option<&'a str>,
    pub key: Option<&'a KeyChange>,
}

/// A sealed entry as a segment line: [`FireEntry`]'s fields, names, order
/// and omissions, borrowed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    seq: u64,
    #[serde(rename = "type")]
    fire_type: FireType,
    recorded_at: i64,
    at: i64,
    detector: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detector_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sig: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<Origin>,
    #[serde(skip_serializing_if = "Option::is_none")]
    severity: Option<Severity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bot_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence_source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence_id: Option<&'a str>,
    probation: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a KeyChange>,
    prev: &'a str,
    hash: &'a str,
}

impl FireEntryRef<'_> {
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
        field(Some(&seq.to_string()));
        field(Some(self.fire_type.as_str()));
        field(Some(&self.recorded_at.to_string()));
        field(Some(&self.at.to_string()));
        field(Some(self.detector));
        for v in [
            self.detector_version,
            self.kind,
            self.sig,
            self.origin.map(Origin::as_str),
            self.severity.map(Severity::as_str),
            self.tool,
            self.bot_id,
            self.thread_id,
            self.turn_id,
            self.evidence_source,
            self.evidence_id,
        ] {
            field(v);
        }
        field(Some(if self.probation { "true" } else { "false" }));
        field(self.reason);
        // Only an entry that changes the key has these (and always all three,
        // an absent one as absent): every other entry hashes as it always did.
        if self.fire_type.changes_key() {
            let key = self.key;
            field(key.and_then(|k| k.previous_key.as_deref()));
            field(key.map(|k| k.public_key.as_str()));
            field(key.and_then(|k| k.signature.as_deref()));
        }
        h.finalize().into()
    }

    /// Seals the entry as entry `seq` after `prev`: its hash, and its line
    /// as a segment holds it (the JSON of the sealed [`FireEntry`]).
    pub fn seal(&self, seq: u64, prev: &[u8; 32]) -> ([u8; 32], String) {
        let hash = self.hash(seq, prev);
        let (prev, hash_hex) = (crate::base::hex(prev), crate::base::hex(&hash));
        let line = Line {
            seq,
            fire_type: self.fire_type,
            recorded_at: self.recorded_at,
            at: self.at,
            detector: self.detector,
            detector_version: self.detector_version,
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
            probation: self.probation,
            reason: self.reason,
            key: self.key,
            prev: &prev,
            hash: &hash_hex,
        };
        (hash, serde_json::to_string(&line).expect("a fire entry always serializes"))
    }
}

/// The log's head: how many entries, and the last one's hash, signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Head {
    pub format: String,
    pub count: u64,
    pub hash: String,
    pub signed_at: i64,
    pub kid: String,
    pub public_key: String,
    pub signature: String,
}

/// The bytes a head's signature covers: `"sentinel-fire-head-v1\0"`, the
/// count (8 bytes, big-endian), the last hash (32 bytes), the signing time
/// (8 bytes, big-endian, ms).
pub(super) fn head_message(count: u64, hash: &[u8; 32], signed_at: i64) -> Vec<u8> {
    let mut m = HEAD_DOMAIN.to_vec();
    m.extend(count.to_be_bytes());
    m.extend(hash);
    m.extend(signed_at.to_be_bytes());
    m
}
pub fn unhex32(s: &str) -> Option<[u8; 32]> {
    let v = unhex(s)?;
    v.try_into().ok()
}

pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::verify::check_entry;
    use super::*;

    #[test]
    fn a_segment_index_is_read_only_from_the_name_segment_name_writes() {
        for i in [1, 43, 999_999, 1_234_567] {
            assert_eq!(segment_index(&segment_name(i)), Some(i));
        }
        for name in
            ["fires-1.ndjson", "fires-0000001.ndjson", "fires-x.ndjson", "fires-000001.json", ".fires-000001.ndjson"]
        {
            assert_eq!(segment_index(name), None, "{name}");
        }
    }
    fn entry(optional: Option<&str>, reason: Option<&str>, probation: bool) -> FireEntry {
        let o = optional.map(str::to_owned);
        FireEntry {
            seq: 0,
            fire_type: FireType::Occurrence,
            recorded_at: 17,
            at: -3,
            detector: "tool_error".into(),
            detector_version: o.clone(),
            kind: Some("tool_error".into()),
            sig: o.clone(),
            origin: Some(Origin::Shell),
            severity: o.as_ref().map(|_| Severity::Medium),
            tool: o.clone(),
            bot_id: o.clone(),
            thread_id: None,
            turn_id: o.clone(),
            evidence_source: o.clone(),
            evidence_id: Some("m\"1\u{2028}".into()),
            probation,
            reason: reason.map(str::to_owned),
            key: None,
            prev: String::new(),
            hash: String::new(),
        }
    }

    /// The commit seals borrowed entries: the chain's hashes and the
    /// segments' lines must be the owned entry's, byte for byte, or logs
    /// written before and after would not verify alike.
    fn sealed_alike(mut owned: FireEntry, seq: u64, prev: [u8; 32]) {
        let (hash, line) = owned.view().seal(seq, &prev);
        owned.seq = seq;
        assert_eq!(owned.seal(&prev), hash);
        assert_eq!(serde_json::to_string(&owned).unwrap(), line);
        assert_eq!(check_entry(&line, seq, &prev), Ok(hash));
    }

    #[test]
    fn a_borrowed_entry_seals_to_the_owned_entrys_hash_and_line() {
        sealed_alike(entry(Some("bash \u{1b}[2J é"), None, false), 1, [0; 32]);
        sealed_alike(entry(None, Some("2 failures in a row"), true), 4096, [7; 32]);
        sealed_alike(entry(Some(""), Some(""), false), u64::MAX, [255; 32]);
        // An entry that changes the key seals its `key` too.
        let key = KeyChange { previous_key: Some("ab".repeat(32)), public_key: "cd".repeat(32), signature: None };
        let rotation = FireEntry { fire_type: FireType::KeyLost, key: Some(key), ..entry(None, Some("lost"), false) };
        let mut moved = rotation.clone();
        moved.key.as_mut().unwrap().public_key = "ef".repeat(32);
        assert_ne!(rotation.compute_hash(&[0; 32]), moved.compute_hash(&[0; 32]), "the hash covers the key");
        sealed_alike(rotation, 9, [3; 32]);
    }

    proptest::proptest! {
        #[test]
        fn any_borrowed_entry_seals_like_its_owned_twin(
            optional in proptest::option::of(".{0,12}"),
            reason in proptest::option::of(".{0,12}"),
            probation in proptest::prelude::any::<bool>(),
            seq in 1u64..u64::MAX,
            prev in proptest::prelude::any::<[u8; 32]>(),
        ) {
            sealed_alike(entry(optional.as_deref(), reason.as_deref(), probation), seq, prev);
        }
    }
}
