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
    };
    let mut last = None;
    match check(dir, public_key, &mut v, from, &mut last) {
        Ok(()) => v.ok = true,
        Err(f) => v.finding = Some(f),
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

fn check(
    dir: &Path,
    public_key: Option<&Path>,
    v: &mut Verification,
    from: Option<Resume>,
    last: &mut Option<Resume>,
) -> Result<(), Finding> {
    let key = load_public_key(dir, public_key, v)?;
    let mut keys = KeyTrail::start(&key, public_key.is_some());
    let head_text = std::fs::read_to_string(dir.join(HEAD_FILE))
        .map_err(|e| finding(Some(HEAD_FILE), None, None, format!("cannot read the head: {e}")))?;
    let head: Head = serde_json::from_str(&head_text)
        .map_err(|e| finding(Some(HEAD_FILE), None, None, format!("not a fire-log head: {e}")))?;
    v.head = Some(head.clone());
    let signed_by_anchor = check_head_signature(&head, &key);
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
        if let Some(r) = from.filter(|r| *index < r.segment && *index < last_index) {
            (seq, prev, keys) = (r.seq, r.prev, r.keys);
            v.segments += 1;
            continue;
        }
        if *index == last_index {
            *last = Some(Resume { segment: last_index, seq, prev, keys });
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| finding(Some(&name), None, None, format!("cannot read: {e}")))?;
        let mut lines = 0u64;
        for (n, line) in (1..).zip(text.lines()) {
            lines += 1;
            seq += 1;
            let at = |p| finding(Some(&name), Some(n), Some(seq), p);
            let (hash, entry) = check_line(line, seq, &prev).map_err(at)?;
            if entry.fire_type.changes_key() {
                keys.step(&entry, &prev).map_err(at)?;
            }
            prev = hash;
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
    if head.hash != crate::base::hex(&prev) {
        return Err(finding(Some(HEAD_FILE), None, Some(seq), "the signed head's hash is not the last entry's"));
    }
    let signer = keys.check_head(&key, signed_by_anchor, |k| check_head_signature(&head, k))?;
    v.kid = Some(kid(&signer));
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
    if entry.key.is_some() && !entry.fire_type.changes_key() {
        return Err("a `key` on an entry that changes no key (the hash does not cover it)".into());
    }
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
