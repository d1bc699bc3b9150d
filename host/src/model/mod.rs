//! What flows between the parts, as data: no I/O anywhere below.
//!
//! It owns the packed batch layout a source fills and a detector reads
//! ([`record`]), what a detector reports and declares ([`observation`]: its
//! observations, descriptor and config values), why a detector did not
//! complete a scan ([`failure`]) and the quarantine and probation rule over a
//! detector's health ([`standing`]), and records as a case's JSON rows
//! ([`case_rows`]). It never reads or
//! writes a file, and imports nothing of the crate but [`crate::base`].

pub mod case_rows;
pub mod failure;
pub mod observation;
pub mod record;
pub mod standing;
