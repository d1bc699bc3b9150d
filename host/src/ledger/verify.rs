//! The fire log checked against the ledger beside it.
//!
//! It owns [`verify_out_dir`] (and [`verify_out_dir_from`], resuming where a
//! caller's earlier check ended, and [`verify_folder`], which says whose the
//! folder is): [`verify_dir`](crate::firelog::verify_dir) over the exported files, then
//! the files against the ledger's own copy of the head and of the last
//! entry's hash. On the host's own folder ([`Folder::Own`]) a missing or
//! unreadable ledger is a finding: deleting `ledger.db` is how a rollback
//! (older `fires-*` files and head put back) would pass every other check.
//! Only a folder handed over ([`Folder::HandedOver`]) may come without its
//! ledger, and `verify` then says the ledger was not checked. It only reads
//! (through a [`LedgerView`], no lock) and never writes.

use std::path::Path;

use crate::firelog::{CheckName, HEAD_FILE, Resume, STOPPED, Status, Verification, finding, verify_dir_from};
use crate::ledger::{LedgerView, STORE_FILE};

/// How long `verify` may spend reading a ledger, all its queries together:
/// a hostile one (a `meta` view over a recursive query) ends here, as a
/// finding.
pub const VERIFY_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// Whose output folder is checked: what a missing ledger means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Folder {
    /// The host's own: its ledger must be there and agree with the files.
    #[default]
    Own,
    /// Handed over (a copy of someone's exports, `verify --handed-over`):
    /// the files are checked alone when no ledger came with them.
    HandedOver,
}

/// [`verify_folder`] on the host's own folder.
pub fn verify_out_dir(dir: &Path, public_key: Option<&Path>) -> Verification {
    verify_out_dir_from(dir, public_key, None).0
}

/// [`verify_dir`](crate::firelog::verify_dir), then the files against the
/// ledger's own copy: a head put back to an older one, or a log cut together
/// with its head, still differs from what the ledger signed; and on the
/// host's own folder, a ledger gone is a finding.
pub fn verify_folder(dir: &Path, public_key: Option<&Path>, folder: Folder) -> Verification {
    let (v, _) = verify_dir_from(dir, public_key, None);
    against_ledger(dir, v, folder)
}

/// [`verify_out_dir`], resuming as [`verify_dir_from`] does: with it, where
/// the next call may resume.
pub fn verify_out_dir_from(
    dir: &Path,
    public_key: Option<&Path>,
    from: Option<Resume>,
) -> (Verification, Option<Resume>) {
    let (v, resume) = verify_dir_from(dir, public_key, from);
    (against_ledger(dir, v, Folder::Own), resume)
}

fn against_ledger(dir: &Path, mut v: Verification, folder: Folder) -> Verification {
    if !v.ok {
        return v;
    }
    let unreadable = |v: &mut Verification, e: &dyn std::fmt::Display| {
        v.fail(CheckName::LedgerAnchor, finding(Some(STORE_FILE), None, None, format!("cannot read the ledger: {e}")));
    };
    // The folder may be anyone's: its ledger is read hardened, every query
    // within one budget ([`VERIFY_BUDGET`]).
    let view = match LedgerView::open_untrusted(dir, VERIFY_BUDGET) {
        Ok(Some(view)) => view,
        Ok(None) => {
            missing(&mut v, folder);
            return v;
        }
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
    match (&anchored, &exported) {
        (Some(a), Some(e)) if a.count != e.count || a.hash != e.hash => {
            let p = format!(
                "the ledger signed a head of {} entries ({}), the exported head says {} ({}): the export was cut or replaced",
                a.count,
                &a.hash[..16.min(a.hash.len())],
                e.count,
                &e.hash[..16.min(e.hash.len())]
            );
            v.fail(CheckName::LedgerAnchor, finding(Some(HEAD_FILE), None, None, p));
            return v;
        }
        (Some(_), _) => v.mark(CheckName::LedgerAnchor, Status::Ok, None),
        (None, _) => v.mark(
            CheckName::LedgerAnchor,
            Status::NotChecked,
            Some("the ledger holds no signed head yet (it has exported nothing)".into()),
        ),
    }
    match exported {
        Some(e) if e.count > 0 => match view.fire_hash(e.count) {
            Ok(Some(h)) if h == e.hash => v.mark(CheckName::LedgerEntry, Status::Ok, None),
            _ => v.fail(
                CheckName::LedgerEntry,
                finding(
                    Some(HEAD_FILE),
                    None,
                    None,
                    format!("the ledger's entry {} differs from the exported one", e.count),
                ),
            ),
        },
        _ => v.mark(CheckName::LedgerEntry, Status::NotChecked, Some("the log is empty".into())),
    }
    v
}

/// No ledger beside the files: a finding on the host's own folder, a check
/// not made on one handed over.
fn missing(v: &mut Verification, folder: Folder) {
    match folder {
        Folder::Own => {
            v.fail(
                CheckName::LedgerAnchor,
                finding(
                    Some(STORE_FILE),
                    None,
                    None,
                    "the ledger is missing from the host's own output folder: the exported log cannot be checked against the head the ledger signed, and older fires-* files put back with the ledger deleted (a rollback) would pass every other check; if you deleted ledger.db yourself, the next scan continues the chain from the exported head; for a folder handed over without its ledger, pass --handed-over",
                ),
            );
            v.mark(CheckName::LedgerEntry, Status::NotChecked, Some(STOPPED.into()));
        }
        Folder::HandedOver => {
            let why = "no ledger.db came with this folder (--handed-over): the files were checked alone, so a rollback to older files and their head is not seen";
            v.mark(CheckName::LedgerAnchor, Status::NotChecked, Some(why.into()));
            v.mark(
                CheckName::LedgerEntry,
                Status::NotChecked,
                Some("no ledger.db came with this folder (--handed-over)".into()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::SigningKey;

    use super::*;
    use crate::firelog::*;
    use crate::ledger::{Ledger, ScanCommit};
    use crate::model::observation::Observation;

    fn obs(i: usize) -> Observation {
        Observation { bot_id: Some("bot-1".into()), thread_id: Some("th".into()), ..Observation::numbered(i) }
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

    fn statuses(v: &Verification) -> Vec<(&'static str, Status)> {
        v.checks.iter().map(|c| (c.check.as_str(), c.status)).collect()
    }

    #[test]
    fn a_missing_ledger_is_a_finding_on_the_hosts_own_folder_and_a_check_not_made_on_one_handed_over() {
        let (dir, l) = logged(6);
        drop(l);
        std::fs::remove_file(dir.path().join(crate::ledger::STORE_FILE)).unwrap();
        let f = broken(dir.path());
        assert_eq!(f.file.as_deref(), Some("ledger.db"), "{f:?}");
        assert!(f.problem.contains("missing") && f.problem.contains("rollback"), "{f:?}");
        let v = verify_folder(dir.path(), None, Folder::HandedOver);
        assert!(v.ok && !v.ledger_checked, "{v:?}");
        assert_eq!(v.status(CheckName::LedgerAnchor), Some(Status::NotChecked));
        let why = v.checks.iter().find(|c| c.check == CheckName::LedgerAnchor).unwrap().why.clone().unwrap();
        assert!(why.contains("--handed-over"), "{why}");
    }

    #[test]
    fn the_checks_say_what_was_checked_what_failed_and_what_was_not_reached() {
        let (dir, _l) = logged(10);
        let v = verify_out_dir(dir.path(), None);
        use Status::{Failed, NotChecked, Ok as Passed};
        assert_eq!(
            statuses(&v),
            vec![
                ("public-key", Passed),
                ("kept-key", NotChecked),
                ("head-signature", Passed),
                ("segments", Passed),
                ("chain", Passed),
                ("head-matches-log", Passed),
                ("ledger-anchor", Passed),
                ("ledger-entry", Passed),
                ("witness", NotChecked),
            ]
        );
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["checks"][1]["check"], "kept-key");
        assert_eq!(json["checks"][1]["status"], "not-checked");
        assert!(json["checks"][1]["why"].as_str().unwrap().contains("--public-key"));
        assert!(json["checks"][0].get("why").is_none(), "an ok check needs no why");
        for c in CheckName::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
        let kept = dir.path().join("kept.pub.json");
        std::fs::copy(dir.path().join(PUBLIC_KEY_FILE), &kept).unwrap();
        assert_eq!(verify_out_dir(dir.path(), Some(&kept)).status(CheckName::KeptKey), Some(Passed));

        let mut seg = lines(dir.path(), 2);
        seg[1] = seg[1].replace("\"bot-1\"", "\"bot-2\"");
        put(dir.path(), 2, &seg);
        let v = verify_out_dir(dir.path(), None);
        let s = statuses(&v);
        assert_eq!(
            (s[4], s[5], s[6]),
            (("chain", Failed), ("head-matches-log", NotChecked), ("ledger-anchor", NotChecked))
        );
        assert_eq!(v.checks[5].why.as_deref(), Some(STOPPED));
    }
}
