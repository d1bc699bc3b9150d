//! Kicks for fast sentinels: in the long-running mode, a change in a
//! directory a fast sentinel watches asks for a scan at once instead of
//! waiting for the interval.
//!
//! It owns one file-system watcher (the `notify` crate: inotify on Linux,
//! the spec's 1 s `PollWatcher` on macOS, the platform's own elsewhere) over
//! the directories it is given, non-recursively, and a thread that turns
//! events into "scan now" commands sent through the sentinel's [`Handle`]:
//! the first event kicks at once (no settle delay), and the events that
//! arrive while that scan runs (the send waits until the sentinel applies
//! it, between scans) are folded into one more scan. Every event is also
//! noted in [`crate::sources::files::arrivals`] (a file renamed into place,
//! one written in place, one gone), the hint by which the directory source
//! takes a file moved in complete at once; a file still being written is
//! the directory source's concern (it waits for its settle time, or the
//! next scan, which the writer's next event kicks). It never reads a
//! file, never scans and never decides: the scan reads the directory as any
//! scan does, so a kick changes only when the scan happens, never what it
//! sees (a missed event costs at most one interval).

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use notify::Watcher;

use crate::core::sentinel::{Command, Handle};
use crate::sources::files::arrivals::{self, Seen};

/// A running watcher; dropping it stops the watching (the thread ends when
/// the watcher's channel closes).
pub struct Kicker {
    _watcher: Box<dyn Watcher + Send>,
    /// The directories watched.
    pub watched: Vec<PathBuf>,
    /// When the last kick was sent (ms since the epoch; 0: none yet).
    last: Arc<AtomicI64>,
}

impl std::fmt::Debug for Kicker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kicker").field("watched", &self.watched).finish()
    }
}

fn watcher(tx: mpsc::Sender<notify::Result<notify::Event>>) -> notify::Result<Box<dyn Watcher + Send>> {
    if cfg!(target_os = "macos") {
        let config = notify::Config::default().with_poll_interval(Duration::from_secs(1));
        Ok(Box::new(notify::PollWatcher::new(tx, config)?))
    } else {
        Ok(Box::new(notify::recommended_watcher(tx)?))
    }
}

impl Kicker {
    /// Watches `dirs` (those that exist; a missing one is skipped and
    /// logged) and sends `Kick` through `handle` when they change.
    pub fn start(dirs: Vec<PathBuf>, handle: Handle) -> notify::Result<Kicker> {
        let (tx, rx) = mpsc::channel();
        let mut w = watcher(tx)?;
        let mut watched = Vec::new();
        for dir in dirs {
            match w.watch(&dir, notify::RecursiveMode::NonRecursive) {
                Ok(()) => watched.push(dir),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot watch for a fast sentinel; it polls on the interval")
                }
            }
        }
        let last = Arc::new(AtomicI64::new(0));
        let stamp = last.clone();
        let dirs = watched.clone();
        std::thread::Builder::new()
            .name("sentinel-kick".into())
            .spawn(move || kick_loop(&rx, &handle, &stamp, &dirs))
            .map_err(notify::Error::io)?;
        Ok(Kicker { _watcher: w, watched, last })
    }

    /// When the last kick was sent, ms since the epoch.
    pub fn last_kick(&self) -> Option<i64> {
        Some(self.last.load(Ordering::SeqCst)).filter(|&t| t > 0)
    }
}

/// A `Kick` at the first change; the changes already queued are seen by
/// that scan (it starts after they happened), so they are dropped; the ones
/// arriving while the send waits for a running scan make one more. Until
/// the watcher is dropped or the sentinel is gone.
fn kick_loop(rx: &mpsc::Receiver<notify::Result<notify::Event>>, handle: &Handle, last: &AtomicI64, dirs: &[PathBuf]) {
    while let Ok(first) = rx.recv() {
        note(&first, dirs);
        if !stirs(&first) {
            continue;
        }
        while let Ok(queued) = rx.try_recv() {
            note(&queued, dirs);
        }
        tracing::info!("a watched directory changed: kicking a scan for the fast sentinels");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        last.store(i64::try_from(now).unwrap_or(i64::MAX), Ordering::SeqCst);
        if handle.send(Command::Kick).is_err() {
            return;
        }
    }
}

/// Notes what `event` says of the files it names: renamed into place,
/// written in place, or gone. An error or a rescan (the watcher missed
/// events) forgets what was noted of every watched directory.
fn note(event: &notify::Result<notify::Event>, dirs: &[PathBuf]) {
    use notify::event::{EventKind, ModifyKind, RenameMode};
    let e = match event {
        Ok(e) if !e.need_rescan() => e,
        _ => {
            dirs.iter().for_each(|d| arrivals::forget(d));
            return;
        }
    };
    let seen = match e.kind {
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => Seen::MovedIn,
        EventKind::Modify(ModifyKind::Name(RenameMode::From)) | EventKind::Remove(_) => Seen::Gone,
        EventKind::Create(_) | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any | ModifyKind::Other) => {
            Seen::Written
        }
        // A rename's pairing event (its `To` was noted), metadata, access.
        _ => return,
    };
    for path in &e.paths {
        arrivals::note(path, seen);
    }
}

/// Whether an event is a change (not a mere access).
fn stirs(event: &notify::Result<notify::Event>) -> bool {
    match event {
        Ok(e) => !matches!(e.kind, notify::EventKind::Access(_)),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_in_a_watched_directory_asks_for_a_scan() {
        let dir = tempfile::tempdir().unwrap();
        let (handle, rx) = Handle::channel();
        let kicker = Kicker::start(vec![dir.path().to_owned(), dir.path().join("missing")], handle).unwrap();
        assert_eq!(kicker.watched, [dir.path().to_owned()], "a missing directory is skipped");
        std::fs::write(dir.path().join("order.json"), "{}").unwrap();
        let request = rx.recv_timeout(Duration::from_secs(10)).expect("a kick within the poll interval");
        assert!(matches!(request.command, Command::Kick));
        let _ = request.reply.send(Ok(crate::core::sentinel::Applied::ScanQueued));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_renamed_into_place_is_noted_moved_in_before_its_kick_and_a_write_there_undoes_it() {
        let root = tempfile::tempdir().unwrap();
        let (inbox, staging) = (root.path().join("inbox"), root.path().join("staging"));
        std::fs::create_dir_all(&inbox).unwrap();
        std::fs::create_dir_all(&staging).unwrap();
        let (handle, rx) = Handle::channel();
        let _kicker = Kicker::start(vec![inbox.clone()], handle).unwrap();
        std::fs::write(staging.join("order.json"), "{}").unwrap();
        std::fs::rename(staging.join("order.json"), inbox.join("order.json")).unwrap();
        let kick = rx.recv_timeout(Duration::from_secs(10)).expect("the rename kicks");
        // Noted before the kick was sent: the scan it asks for finds it noted.
        assert!(arrivals::moved_in(&inbox, "order.json").is_some());
        let _ = kick.reply.send(Ok(crate::core::sentinel::Applied::ScanQueued));
        std::fs::write(inbox.join("order.json"), "{\"rewritten\": true}").unwrap();
        let kick = rx.recv_timeout(Duration::from_secs(10)).expect("the write kicks");
        assert_eq!(arrivals::moved_in(&inbox, "order.json"), None, "written in place since");
        let _ = kick.reply.send(Ok(crate::core::sentinel::Applied::ScanQueued));
    }

    #[test]
    fn changes_during_a_scan_are_folded_into_one_more_scan() {
        let dir = tempfile::tempdir().unwrap();
        let (handle, rx) = Handle::channel();
        let _kicker = Kicker::start(vec![dir.path().to_owned()], handle).unwrap();
        std::fs::write(dir.path().join("first.json"), "{}").unwrap();
        // The first kick is asked for, and held unanswered: a scan running.
        let running = rx.recv_timeout(Duration::from_secs(10)).expect("the first kick");
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("during-{i}.json")), "{}").unwrap();
        }
        let _ = running.reply.send(Ok(crate::core::sentinel::Applied::ScanQueued));
        let again = rx.recv_timeout(Duration::from_secs(10)).expect("one more scan for the changes during it");
        assert!(matches!(again.command, Command::Kick));
        let _ = again.reply.send(Ok(crate::core::sentinel::Applied::ScanQueued));
    }
}
