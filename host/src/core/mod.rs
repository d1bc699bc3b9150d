//! The long-lived core of one output folder, and what drives it.
//!
//! It owns the [`sentinel::Sentinel`] (the runtime, the catalog of loaded
//! detectors, the only ledger writer, the operator's commands between
//! scans), the [`catalog`] of component files, the long-running mode's loop
//! ([`daemon`]), the file-system watcher that kicks a fast scan
//! ([`kick`]), the daily digest the scans make when it is due
//! ([`digest`]) and the fixed issues' regression cases ([`regression`]:
//! captured on a fix, run when a detector file changes). It never prints and never installs signal handlers (the
//! binary does).

pub mod catalog;
pub mod daemon;
pub mod digest;
pub mod kick;
pub mod regression;
pub mod sentinel;
