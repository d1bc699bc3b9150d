//! Leftovers: the temporary files a writer that died left in the output
//! folder.
//!
//! It owns recognising and removing them when a [`Ledger`](super::Ledger)
//! opens, with the folder's writer lock held, so no other process can be
//! writing them: the `.<name>.tmp<pid>-<random>` file of an atomic replace
//! (`private_fs::write_atomic`) of one of the ledger's own exports, and the
//! `.fires-NNNNNN.ndjson.ahead<pid>-<random>` segments written ahead
//! ([`super::export::ahead`]). What they held is in the store: an export a crash
//! interrupted is written again from it (`export_pending`). It never
//! removes any other file, never follows a symlink, and leaves a file it
//! cannot remove for the next open.

use std::path::Path;

use super::ISSUES_FILE;
use super::export::ahead::AHEAD_MARK;
use crate::base::private_fs::TEMP_MARK;
use crate::firelog::{HEAD_FILE, KEY_FILE, PUBLIC_KEY_FILE, segment_index};

/// The exports replaced atomically besides the fire log's segments.
const EXPORTS: &[&str] = &[ISSUES_FILE, HEAD_FILE, PUBLIC_KEY_FILE, KEY_FILE];

/// Removes the leftovers in `dir`; returns how many it removed.
pub(super) fn sweep(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(is_leftover))
        // `file_type` does not follow a symlink: only a regular file goes.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// Whether `name` is a temporary file this folder's writer makes.
fn is_leftover(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else { return false };
    // What comes before `mark` followed by a process id and its random
    // part (or, as older versions named them, the process id alone), if
    // that is how `rest` ends.
    let before = |mark: &str| rest.rsplit_once(mark).filter(|(_, tail)| is_temp_tail(tail)).map(|(base, _)| base);
    let is_segment = |base: &str| segment_index(base).is_some();
    if let Some(base) = before(AHEAD_MARK) {
        return is_segment(base);
    }
    before(TEMP_MARK).is_some_and(|base| is_segment(base) || EXPORTS.contains(&base))
}

/// `<pid>-<16 hex digits>` (`private_fs::temp_name`), or `<pid>` alone.
fn is_temp_tail(tail: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match tail.split_once('-') {
        Some((pid, random)) => {
            digits(pid)
                && random.len() == 16
                && random.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        }
        None => digits(tail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_writers_own_temporary_names_are_leftovers() {
        for name in [
            ".issues.jsonl.tmp4242",
            ".fires.head.json.tmp1",
            ".fires.pub.json.tmp77",
            ".fire-key.ed25519.tmp9",
            ".fires-000003.ndjson.tmp120",
            ".fires-000003.ndjson.ahead120",
            ".fires-1234567.ndjson.ahead5",
            ".issues.jsonl.tmp4242-0123456789abcdef",
            ".fires-000003.ndjson.ahead120-fedcba9876543210",
        ] {
            assert!(is_leftover(name), "{name}");
        }
        for name in [
            "issues.jsonl",
            "fires-000003.ndjson",
            "ledger.db",
            ".issues.jsonl.tmp",
            ".issues.jsonl.tmp12a",
            "issues.jsonl.tmp12",
            ".notes.txt.tmp12",
            ".ledger.db.tmp12",
            ".fires-3.ndjson.ahead12",
            ".fires-000003.ndjson.ahead",
            ".issues.jsonl.ahead12",
            ".fires-000003.ndjson.ahead12.bak",
            ".issues.jsonl.tmp12-",
            ".issues.jsonl.tmp-0123456789abcdef",
            ".issues.jsonl.tmp12-0123456789ABCDEF",
            ".issues.jsonl.tmp12-0123456789abcde",
            ".notes.txt.tmp12-0123456789abcdef",
        ] {
            assert!(!is_leftover(name), "{name}");
        }
    }

    #[test]
    fn sweeping_removes_leftover_files_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let put = |name: &str| std::fs::write(dir.path().join(name), b"x").unwrap();
        put(".issues.jsonl.tmp4242");
        put(".fires-000002.ndjson.ahead4242");
        put("issues.jsonl");
        put(".notes.tmp1");
        // A folder and a symlink named like leftovers are not regular files.
        std::fs::create_dir(dir.path().join(".fires-000003.ndjson.ahead1")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("issues.jsonl"), dir.path().join(".fires.head.json.tmp7")).unwrap();
        assert_eq!(sweep(dir.path()), 2);
        let mut left: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        let mut expected = vec![".fires-000003.ndjson.ahead1", ".notes.tmp1", "issues.jsonl"];
        if cfg!(unix) {
            expected.insert(1, ".fires.head.json.tmp7");
        }
        assert_eq!(left, expected);
    }
}
