//! What the file-system watcher saw land in a watched directory: which files
//! were last renamed into place (moved in) rather than written there, so a
//! directory listing can take a file that landed complete at once instead of
//! waiting for it to settle.
//!
//! It owns one process-wide record, per directory (as the watcher was given
//! it) and file name, of the last event of each name: moved in (with when
//! the watcher saw it) or written in place. The watcher
//! ([`crate::core::kick`]) notes events; the directory source
//! ([`super::directory`]) asks. It is a hint only, and errs towards waiting:
//! a name with no record, a record lost (a watcher's queue overflowed, the
//! record was over its bound) or a write seen after the move means the file
//! waits for its settle time, as without a watcher. It never reads or
//! stats a file, and never decides what a scan lists.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Names recorded per directory at most; over it the directory's record is
/// dropped (its files then settle by time).
const MAX_NAMES: usize = 16_384;

/// The last event seen for one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landed {
    /// Renamed into the directory (the common delivery of a finished file),
    /// seen at this time (ms since the epoch).
    MovedIn { seen_at: i64 },
    /// Created or written in place: it may still be growing.
    Written,
}

/// An event of one path, as the watcher classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    MovedIn,
    Written,
    /// Removed, or renamed away.
    Gone,
}

type Record = HashMap<PathBuf, HashMap<String, Landed>>;

fn record() -> &'static Mutex<Record> {
    static RECORD: OnceLock<Mutex<Record>> = OnceLock::new();
    RECORD.get_or_init(|| Mutex::new(HashMap::new()))
}

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Notes that `path` (a file directly in a watched directory) was `seen` so.
pub fn note(path: &Path, seen: Seen) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { return };
    let mut record = record().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let names = record.entry(dir.to_owned()).or_default();
    match seen {
        Seen::Gone => {
            names.remove(name);
        }
        Seen::MovedIn => {
            names.insert(name.to_owned(), Landed::MovedIn { seen_at: now_ms() });
        }
        Seen::Written => {
            names.insert(name.to_owned(), Landed::Written);
        }
    }
    if names.len() > MAX_NAMES {
        record.remove(dir);
    }
}

/// Forgets everything about `dir` (the watcher may have missed events).
pub fn forget(dir: &Path) {
    record().lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(dir);
}

/// When `name` in `dir` was moved in, if that is the last thing seen of it.
pub fn moved_in(dir: &Path, name: &str) -> Option<i64> {
    let record = record().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match record.get(dir)?.get(name)? {
        Landed::MovedIn { seen_at } => Some(*seen_at),
        Landed::Written => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_event_of_a_name_is_what_it_is_taken_for() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("order.json");
        assert_eq!(moved_in(dir.path(), "order.json"), None, "nothing seen");
        note(&file, Seen::MovedIn);
        assert!(moved_in(dir.path(), "order.json").is_some());
        note(&file, Seen::Written);
        assert_eq!(moved_in(dir.path(), "order.json"), None, "written after the move: it may be growing");
        note(&file, Seen::MovedIn);
        note(&file, Seen::Gone);
        assert_eq!(moved_in(dir.path(), "order.json"), None);
        note(&file, Seen::MovedIn);
        forget(dir.path());
        assert_eq!(moved_in(dir.path(), "order.json"), None, "a missed event forgets the directory");
    }

    #[test]
    fn a_directory_over_its_bound_is_forgotten_not_grown() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..=MAX_NAMES {
            note(&dir.path().join(format!("f{i}")), Seen::MovedIn);
        }
        assert_eq!(moved_in(dir.path(), "f0"), None);
        assert!(record().lock().unwrap().get(dir.path()).is_none());
    }
}
