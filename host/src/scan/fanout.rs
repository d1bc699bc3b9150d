//! Fan out: each batch to the detectors that read it, and what they report
//! straight into the ledger's staging.
//!
//! It owns the calls into detectors while records flow: a batch converted
//! once into the WIT shape, pushed to every member of its read that
//! subscribes to its `(source, kind)`, each call's observations staged at
//! once (not held in memory). A failed call ends that detector's scan and
//! drops what it staged; the others go on. It never reads a source and never
//! commits.

use super::plan::{Slot, Unit};
use crate::ledger::{Ledger, LedgerError};
use crate::observation::Observation;
use crate::record::Batch;
use crate::runtime::PreparedBatch;

/// Pushes one batch of read `unit` to its members; returns the records in it.
pub(crate) fn push(slots: &mut [Slot<'_>], unit: &Unit, batch: Batch, ledger: &mut Ledger) -> Result<u64, LedgerError> {
    let batch = PreparedBatch::new(batch);
    for &i in &unit.members {
        let slot = &mut slots[i];
        if !slot.reads(batch.source(), batch.kind()) {
            continue;
        }
        let Some(scan) = slot.scan.as_mut() else { continue };
        match scan.push(&batch) {
            Ok(()) => {
                let observations = scan.take_observations();
                stage(ledger, observations, slot.probation)?;
            }
            Err(f) => {
                let gone = slot.scan.take().expect("the scan was there");
                ledger.unstage(slot.name())?;
                slot.summary.fill_stats(gone.stats());
                slot.summary.observations = 0;
                slot.summary.fail(&f);
            }
        }
    }
    Ok(u64::from(batch.rows()))
}

/// Stages one call's observations, marked `probation` (a field of the fire
/// and its issue, never the title) when their detector is on probation.
pub(crate) fn stage(
    ledger: &mut Ledger,
    mut observations: Vec<Observation>,
    probation: bool,
) -> Result<(), LedgerError> {
    for o in &mut observations {
        o.probation = probation;
    }
    ledger.stage(&observations)
}
