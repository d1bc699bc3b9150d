//! Fan out: each batch to the detectors that read it, and what they report
//! into the ledger's staging, on a thread of its own.
//!
//! It owns the calls into detectors while records flow: a batch converted
//! once into the WIT shape, pushed to every member of its read that
//! subscribes to its `(source, kind)`, each call's observations handed at
//! once (not held in memory) to the staging thread ([`Stager`]), which
//! stages them in the ledger while the next calls run, in the order they
//! were sent. A failed call ends that detector's scan and drops what it
//! staged (in the same order: after everything it staged before); the
//! others go on. It never reads a source and never commits.

use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::{Scope, ScopedJoinHandle};

use super::plan::{Slot, Unit};
use crate::ledger::{Ledger, LedgerError};
use crate::model::observation::Observations;
use crate::model::record::Batch;
use crate::runtime::PreparedBatch;

/// Messages in flight to the staging thread, at most: a few hundred
/// observations each, so memory stays flat.
const IN_FLIGHT: usize = 64;

/// What the staging thread is asked to do, in order.
enum Staged {
    /// Stage one call's observations.
    Observations(Observations),
    /// Drop what this detector staged: it failed.
    Drop(String),
}

/// The staging thread stopped (a ledger error, which joining it returns).
#[derive(Debug)]
pub(crate) struct StagingGone;

/// The scan thread's end of the staging thread.
pub(crate) struct Stager {
    tx: SyncSender<Staged>,
}

/// The staging thread: joined after the last batch, it returns the first
/// ledger error it met (and stops staging at it).
pub(crate) type Staging<'s> = ScopedJoinHandle<'s, Result<(), LedgerError>>;

impl Stager {
    /// Starts the staging thread on `scope`, which holds the ledger until
    /// every [`Stager`] is dropped and the thread is joined.
    pub fn spawn<'s, 'e: 's>(scope: &'s Scope<'s, 'e>, ledger: &'e mut Ledger) -> (Stager, Staging<'s>) {
        let (tx, rx) = sync_channel::<Staged>(IN_FLIGHT);
        let handle = scope.spawn(move || {
            // One transaction while records flow: the temporary tables'
            // pages are written out once, not after every call.
            let mut staging = ledger.staging_run()?;
            let mut run: Vec<Observations> = Vec::new();
            let mut next = rx.recv().ok();
            while let Some(message) = next.take() {
                match message {
                    Staged::Observations(o) => {
                        // Whatever else is already waiting is staged at once.
                        run.push(o);
                        while let Ok(more) = rx.try_recv() {
                            match more {
                                Staged::Observations(o) => run.push(o),
                                drop => {
                                    next = Some(drop);
                                    break;
                                }
                            }
                        }
                        staging.stage(run.iter().flat_map(Observations::iter))?;
                        run.clear();
                    }
                    Staged::Drop(detector) => staging.unstage(&detector)?,
                }
                if next.is_none() {
                    next = rx.recv().ok();
                }
            }
            staging.finish()
        });
        (Stager { tx }, handle)
    }

    /// Stages one call's observations, marked `probation` (a field of the
    /// fire and its issue, never the title) when their detector is on
    /// probation.
    pub fn stage(&self, mut observations: Observations, probation: bool) -> Result<(), StagingGone> {
        if observations.is_empty() {
            return Ok(());
        }
        observations.set_probation(probation);
        self.tx.send(Staged::Observations(observations)).map_err(|_| StagingGone)
    }

    /// Drops what `detector` staged this scan.
    pub fn unstage(&self, detector: &str) -> Result<(), StagingGone> {
        self.tx.send(Staged::Drop(detector.to_owned())).map_err(|_| StagingGone)
    }
}

/// Pushes one batch of read `unit` to its members; returns the records in it.
pub(crate) fn push(slots: &mut [Slot<'_>], unit: &Unit, batch: Batch, stager: &Stager) -> Result<u64, StagingGone> {
    let batch = PreparedBatch::new(batch);
    for &i in &unit.members {
        let slot = &mut slots[i];
        if !slot.reads(batch.source(), batch.kind()) {
            continue;
        }
        let Some(scan) = slot.scan.as_mut() else { continue };
        match scan.push(&batch) {
            Ok(()) => stager.stage(scan.take_observations(), slot.probation)?,
            Err(f) => {
                let gone = slot.scan.take().expect("the scan was there");
                stager.unstage(slot.name())?;
                slot.summary.fill_stats(gone.stats());
                slot.summary.observations = 0;
                slot.summary.fail(&f);
            }
        }
    }
    Ok(u64::from(batch.rows()))
}

/// Stages what `finish` returned, on the scan's own thread (reading is over).
pub(crate) fn stage(ledger: &mut Ledger, mut observations: Observations, probation: bool) -> Result<(), LedgerError> {
    observations.set_probation(probation);
    ledger.stage(observations.iter())
}
