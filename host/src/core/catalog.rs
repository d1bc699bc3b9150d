//! The catalog: the detectors of one folder, loaded once and kept loaded
//! while their files stay the same.
//!
//! It owns which component files are loaded: on every refresh it lists the
//! folder and compares each file's size, modification time and inode with
//! what it loaded; a changed or added file is loaded (compiled code from the
//! cache when its sha256 is known), a removed one dropped, an unchanged one
//! kept, refusals included (a bad file is not compiled again every tick).
//! Two files declaring one name (or a kind one of them does not own) are
//! both refused, each naming the other, while they share it; the components
//! stay loaded, so removing one brings the other back at once. It never runs
//! a detector and never writes.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::runtime::{LoadError, LoadedDetector, Runtime, RuntimeError, detector_files, shared_refusals};
use crate::scan::{DetectorSummary, LoadKind};

/// What tells that a file changed without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&m);
        #[cfg(not(unix))]
        let inode = 0;
        Some(Stamp { len: m.len(), modified: m.modified().ok(), inode })
    }
}

struct Entry {
    path: PathBuf,
    stamp: Option<Stamp>,
    loaded: Result<LoadedDetector, LoadError>,
    /// Loaded by the latest refresh (not kept from an earlier one).
    fresh: bool,
}

/// The loaded detectors of one folder.
#[derive(Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    loads: u64,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("files", &self.entries.len()).field("loads", &self.loads).finish()
    }
}

/// What changed in a refresh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refresh {
    pub loaded: Vec<PathBuf>,
    pub dropped: Vec<PathBuf>,
}

impl Catalog {
    /// Brings the catalog in line with the files in `dir`.
    pub fn refresh(&mut self, runtime: &Runtime, dir: &Path) -> Result<Refresh, RuntimeError> {
        let files = detector_files(dir)?;
        let mut old: Vec<Entry> = std::mem::take(&mut self.entries);
        let mut refresh = Refresh::default();
        for path in files {
            let stamp = Stamp::of(&path);
            let kept = old.iter().position(|e| e.path == path && e.stamp.is_some() && e.stamp == stamp);
            let entry = match kept {
                Some(i) => Entry { fresh: false, ..old.swap_remove(i) },
                None => {
                    self.loads += 1;
                    refresh.loaded.push(path.clone());
                    Entry { loaded: runtime.load(&path), path, stamp, fresh: true }
                }
            };
            self.entries.push(entry);
        }
        refresh.dropped = old.into_iter().map(|e| e.path).collect();
        Ok(refresh)
    }

    /// Components loaded since this catalog was made.
    pub fn loads(&self) -> u64 {
        self.loads
    }

    /// The loaded detectors with their summaries, and the summaries of the
    /// files that did not load or are refused for sharing a name or a kind
    /// with another (both are refused, each naming the other: see
    /// [`shared_refusals`]).
    pub fn listing(&self) -> (Vec<(&LoadedDetector, DetectorSummary)>, Vec<DetectorSummary>) {
        let live: Vec<Option<&LoadedDetector>> = self.entries.iter().map(|e| e.loaded.as_ref().ok()).collect();
        let shared = shared_refusals(&live);
        let mut ready = Vec::new();
        let mut refused = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            let error = match (&e.loaded, shared.iter().find(|(r, _)| *r == i)) {
                (Err(err), _) | (Ok(_), Some((_, err))) => Some(err),
                (Ok(_), None) => None,
            };
            match (error, &e.loaded) {
                (Some(err), _) => refused.push(DetectorSummary::refused(e.path.clone(), stem(&e.path), err)),
                (None, Ok(d)) => {
                    let load = if e.fresh { LoadKind::Loaded } else { LoadKind::Kept };
                    ready.push((d, DetectorSummary::loaded(d, load)));
                }
                (None, Err(_)) => unreachable!("an error is always refused"),
            }
        }
        (ready, refused)
    }
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}
