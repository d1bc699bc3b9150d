//! The fire log's format: entries, the hash chain over a canonical encoding,
//! the signed head, the signing key, and `verify` over the exported files.
//!
//! It owns everything someone else needs to check the log without the host:
//! the canonical encoding (documented in `docs/fire-log.md`), SHA-256
//! chaining, the Ed25519 head signature with key id
//! `sidecar-v1-{first 8 hex of sha256(public key)}`, the key file (generated
//! on first use, `0600`), and [`verify_dir`], which reads only the exported
//! `fires-*.ndjson` segments, `fires.head.json` and a public key. It never
//! decides what a fire is (the ledger's commit does) and never writes a
//! segment (the ledger's export does).

use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Entries per exported segment: closed segments are written once and never
/// again; the open one is replaced atomically after every commit.
/// (Four in this crate's unit tests, so that they can cut segments cheaply.)
pub const SEGMENT_ENTRIES: u64 = if cfg!(test) { 4 } else { 4096 };
pub const HEAD_FILE: &str = "fires.head.json";
pub const PUBLIC_KEY_FILE: &str = "fires.pub.json";
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
}

impl FireType {
    /// Every type, in the order the docs list them.
    pub const ALL: [FireType; 4] =
        [FireType::Occurrence, FireType::Quarantine, FireType::Release, FireType::Diagnostic];

    /// The name the JSON shows.
    pub fn as_str(self) -> &'static str {
        match self {
            FireType::Occurrence => "occurrence",
            FireType::Quarantine => "quarantine",
            FireType::Release => "release",
            FireType::Diagnostic => "diagnostic",
        }
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
    pub origin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
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
    /// The previous entry's hash (64 zeros before the first).
    pub prev: String,
    /// This entry's hash: see [`FireEntry::compute_hash`].
    pub hash: String,
}

impl FireEntry {
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
        self.prev = crate::hex(prev);
        self.hash = crate::hex(&hash);
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
            origin: self.origin.as_deref(),
            severity: self.severity.as_deref(),
            tool: self.tool.as_deref(),
            bot_id: self.bot_id.as_deref(),
            thread_id: self.thread_id.as_deref(),
            turn_id: self.turn_id.as_deref(),
            evidence_source: self.evidence_source.as_deref(),
            evidence_id: self.evidence_id.as_deref(),
            probation: self.probation,
            reason: self.reason.as_deref(),
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
    pub origin: Option<&'a str>,
    pub severity: Option<&'a str>,
    pub tool: Option<&'a str>,
    pub bot_id: Option<&'a str>,
    pub thread_id: Option<&'a str>,
    pub turn_id: Option<&'a str>,
    pub evidence_source: Option<&'a str>,
    pub evidence_id: Option<&'a str>,
    pub probation: bool,
    pub reason: Option<&'a str>,
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
    origin: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    severity: Option<&'a str>,
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
            self.origin,
            self.severity,
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
        h.finalize().into()
    }

    /// Seals the entry as entry `seq` after `prev`: its hash, and its line
    /// as a segment holds it (the JSON of the sealed [`FireEntry`]).
    pub fn seal(&self, seq: u64, prev: &[u8; 32]) -> ([u8; 32], String) {
        let hash = self.hash(seq, prev);
        let (prev, hash_hex) = (crate::hex(prev), crate::hex(&hash));
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
fn head_message(count: u64, hash: &[u8; 32], signed_at: i64) -> Vec<u8> {
    let mut m = HEAD_DOMAIN.to_vec();
    m.extend(count.to_be_bytes());
    m.extend(hash);
    m.extend(signed_at.to_be_bytes());
    m
}

/// The published key id: `sidecar-v1-{first 8 hex of sha256(public key)}`.
pub fn kid(public_key: &VerifyingKey) -> String {
    format!("sidecar-v1-{}", &crate::hex(&Sha256::digest(public_key.as_bytes()))[..8])
}

/// The public half, as `fires.pub.json` publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicKeyFile {
    pub alg: String,
    pub kid: String,
    pub public_key: String,
}

impl PublicKeyFile {
    pub fn of(key: &VerifyingKey) -> Self {
        PublicKeyFile { alg: "Ed25519".into(), kid: kid(key), public_key: crate::hex(key.as_bytes()) }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read or create the signing key {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a signing key (32 bytes of hex expected); it was left untouched")]
    Malformed { path: PathBuf },
    #[error("no randomness for a new signing key")]
    Random(#[source] getrandom::Error),
}

/// The output folder's signing key: read, or generated on first use and kept
/// `0600` beside the ledger. Only the host that holds it can sign.
pub fn signing_key(out: &Path) -> Result<SigningKey, KeyError> {
    let path = out.join(KEY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let seed = unhex32(text.trim()).ok_or_else(|| KeyError::Malformed { path: path.clone() })?;
            Ok(SigningKey::from_bytes(&seed))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed).map_err(KeyError::Random)?;
            crate::private_fs::write_atomic(&path, crate::hex(&seed).as_bytes())
                .map_err(|source| KeyError::Io { path: path.clone(), source })?;
            Ok(SigningKey::from_bytes(&seed))
        }
        Err(source) => Err(KeyError::Io { path, source }),
    }
}

/// Signs a head of `count` entries ending in `hash`.
pub fn sign_head(key: &SigningKey, count: u64, hash: &[u8; 32], signed_at: i64) -> Head {
    let signature = key.sign(&head_message(count, hash, signed_at));
    let public = key.verifying_key();
    Head {
        format: "sentinel-fire-head-v1".into(),
        count,
        hash: crate::hex(hash),
        signed_at,
        kid: kid(&public),
        public_key: crate::hex(public.as_bytes()),
        signature: crate::hex(&signature.to_bytes()),
    }
}

pub fn unhex32(s: &str) -> Option<[u8; 32]> {
    let v = unhex(s)?;
    v.try_into().ok()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

/// What `verify` found wrong: the first bad place, named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The file, when the finding is in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line (from 1) in that file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The entry's sequence number, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    pub problem: String,
}

/// The outcome of checking a fire log.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    pub ok: bool,
    pub dir: PathBuf,
    pub entries: u64,
    pub segments: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<Head>,
    /// The key the head was checked with, and where it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    pub key_from: String,
    /// The first problem found, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<Finding>,
    /// Whether the ledger beside the files was compared with them (its copy
    /// of the head, and of the last entry's hash).
    pub ledger_checked: bool,
}

/// Checks the exported fire log in `dir`: every segment present and in
/// order, every entry chained to the one before with the right hash, and
/// the head signed by the key (`public_key`, or the folder's
/// `fires.pub.json`) and matching the last entry. Stops at the first bad
/// place and names it. Reading errors are findings too: a log that cannot
/// be read cannot be trusted.
pub fn verify_dir(dir: &Path, public_key: Option<&Path>) -> Verification {
    let mut v = Verification {
        ok: false,
        dir: dir.to_owned(),
        entries: 0,
        segments: 0,
        head: None,
        kid: None,
        key_from: String::new(),
        finding: None,
        ledger_checked: false,
    };
    match check(dir, public_key, &mut v) {
        Ok(()) => v.ok = true,
        Err(f) => v.finding = Some(f),
    }
    v
}

fn finding(file: Option<&str>, line: Option<u64>, seq: Option<u64>, problem: impl Into<String>) -> Finding {
    Finding { file: file.map(str::to_owned), line, seq, problem: problem.into() }
}

/// The segments in `dir`, by index.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, Finding> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| finding(None, None, None, format!("cannot list {}: {e}", dir.display())))?;
    let mut found = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("fires-") && name.ends_with(".ndjson") {
            match segment_index(&name) {
                Some(i) => found.push((i, e.path())),
                None => return Err(finding(Some(&name), None, None, "a file named like a segment that is not one")),
            }
        }
    }
    found.sort();
    Ok(found)
}

fn check(dir: &Path, public_key: Option<&Path>, v: &mut Verification) -> Result<(), Finding> {
    let key = load_public_key(dir, public_key, v)?;
    let head_text = std::fs::read_to_string(dir.join(HEAD_FILE))
        .map_err(|e| finding(Some(HEAD_FILE), None, None, format!("cannot read the head: {e}")))?;
    let head: Head = serde_json::from_str(&head_text)
        .map_err(|e| finding(Some(HEAD_FILE), None, None, format!("not a fire-log head: {e}")))?;
    v.head = Some(head.clone());
    check_head_signature(&head, &key)?;
    let mut prev = [0u8; 32];
    let mut seq = 0u64;
    let segs = segments(dir)?;
    let last_index = segs.last().map_or(0, |(i, _)| *i);
    for (expected, (index, path)) in (1..).zip(&segs) {
        let name = segment_name(*index);
        if *index != expected {
            return Err(finding(
                Some(&segment_name(expected)),
                None,
                Some(seq + 1),
                "segment missing: the chain has a gap",
            ));
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| finding(Some(&name), None, None, format!("cannot read: {e}")))?;
        let mut lines = 0u64;
        for (n, line) in (1..).zip(text.lines()) {
            lines += 1;
            seq += 1;
            prev = check_entry(line, seq, &prev).map_err(|p| finding(Some(&name), Some(n), Some(seq), p))?;
            v.entries = seq;
        }
        if *index < last_index && lines != SEGMENT_ENTRIES {
            return Err(finding(
                Some(&name),
                None,
                None,
                format!("a closed segment holds {lines} entries, not {SEGMENT_ENTRIES}: entries were cut"),
            ));
        }
        v.segments += 1;
    }
    v.entries = seq;
    if head.count != seq {
        return Err(finding(
            Some(HEAD_FILE),
            None,
            Some(seq),
            format!("the signed head counts {} entries, the log has {seq}: the log was cut or grown", head.count),
        ));
    }
    if head.hash != crate::hex(&prev) {
        return Err(finding(Some(HEAD_FILE), None, Some(seq), "the signed head's hash is not the last entry's"));
    }
    Ok(())
}

fn load_public_key(dir: &Path, given: Option<&Path>, v: &mut Verification) -> Result<VerifyingKey, Finding> {
    let path = given.map_or_else(|| dir.join(PUBLIC_KEY_FILE), Path::to_owned);
    v.key_from = path.display().to_string();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let text = std::fs::read_to_string(&path)
        .map_err(|e| finding(name.as_deref(), None, None, format!("cannot read the public key: {e}")))?;
    let file: PublicKeyFile = serde_json::from_str(&text)
        .map_err(|e| finding(name.as_deref(), None, None, format!("not a public key file: {e}")))?;
    let bytes = unhex32(&file.public_key)
        .ok_or_else(|| finding(name.as_deref(), None, None, "a public key is 32 bytes of hex"))?;
    let key = VerifyingKey::from_bytes(&bytes)
        .map_err(|e| finding(name.as_deref(), None, None, format!("not an Ed25519 key: {e}")))?;
    if file.kid != kid(&key) {
        return Err(finding(
            name.as_deref(),
            None,
            None,
            format!("kid {} is not {} for this key", file.kid, kid(&key)),
        ));
    }
    v.kid = Some(file.kid);
    Ok(key)
}

fn check_head_signature(head: &Head, key: &VerifyingKey) -> Result<(), Finding> {
    let bad = |p: &str| finding(Some(HEAD_FILE), None, None, p.to_owned());
    if head.kid != kid(key) || head.public_key != crate::hex(key.as_bytes()) {
        return Err(bad("the head was signed with another key than the published one"));
    }
    let hash = unhex32(&head.hash).ok_or_else(|| bad("the head's hash is not 32 bytes of hex"))?;
    let sig: [u8; 64] = unhex(&head.signature)
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| bad("the head's signature is not 64 bytes of hex"))?;
    key.verify(&head_message(head.count, &hash, head.signed_at), &Signature::from_bytes(&sig))
        .map_err(|_| bad("the head's signature does not verify: it was altered or signed by another key"))
}

/// Checks one line as entry `seq` after `prev`; returns its hash.
fn check_entry(line: &str, seq: u64, prev: &[u8; 32]) -> Result<[u8; 32], String> {
    let entry: FireEntry = serde_json::from_str(line).map_err(|e| format!("not a fire entry: {e}"))?;
    if entry.seq != seq {
        return Err(format!("entry {} where entry {seq} was due: entries were removed or reordered", entry.seq));
    }
    if entry.prev != crate::hex(prev) {
        return Err("its prev is not the previous entry's hash: the chain is broken here".into());
    }
    let hash = entry.compute_hash(prev);
    if entry.hash != crate::hex(&hash) {
        return Err("its hash does not match its content: the entry was altered".into());
    }
    Ok(hash)
}

/// [`verify_dir`], then, when the output folder has its ledger, the files
/// against the ledger's own copy: a head put back to an older one, or a log
/// cut together with its head, still differs from what the ledger signed.
pub fn verify_out_dir(dir: &Path, public_key: Option<&Path>) -> Verification {
    let mut v = verify_dir(dir, public_key);
    if !v.ok {
        return v;
    }
    let view = match crate::ledger::LedgerView::open(dir) {
        Ok(Some(view)) => view,
        Ok(None) => return v,
        Err(e) => {
            v.ok = false;
            v.finding = Some(finding(Some("ledger.db"), None, None, format!("cannot read the ledger: {e}")));
            return v;
        }
    };
    v.ledger_checked = true;
    let anchored = view.fire_head().ok().flatten();
    let exported = v.head.clone();
    let problem = match (anchored, exported) {
        (Some(a), Some(e)) if a.count != e.count || a.hash != e.hash => Some(format!(
            "the ledger signed a head of {} entries ({}), the exported head says {} ({}): the export was cut or replaced",
            a.count,
            &a.hash[..16],
            e.count,
            &e.hash[..16.min(e.hash.len())]
        )),
        (_, Some(e)) if e.count > 0 => match view.fire_hash(e.count) {
            Ok(Some(h)) if h == e.hash => None,
            _ => Some(format!("the ledger's entry {} differs from the exported one", e.count)),
        },
        _ => None,
    };
    if let Some(p) = problem {
        v.ok = false;
        v.finding = Some(finding(Some(HEAD_FILE), None, None, p));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{Ledger, ScanCommit};
    use crate::observation::{Observation, Origin, Severity};

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

    fn obs(i: usize) -> Observation {
        Observation {
            detector: "tool_error".into(),
            kind: "tool_error".into(),
            signature: format!("group {}", i % 3),
            grouping_version: 1,
            title: "t".into(),
            origin: Origin::Harness,
            severity: Severity::High,
            tool: Some("Bash".into()),
            bot_id: Some("bot-1".into()),
            thread_id: Some("th".into()),
            turn_id: Some(format!("turn-{i}")),
            at: 1_000 + i as i64,
            occurrence: format!("m{i}"),
            evidence_source: "messages".into(),
            evidence_id: format!("m{i}"),
            wasted_turns: 1,
            probation: false,
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
            origin: Some("shell".into()),
            severity: o.clone(),
            tool: o.clone(),
            bot_id: o.clone(),
            thread_id: None,
            turn_id: o.clone(),
            evidence_source: o.clone(),
            evidence_id: Some("m\"1\u{2028}".into()),
            probation,
            reason: reason.map(str::to_owned),
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

    /// A ledger whose fire log has `n` fires in two commits (segments of 4).
    fn logged(n: usize) -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        let all: Vec<Observation> = (0..n).map(obs).collect();
        let (a, b) = all.split_at(n / 2);
        l.commit(ScanCommit { observations: a, scan_time: 10, ..Default::default() }).unwrap();
        l.commit(ScanCommit { observations: b, scan_time: 20, ..Default::default() }).unwrap();
        (dir, l)
    }

    fn lines(dir: &Path, seg: u64) -> Vec<String> {
        std::fs::read_to_string(dir.join(segment_name(seg))).unwrap().lines().map(str::to_owned).collect()
    }

    fn put(dir: &Path, seg: u64, lines: &[String]) {
        std::fs::write(dir.join(segment_name(seg)), lines.iter().map(|l| format!("{l}\n")).collect::<String>())
            .unwrap();
    }

    fn broken(dir: &Path) -> Finding {
        let v = verify_out_dir(dir, None);
        assert!(!v.ok, "tampering went unseen: {v:?}");
        v.finding.unwrap()
    }

    #[test]
    fn an_intact_log_verifies_across_segments_and_every_count_has_its_fire() {
        let (dir, l) = logged(10);
        let v = verify_out_dir(dir.path(), None);
        assert!(v.ok, "{v:?}");
        assert_eq!((v.entries, v.segments), (10, 3));
        assert!(v.ledger_checked);
        assert_eq!(l.fire_count().unwrap(), 10, "one fire per counted occurrence");
        let kid = v.kid.unwrap();
        assert!(kid.starts_with("sidecar-v1-") && kid.len() == "sidecar-v1-".len() + 8, "{kid}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "the signing key is private");
        }
        // No raw content: the grouping text is never in the log.
        for seg in 1..=3 {
            assert!(lines(dir.path(), seg).iter().all(|l| !l.contains("group ")));
        }
    }

    #[test]
    fn a_flipped_byte_is_named_with_its_file_and_line() {
        let (dir, _l) = logged(10);
        let mut seg = lines(dir.path(), 2);
        seg[1] = seg[1].replace("\"bot-1\"", "\"bot-2\"");
        put(dir.path(), 2, &seg);
        let f = broken(dir.path());
        assert_eq!((f.file.as_deref(), f.line, f.seq), (Some("fires-000002.ndjson"), Some(2), Some(6)), "{f:?}");
        assert!(f.problem.contains("altered"), "{f:?}");
    }

    #[test]
    fn a_deleted_middle_entry_and_a_reordered_pair_are_seen() {
        let (dir, _l) = logged(10);
        let original = lines(dir.path(), 1);
        let mut cut = original.clone();
        cut.remove(1);
        put(dir.path(), 1, &cut);
        let f = broken(dir.path());
        assert_eq!((f.line, f.seq), (Some(2), Some(2)), "{f:?}");
        assert!(f.problem.contains("removed or reordered"), "{f:?}");
        let mut swapped = original;
        swapped.swap(2, 3);
        put(dir.path(), 1, &swapped);
        let f = broken(dir.path());
        assert_eq!((f.line, f.seq), (Some(3), Some(3)), "{f:?}");
    }

    #[test]
    fn a_truncated_tail_and_a_removed_segment_are_seen() {
        let (dir, _l) = logged(10);
        let mut last = lines(dir.path(), 3);
        last.pop();
        put(dir.path(), 3, &last);
        let f = broken(dir.path());
        assert!(f.problem.contains("counts 10 entries, the log has 9"), "{f:?}");

        let (dir, _l) = logged(10);
        std::fs::remove_file(dir.path().join(segment_name(2))).unwrap();
        let f = broken(dir.path());
        assert_eq!(f.file.as_deref(), Some("fires-000002.ndjson"), "{f:?}");
        assert!(f.problem.contains("missing"), "{f:?}");
    }

    #[test]
    fn a_head_signed_with_another_key_is_refused() {
        let (dir, _l) = logged(10);
        let head: Head = serde_json::from_str(&std::fs::read_to_string(dir.path().join(HEAD_FILE)).unwrap()).unwrap();
        let forger = SigningKey::from_bytes(&[7; 32]);
        let forged = sign_head(&forger, head.count, &unhex32(&head.hash).unwrap(), head.signed_at);
        std::fs::write(dir.path().join(HEAD_FILE), serde_json::to_string(&forged).unwrap()).unwrap();
        assert!(broken(dir.path()).problem.contains("another key"));
        // The forger replaces the published key too: a key kept elsewhere still tells.
        let kept = dir.path().join("kept.pub.json");
        std::fs::copy(dir.path().join(PUBLIC_KEY_FILE), &kept).unwrap();
        std::fs::write(
            dir.path().join(PUBLIC_KEY_FILE),
            serde_json::to_string(&PublicKeyFile::of(&forger.verifying_key())).unwrap(),
        )
        .unwrap();
        assert!(verify_dir(dir.path(), None).ok, "self-consistent with the forged key alone");
        let v = verify_dir(dir.path(), Some(&kept));
        assert!(!v.ok && v.finding.unwrap().problem.contains("another key"));
    }

    #[test]
    fn a_log_cut_together_with_an_older_head_is_caught_by_the_ledgers_anchor() {
        let (dir, mut l) = logged(6);
        // Keep the files of the first state (6 entries), then grow the log.
        let keep: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("fires"))
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect();
        let more: Vec<Observation> = (100..104).map(obs).collect();
        l.commit(ScanCommit { observations: &more, scan_time: 30, ..Default::default() }).unwrap();
        for seg in 1..=3 {
            let _ = std::fs::remove_file(dir.path().join(segment_name(seg)));
        }
        for (name, bytes) in keep {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        assert!(verify_dir(dir.path(), None).ok, "the old files alone are self-consistent");
        let f = broken(dir.path());
        assert!(f.problem.contains("the ledger signed a head of 10 entries"), "{f:?}");
    }
}
