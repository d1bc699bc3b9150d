//! The chain's verification as the API serves it: kept while the log is
//! unchanged, run again when any file of it changed, one run at a time,
//! and naming no path of this machine.
//!
//! It owns the fingerprint of the exported log (each segment's, the head's
//! and the public key's size, inode, mtime and ctime: a write to any of them
//! changes its ctime, which user space cannot set back; and the ledger's
//! own copy of the head), the verification kept for it, and where its last
//! segment started ([`Resume`]): when the log changed only by growing (its
//! closed segments' stamps all unchanged), the next run trusts those and
//! checks the last segment and what came after it, so a new head costs
//! what was added, not the whole log. Requests take
//! their turn ([`current`]) on an async lock, so a request waiting for a run
//! in progress holds no thread; in its turn, a fingerprint that matches the
//! kept one is answered from it, otherwise it runs
//! [`verify_out_dir`](crate::ledger::verify_out_dir): concurrent reads of a
//! changed log wait for one run and share it. The
//! answer speaks of files relative to the output folder. It never writes
//! and never trusts the kept answer over a changed file: `sentinel-host
//! verify` reads everything every time.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::AppState;
use super::problem::Problem;
use crate::firelog::{HEAD_FILE, PUBLIC_KEY_FILE, Resume, Verification, segment_index};
use crate::ledger::LedgerView;

/// One file as the fingerprint sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    name: String,
    len: u64,
    inode: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// Everything the verification depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    files: Vec<Stamp>,
    ledger_head: Option<(u64, String)>,
}

fn stamp(path: &Path, name: String) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let (inode, ctime_ns) = {
        use std::os::unix::fs::MetadataExt as _;
        (m.ino(), i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()))
    };
    #[cfg(not(unix))]
    let (inode, ctime_ns) = (0, 0);
    let mtime_ns = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i128);
    Some(Stamp { name, len: m.len(), inode, mtime_ns, ctime_ns })
}

fn fingerprint(out: &Path) -> Option<Fingerprint> {
    let mut files: Vec<Stamp> = Vec::new();
    for entry in std::fs::read_dir(out).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours =
            name == HEAD_FILE || name == PUBLIC_KEY_FILE || (name.starts_with("fires-") && name.ends_with(".ndjson"));
        if ours {
            files.push(stamp(&entry.path(), name)?);
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let ledger_head = match LedgerView::open(out) {
        Ok(Some(v)) => v.fire_head().ok()?.map(|h| (h.count, h.hash)),
        Ok(None) => None,
        Err(_) => return None,
    };
    Some(Fingerprint { files, ledger_head })
}

/// One verification as kept: what it saw, what it found, where to resume.
#[derive(Debug, Clone)]
struct Kept {
    seen: Fingerprint,
    verification: Verification,
    resume: Option<Resume>,
}

impl Kept {
    /// Where the next run may start: the closed segments this run checked
    /// are trusted only while every one of them is stamped as it was.
    fn resume_for(&self, now: &Fingerprint) -> Option<Resume> {
        let r = self.resume.filter(|_| self.verification.ok)?;
        let closed: Vec<&Stamp> =
            self.seen.files.iter().filter(|f| segment_index(&f.name).is_some_and(|i| i < r.segment)).collect();
        let every_one = closed.len() as u64 + 1 == r.segment;
        (every_one && closed.iter().all(|f| now.files.contains(f))).then_some(r)
    }
}

/// The kept verification, and the turn to look at it.
#[derive(Debug, Default)]
pub struct ChainCache {
    kept: Mutex<Option<Kept>>,
    turn: tokio::sync::Mutex<()>,
}

/// The chain's verification for a request: waits its turn without holding a
/// thread, then answers from the kept run or runs one on a blocking thread.
pub async fn current(state: &Arc<AppState>) -> Result<Verification, Problem> {
    let _turn = state.chain.turn.lock().await;
    let s = Arc::clone(state);
    super::reads::blocking(move || Ok(s.chain.verification(&s.out).0)).await
}

/// How a verification was had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Answered from the kept run: nothing changed.
    Kept,
    /// Run now, reading the segments from this one on (1: all of them).
    Run { from_segment: u64 },
}

impl ChainCache {
    /// The verification of the log in `out`, kept or run now.
    pub fn verification(&self, out: &Path) -> (Verification, Source) {
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = fingerprint(out);
        if let (Some(now), Some(k)) = (&now, kept.as_ref())
            && *now == k.seen
        {
            return (k.verification.clone(), Source::Kept);
        }
        let from = match (&now, kept.as_ref()) {
            (Some(now), Some(k)) => k.resume_for(now),
            _ => None,
        };
        let (v, resume) = crate::ledger::verify_out_dir_from(out, None, from);
        let v = local(v, out);
        // Kept only when nothing changed while it ran.
        *kept = now.filter(|n| fingerprint(out).as_ref() == Some(n)).map(|seen| Kept {
            seen,
            verification: v.clone(),
            resume,
        });
        (v, Source::Run { from_segment: from.map_or(1, |r| r.segment) })
    }
}

/// The verification with the output folder's path taken out: files are
/// named relative to it.
fn local(mut v: Verification, out: &Path) -> Verification {
    let shown = out.display().to_string();
    let strip = |s: &str| s.replace(&format!("{shown}/"), "").replace(&shown, ".");
    v.dir = PathBuf::from(".");
    v.key_from = strip(&v.key_from);
    if let Some(f) = v.finding.as_mut() {
        f.problem = strip(&f.problem);
        f.file = f.file.as_deref().map(strip);
    }
    for c in &mut v.checks {
        c.why = c.why.as_deref().map(strip);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::standing::{Policy, quarantine_by_hand, release};

    #[test]
    fn an_unchanged_log_is_answered_from_the_kept_run_a_grown_one_checks_what_was_added_and_any_other_change_all() {
        let tmp = tempfile::tempdir().unwrap();
        let mut ledger = crate::ledger::Ledger::open(tmp.path()).unwrap();
        let p = Policy::default();
        // Two health changes a step: segments of four entries (in tests),
        // so ten entries fill two segments and start a third.
        let mut at = 0;
        let mut step = |ledger: &mut crate::ledger::Ledger| {
            at += 2;
            ledger.change_health("d", at, |h| quarantine_by_hand(h, at, &p)).unwrap();
            ledger.change_health("d", at + 1, |h| release(h, &p)).unwrap();
        };
        for _ in 0..5 {
            step(&mut ledger);
        }
        let cache = ChainCache::default();
        let (v, how) = cache.verification(tmp.path());
        assert!(v.ok, "{v:?}");
        assert_eq!((v.entries, v.segments, how), (10, 3, Source::Run { from_segment: 1 }));
        assert_eq!(cache.verification(tmp.path()).1, Source::Kept);
        let shown = serde_json::to_string(&v).unwrap();
        assert!(!shown.contains(&tmp.path().display().to_string()), "no path of this machine: {shown}");

        // Grown: only the last segment and what follows are read.
        step(&mut ledger);
        let (v, how) = cache.verification(tmp.path());
        assert_eq!((v.ok, v.entries, how), (true, 12, Source::Run { from_segment: 3 }), "{v:?}");

        // An entry of a closed segment altered in place, same length: its
        // stamp changed, so everything is read again, and it is caught.
        let segment = tmp.path().join("fires-000001.ndjson");
        let text = std::fs::read_to_string(&segment).unwrap();
        std::fs::write(&segment, text.replacen("\"detector\":\"d\"", "\"detector\":\"e\"", 1)).unwrap();
        let (v, how) = cache.verification(tmp.path());
        assert_eq!((v.ok, how), (false, Source::Run { from_segment: 1 }), "{v:?}");
        // A broken log is never resumed from.
        step(&mut ledger);
        assert_eq!(cache.verification(tmp.path()).1, Source::Run { from_segment: 1 });
    }
}
