//! Verifying an exported fire log from its files alone.
//!
//! It owns [`verify_dir`] (and [`verify_dir_from`], which trusts the closed
//! segments a caller checked before): every segment present and in order, every entry
//! chained to the one before, the head signed by the key and matching the
//! last entry, the signing key followed through the log's key-rotation
//! entries ([`KeyTrail`]: a key-lost entry is a finding); the first bad
//! place is named as a [`Finding`]. It reads only
//! the exported `fires-*.ndjson` segments, `fires.head.json` and a public key;
//! it never opens the ledger (comparing the files with the ledger's own copy
//! is [`crate::ledger::verify_out_dir`]) and never writes.

use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use serde::Serialize;

use super::key::{PublicKeyFile, kid};
use super::key_trail::KeyTrail;
use super::{
    FireEntry, HEAD_FILE, Head, PUBLIC_KEY_FILE, SEGMENT_ENTRIES, head_message, segment_index, segment_name, unhex,
    unhex32,
};

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
    /// Every check, in order, with what came of it: what was checked and
    /// what was not, and why.
    pub checks: Vec<Check>,
}

/// One of `verify`'s checks (docs/fire-log.md names what each covers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckName {
    /// The public key read, well formed, its `kid` its own.
    PublicKey,
    /// The head checked with a key kept outside the folder (`--public-key`).
    KeptKey,
    /// The head's signature, by that key.
    HeadSignature,
    /// Every segment present, numbered in order, closed ones full.
    Segments,
    /// Every entry's `seq`, `prev` and `hash`.
    Chain,
    /// The head's count and hash are the log's.
    HeadMatchesLog,
    /// The exported head is the one the ledger signed (its anchor).
    LedgerAnchor,
    /// The ledger's copy of the last entry is the exported one.
    LedgerEntry,
    /// A head held elsewhere (the fleet's witness).
    Witness,
}

impl CheckName {
    /// Every check, in the order they run.
    pub const ALL: [CheckName; 9] = [
        CheckName::PublicKey,
        CheckName::KeptKey,
        CheckName::HeadSignature,
        CheckName::Segments,
        CheckName::Chain,
        CheckName::HeadMatchesLog,
        CheckName::LedgerAnchor,
        CheckName::LedgerEntry,
        CheckName::Witness,
    ];

    /// The name the JSON shows.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::PublicKey => "public-key",
            CheckName::KeptKey => "kept-key",
            CheckName::HeadSignature => "head-signature",
            CheckName::Segments => "segments",
            CheckName::Chain => "chain",
            CheckName::HeadMatchesLog => "head-matches-log",
            CheckName::LedgerAnchor => "ledger-anchor",
            CheckName::LedgerEntry => "ledger-entry",
            CheckName::Witness => "witness",
        }
    }
}

/// What came of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Ok,
    Failed,
    NotChecked,
}

/// One check and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub check: CheckName,
    pub status: Status,
    /// Why it failed or was not checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Why the witness check was not made when no witness was asked for.
pub const NO_WITNESS: &str = "no witness asked for (--witness nats://HOST:PORT): a log rolled back, or rewritten and re-signed by whoever holds the signing key, passes the other checks";

/// Why a check after a finding was not run.
pub const STOPPED: &str = "not reached: verify stops at the first finding";

impl Verification {
    /// Records what came of `check`.
    pub fn mark(&mut self, check: CheckName, status: Status, why: Option<String>) {
        if let Some(c) = self.checks.iter_mut().find(|c| c.check == check) {
            c.status = status;
            c.why = why;
        }
    }

    /// Marks `check` failed with the finding's problem, and records the finding.
    pub fn fail(&mut self, check: CheckName, finding: Finding) {
        self.ok = false;
        self.mark(check, Status::Failed, Some(finding.problem.clone()));
        self.finding = Some(finding);
    }

    /// What came of `check`.
    pub fn status(&self, check: CheckName) -> Option<Status> {
        self.checks.iter().find(|c| c.check == check).map(|c| c.status)
    }
}

/// Checks the exported fire log in `dir`: every segment present and in
/// order, every entry chained to the one before with the right hash, and
/// the head signed by the key (`public_key`, or the folder's
/// `fires.pub.json`) and matching the last entry. Stops at the first bad
/// place and names it. Reading errors are findings too: a log that cannot
/// be read cannot be trusted.
pub fn verify_dir(dir: &Path, public_key: Option<&Path>) -> Verification {
    verify_dir_from(dir, public_key, None).0
}

/// Where a verification may start instead of the first entry: the closed
/// segments before `segment` are trusted (checked before and unchanged
/// since, which the caller vouches for), and the chain stands at entry
/// `seq` with hash `prev` at their end. The last segment is always read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    pub segment: u64,
    pub seq: u64,
    pub prev: [u8; 32],
    /// The signing key as the trusted segments left it.
    pub keys: KeyTrail,
}

/// [`verify_dir`], trusting the closed segments before `from`'s; with it,
/// where the last segment started, for the next call to resume at.
pub fn verify_dir_from(dir: &Path, public_key: Option<&Path>, from: Option<Resume>) -> (Verification, Option<Resume>) {
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
        checks: CheckName::ALL
            .iter()
            .map(|&check| Check { check, status: Status::NotChecked, why: Some(STOPPED.to_owned()) })
            .collect(),
    };
    v.mark(CheckName::Witness, Status::NotChecked, Some(NO_WITNESS.into()));
    if public_key.is_none() {
        v.mark(
            CheckName::KeptKey,
            Status::NotChecked,
            Some("no --public-key: the head was checked with the key published beside the log, which whoever can rewrite the folder can replace".into()),
        );
    }
    let mut last = None;
    match check(dir, public_key, &mut v, from, &mut last) {
        Ok(()) => v.ok = true,
        Err((check, f)) => v.fail(check, f),
    }
    (v, last)
}

pub fn finding(file: Option<&str>, line: Option<u64>, seq: Option<u64>, problem: impl Into<String>) -> Finding {
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

/// A finding, with the check it failed.
type Failed = (CheckName, Finding);

fn check(
    dir: &Path,
    public_key: Option<&Path>,
    v: &mut Verification,
    from: Option<Resume>,
    last: &mut Option<Resume>,
) -> Result<(), Failed> {
    let key = load_public_key(dir, public_key, v).map_err(|f| (CheckName::PublicKey, f))?;
    v.mark(CheckName::PublicKey, Status::Ok, None);
    let signed = |f| (CheckName::HeadSignature, f);
    let head_text = std::fs::read_to_string(dir.join(HEAD_FILE))
        .map_err(|e| signed(finding(Some(HEAD_FILE), None, None, format!("cannot read the head: {e}"))))?;
    let head: Head = serde_json::from_str(&head_text)
        .map_err(|e| signed(finding(Some(HEAD_FILE), None, None, format!("not a fire-log head: {e}"))))?;
    v.head = Some(head.clone());
    // Checked with the key in force at the head, once the log's rotations are followed.
    let signed_by_anchor = check_head_signature(&head, &key);
    let mut keys = KeyTrail::start(&key, public_key.is_some());
    let (seq, prev) = check_segments(dir, v, from, last, &mut keys)?;
    v.mark(CheckName::Segments, Status::Ok, None);
    v.mark(CheckName::Chain, Status::Ok, None);
    let matches = |f| (CheckName::HeadMatchesLog, f);
    if head.count != seq {
        return Err(matches(finding(
            Some(HEAD_FILE),
            None,
            Some(seq),
            format!("the signed head counts {} entries, the log has {seq}: the log was cut or grown", head.count),
        )));
    }
    if head.hash != crate::base::hex(&prev) {
        return Err(matches(finding(
            Some(HEAD_FILE),
            None,
            Some(seq),
            "the signed head's hash is not the last entry's",
        )));
    }
    v.mark(CheckName::HeadMatchesLog, Status::Ok, None);
    let signer = keys.check_head(&key, signed_by_anchor, |k| check_head_signature(&head, k)).map_err(|f| {
        if public_key.is_some() {
            v.mark(CheckName::KeptKey, Status::Failed, Some(f.problem.clone()));
        }
        signed(f)
    })?;
    v.mark(CheckName::HeadSignature, Status::Ok, None);
    if public_key.is_some() {
        v.mark(CheckName::KeptKey, Status::Ok, None);
    }
    v.kid = Some(kid(&signer));
    Ok(())
}

/// Every segment and every entry in them: the log's length and last hash.
fn check_segments(
    dir: &Path,
    v: &mut Verification,
    from: Option<Resume>,
    last: &mut Option<Resume>,
    keys: &mut KeyTrail,
) -> Result<(u64, [u8; 32]), Failed> {
    let gap = |f| (CheckName::Segments, f);
    let mut prev = [0u8; 32];
    let mut seq = 0u64;
    let segs = segments(dir).map_err(gap)?;
    let last_index = segs.last().map_or(0, |(i, _)| *i);
    for (expected, (index, path)) in (1..).zip(&segs) {
        let name = segment_name(*index);
        if *index != expected {
            return Err(gap(finding(
                Some(&segment_name(expected)),
                None,
                Some(seq + 1),
                "segment missing: the chain has a gap",
            )));
        }
        if let Some(r) = from.filter(|r| *index < r.segment && *index < last_index) {
            (seq, prev, *keys) = (r.seq, r.prev, r.keys);
            v.segments += 1;
            continue;
        }
        if *index == last_index {
            *last = Some(Resume { segment: last_index, seq, prev, keys: *keys });
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| gap(finding(Some(&name), None, None, format!("cannot read: {e}"))))?;
        let mut lines = 0u64;
        for (n, line) in (1..).zip(text.lines()) {
            lines += 1;
            seq += 1;
            let at = |p| (CheckName::Chain, finding(Some(&name), Some(n), Some(seq), p));
            let (hash, entry) = check_line(line, seq, &prev).map_err(at)?;
            keys.step(&entry, &prev).map_err(at)?;
            prev = hash;
            v.entries = seq;
        }
        if *index < last_index && lines != SEGMENT_ENTRIES {
            return Err(gap(finding(
                Some(&name),
                None,
                None,
                format!("a closed segment holds {lines} entries, not {SEGMENT_ENTRIES}: entries were cut"),
            )));
        }
        v.segments += 1;
    }
    v.entries = seq;
    Ok((seq, prev))
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

pub(super) fn check_head_signature(head: &Head, key: &VerifyingKey) -> Result<(), Finding> {
    let bad = |p: &str| finding(Some(HEAD_FILE), None, None, p.to_owned());
    if head.kid != kid(key) || head.public_key != crate::base::hex(key.as_bytes()) {
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
#[cfg(test)]
pub(super) fn check_entry(line: &str, seq: u64, prev: &[u8; 32]) -> Result<[u8; 32], String> {
    check_line(line, seq, prev).map(|(hash, _)| hash)
}

/// Checks one line as entry `seq` after `prev`; returns its hash and the entry.
fn check_line(line: &str, seq: u64, prev: &[u8; 32]) -> Result<([u8; 32], FireEntry), String> {
    let entry: FireEntry = serde_json::from_str(line).map_err(|e| format!("not a fire entry: {e}"))?;
    if entry.seq != seq {
        return Err(format!("entry {} where entry {seq} was due: entries were removed or reordered", entry.seq));
    }
    if entry.prev != crate::base::hex(prev) {
        return Err("its prev is not the previous entry's hash: the chain is broken here".into());
    }
    let hash = entry.compute_hash(prev);
    if entry.hash != crate::base::hex(&hash) {
        return Err("its hash does not match its content: the entry was altered".into());
    }
    Ok((hash, entry))
}
