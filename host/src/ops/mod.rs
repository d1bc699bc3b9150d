//! The operator's commands beside the scan: each a file of its own.
//!
//! It owns the schedules that run the binary ([`service`]: per-OS text,
//! install, check), replay cases ([`replay`], with what a blessed expectation
//! may hold in [`blessing`]; the fixed issues' cases in [`regressions`]), the WIT the binary speaks written out
//! ([`wit_export`]), `detectors inspect` ([`inspect`]), the issues' life ([`issues`]), the
//! friction digest ([`report`]), `reset` ([`reset`]) and `key rotate` ([`key`]). It never
//! scans the data dir and never prints.

pub mod blessing;
pub mod inspect;
pub mod issues;
pub mod key;
pub mod regressions;
pub mod replay;
pub mod report;
pub mod reset;
pub mod service;
pub mod wit_export;
