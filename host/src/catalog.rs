//! The catalog: the detectors of one folder, loaded once and kept loaded
//! while their files stay the same.
//!
//! It owns which component files are loaded: on every refresh it lists the
//! folder and compares each file's size, modification time and inode with
//! what it loaded; a changed or added file is loaded (compiled code from the
//! cache when its sha256 is known), a removed one dropped, an unchanged one
//! kept, refusals included (a bad file is not compiled again every tick).
//! Two files declaring one name: the first by path is kept, the other
//! refused naming both. It never runs a detector and never writes.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::errors::error_chain;
use crate::runtime::{LoadError, LoadedDetector, Runtime, RuntimeError, detector_files};
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
    /// files that did not load (a second file declaring a name already
    /// taken among them).
    pub fn listing(&self) -> (Vec<(&LoadedDetector, DetectorSummary)>, Vec<DetectorSummary>) {
        let mut ready: Vec<(&LoadedDetector, DetectorSummary)> = Vec::new();
        let mut refused = Vec::new();
        for e in &self.entries {
            match &e.loaded {
                Ok(d) => {
                    if let Some((other, _)) = ready.iter().find(|(o, _)| o.descriptor.name == d.descriptor.name) {
                        let err = LoadError::DuplicateName {
                            path: e.path.clone(),
                            name: d.descriptor.name.clone(),
                            other: other.path.clone(),
                        };
                        refused.push(DetectorSummary::refused(e.path.clone(), stem(&e.path), error_chain(&err)));
                        continue;
                    }
                    let load = if e.fresh { LoadKind::Loaded } else { LoadKind::Kept };
                    ready.push((d, DetectorSummary::loaded(d, load)));
                }
                Err(err) => refused.push(DetectorSummary::refused(e.path.clone(), stem(&e.path), error_chain(err))),
            }
        }
        (ready, refused)
    }
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}
