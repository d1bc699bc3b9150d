//! The fire log checked against the ledger beside it.
//!
//! It owns [`verify_out_dir`] (and [`verify_out_dir_from`], resuming where a
//! caller's earlier check ended): [`verify_dir`](crate::firelog::verify_dir) over the exported files, then,
//! when the output folder has its ledger, the files against the ledger's own
//! copy of the head and of the last entry's hash. It only reads (through a
//! [`LedgerView`], no lock) and never writes.

use std::path::Path;

use crate::firelog::{HEAD_FILE, Resume, Verification, finding, verify_dir_from};
use crate::ledger::LedgerView;

/// How long `verify` may spend reading a ledger, all its queries together:
/// a hostile one (a `meta` view over a recursive query) ends here, as a
/// finding.
pub const VERIFY_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// [`verify_dir`], then, when the output folder has its ledger, the files
/// against the ledger's own copy: a head put back to an older one, or a log
/// cut together with its head, still differs from what the ledger signed.
pub fn verify_out_dir(dir: &Path, public_key: Option<&Path>) -> Verification {
    verify_out_dir_from(dir, public_key, None).0
}

/// [`verify_out_dir`], resuming as [`verify_dir_from`] does: with it, where
/// the next call may resume.
pub fn verify_out_dir_from(
    dir: &Path,
    public_key: Option<&Path>,
    from: Option<Resume>,
) -> (Verification, Option<Resume>) {
    let (v, resume) = verify_dir_from(dir, public_key, from);
    (against_ledger(dir, v), resume)
}

fn against_ledger(dir: &Path, mut v: Verification) -> Verification {
    if !v.ok {
        return v;
    }
    let unreadable = |v: &mut Verification, e: &dyn std::fmt::Display| {
        v.ok = false;
        v.finding = Some(finding(Some("ledger.db"), None, None, format!("cannot read the ledger: {e}")));
    };
    // The folder may be anyone's: its ledger is read hardened, every query
    // within one budget ([`VERIFY_BUDGET`]).
    let view = match LedgerView::open_untrusted(dir, VERIFY_BUDGET) {
        Ok(Some(view)) => view,
        Ok(None) => return v,
        Err(e) => {
            unreadable(&mut v, &e);
            return v;
        }
    };
    v.ledger_checked = true;
    let anchored = match view.fire_head() {
        Ok(a) => a,
        Err(e) => {
            unreadable(&mut v, &crate::base::errors::error_chain(&e));
            return v;
        }
    };
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
    use ed25519_dalek::SigningKey;

    use super::*;
    use crate::firelog::*;
    use crate::ledger::{Ledger, ScanCommit};
    use crate::model::observation::{Observation, Origin, Severity};

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
        assert!(!dir.path().join(KEY_FILE).exists(), "the signing key is not in the folder it signs");
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
