//! A head the fleet's witness holds, against the local log `verify` checked.
//!
//! It owns [`install_id`] (read from the exported files: the first 16 hex
//! digits of the first entry's hash, as the shipper names its subjects) and
//! [`check_witnessed`]: the witnessed head must be signed by the key it
//! names, that key must be one the local log vouches for (the key its own
//! head is signed by, or one a key entry after the witnessed `seq` hands
//! over from), the local log must reach its `count`, and the local entry at
//! that `seq` must have its hash. A head ahead of the log is a rollback, a
//! different hash a rewrite: both are findings on the [`CheckName::Witness`]
//! check. It reads only the exported segments of a log [`super::verify_dir`]
//! already found whole, never talks to the network (the fleet fetches the
//! head) and never writes.

use std::path::Path;

use ed25519_dalek::VerifyingKey;

use super::verify::{check_head_signature, finding};
use super::{CheckName, FireEntry, Head, SEGMENT_ENTRIES, Status, Verification, segment_name, unhex32};

/// This log's install id, once it has a first entry.
pub fn install_id(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(segment_name(1))).ok()?;
    let first: FireEntry = serde_json::from_str(text.lines().next()?).ok()?;
    first.hash.get(..16).map(str::to_owned)
}

/// Checks `witnessed` (the newest head the witness holds on `subject`)
/// against the log `v` verified, and marks the witness check ok or failed
/// (a finding). `v` must have verified: a log with a finding is not
/// compared (the witness check stays not reached).
pub fn check_witnessed(v: &mut Verification, witnessed: &Head, subject: &str) {
    if !v.ok {
        return;
    }
    match compare(v, witnessed, subject) {
        Ok(()) => v.mark(CheckName::Witness, Status::Ok, None),
        Err(problem) => v.fail(CheckName::Witness, finding(None, None, Some(witnessed.count), problem)),
    }
}

/// A short form of a hash, for messages.
fn short(hash: &str) -> &str {
    &hash[..16.min(hash.len())]
}

fn compare(v: &Verification, w: &Head, subject: &str) -> Result<(), String> {
    let named = format!("the fleet's witness ({subject}) holds head {} with hash {}", w.count, short(&w.hash));
    let key = unhex32(&w.public_key)
        .and_then(|k| VerifyingKey::from_bytes(&k).ok())
        .ok_or_else(|| format!("{named}, but its public key is not an Ed25519 key: the witness holds a forged head"))?;
    check_head_signature(w, &key)
        .map_err(|f| format!("{named}, but it is not signed by the key it names ({}): a forged head", f.problem))?;
    let local = v.entries;
    if w.count > local {
        return Err(format!(
            "{named}; the local log has only {local} entries: rolled back (the folder was put back to an older state, or cut and re-signed)"
        ));
    }
    if w.count == 0 {
        return Ok(());
    }
    let after = entries_from(&v.dir, w.count).map_err(|e| format!("{named}, but the local log cannot be read: {e}"))?;
    match after.first() {
        Some(e) if e.seq == w.count && e.hash == w.hash => {}
        Some(e) if e.seq == w.count => {
            return Err(format!(
                "{named}; the local entry {} has hash {}: entry {} differs from the witnessed one: rewritten",
                w.count,
                short(&e.hash),
                w.count
            ));
        }
        _ => return Err(format!("{named}, but the local log has no entry {}", w.count)),
    }
    let local_key = v.head.as_ref().map(|h| h.public_key.as_str());
    let handed_over = after
        .iter()
        .skip(1)
        .any(|e| e.body.key().and_then(|k| k.previous_key.as_deref()) == Some(w.public_key.as_str()));
    if local_key != Some(w.public_key.as_str()) && !handed_over {
        return Err(format!(
            "{named}, matching the local entry, but signed by {}, a key the local log does not vouch for at that entry: the witness holds a forged head",
            w.kid
        ));
    }
    Ok(())
}

/// The exported entries from `seq` to the end of the log.
fn entries_from(dir: &Path, seq: u64) -> Result<Vec<FireEntry>, String> {
    let mut out = Vec::new();
    let mut segment = (seq - 1) / SEGMENT_ENTRIES + 1;
    loop {
        let name = segment_name(segment);
        let text = match std::fs::read_to_string(dir.join(&name)) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(format!("{name}: {e}")),
        };
        for line in text.lines() {
            let e: FireEntry = serde_json::from_str(line).map_err(|e| format!("{name}: {e}"))?;
            if e.seq >= seq {
                out.push(e);
            }
        }
        segment += 1;
    }
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::SigningKey;

    use super::*;
    use crate::firelog::{HEAD_FILE, sign_head, verify_dir};
    use crate::ledger::{Ledger, ScanCommit};
    use crate::model::observation::Observation;

    fn obs(i: usize) -> Observation {
        Observation::numbered(i)
    }

    fn commit(l: &mut Ledger, range: std::ops::Range<usize>, scan_time: i64) {
        let all: Vec<Observation> = range.map(obs).collect();
        l.commit(ScanCommit { observations: &all, scan_time, ..Default::default() }).unwrap();
    }

    fn head(dir: &Path) -> Head {
        serde_json::from_str(&std::fs::read_to_string(dir.join(HEAD_FILE)).unwrap()).unwrap()
    }

    /// The exported files of `dir` copied into `to` (a folder put back later).
    fn copy_files(dir: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("fires") {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }

    /// A log of 10 entries, a copy of its files at 6, and its heads at 6 and 10.
    fn witnessed_log() -> (tempfile::TempDir, Ledger, Head, Head) {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        commit(&mut l, 0..6, 10);
        let at6 = head(dir.path());
        copy_files(dir.path(), &dir.path().join("older"));
        commit(&mut l, 6..10, 20);
        let at10 = head(dir.path());
        assert_eq!((at6.count, at10.count), (6, 10));
        (dir, l, at6, at10)
    }

    fn problem(v: &Verification) -> String {
        assert!(!v.ok, "the witness saw nothing wrong: {v:?}");
        assert_eq!(v.status(CheckName::Witness), Some(Status::Failed));
        v.finding.as_ref().unwrap().problem.clone()
    }

    #[test]
    fn a_witnessed_head_the_log_holds_as_a_prefix_passes() {
        let (dir, _l, at6, at10) = witnessed_log();
        for w in [&at6, &at10] {
            let mut v = verify_dir(dir.path(), None);
            check_witnessed(&mut v, w, "sentinel.heads.x");
            assert!(v.ok, "{v:?}");
            assert_eq!(v.status(CheckName::Witness), Some(Status::Ok));
        }
        assert_eq!(install_id(dir.path()).unwrap().len(), 16);
    }

    #[test]
    fn a_log_put_back_behind_its_witnessed_head_is_a_rollback() {
        let (dir, _l, _at6, at10) = witnessed_log();
        let older = dir.path().join("older");
        let mut v = verify_dir(&older, None);
        assert!(v.ok, "the older files alone are self-consistent: {v:?}");
        check_witnessed(&mut v, &at10, "sentinel.heads.x");
        let p = problem(&v);
        assert!(p.contains("holds head 10") && p.contains("only 6 entries: rolled back"), "{p}");
        assert_eq!(v.finding.unwrap().seq, Some(10));
    }

    #[test]
    fn a_witnessed_hash_the_log_holds_otherwise_is_a_rewrite() {
        let (dir, _l, at6, _) = witnessed_log();
        // Another history at entry 6 than the one the witness saw (the
        // hash is compared before the key).
        let mut v = verify_dir(dir.path(), None);
        let forger = SigningKey::from_bytes(&[7; 32]);
        let rewritten = sign_head(&forger, 6, &[9; 32], at6.signed_at);
        check_witnessed(&mut v, &rewritten, "sentinel.heads.x");
        let p = problem(&v);
        assert!(p.contains("entry 6 differs from the witnessed one: rewritten"), "{p}");
    }

    #[test]
    fn a_witnessed_head_not_signed_by_its_key_or_by_a_key_the_log_never_had_is_refused() {
        let (dir, _l, _, at10) = witnessed_log();
        let mut altered = at10.clone();
        altered.signed_at += 1;
        let mut v = verify_dir(dir.path(), None);
        check_witnessed(&mut v, &altered, "sentinel.heads.x");
        assert!(problem(&v).contains("not signed by the key it names"));
        let forger = SigningKey::from_bytes(&[7; 32]);
        let foreign = sign_head(&forger, 10, &unhex32(&at10.hash).unwrap(), at10.signed_at);
        let mut v = verify_dir(dir.path(), None);
        check_witnessed(&mut v, &foreign, "sentinel.heads.x");
        assert!(problem(&v).contains("does not vouch for"));
    }
}
