//! sentinel-host: runs detector components over an application's data,
//! strictly read-only, and keeps the issues they report.
//!
//! The folders are the data flow, each importing only folders listed before
//! it: [`base`] (hex, error chains, escaping, private files, the output
//! folder's rules) and [`model`] (batches, observations, the standing rule:
//! no I/O) are the leaves; the [`firelog`] is its format, key and checks;
//! the [`runtime`] runs detector components under wasmtime; [`config`] reads
//! the config files; [`sources`] read the data dir into batches; the
//! [`ledger`] counts and commits what detectors report and exports it; the
//! [`report`] digests a period of it (ranking, trend, formats); [`scan`]
//! wires one pass together (plan → read → fan out → stage → settle →
//! report); [`core`] is the long-lived `Sentinel` with its catalog, loop and
//! kick; [`watch`] is the HTTP API and the dispatcher; [`community`] the
//! opt-in community counts (over [`fleet`]'s connection); [`ops`] holds the
//! operator's other commands (schedules, replay, WIT export, inspect,
//! reset). The library never prints: the `sentinel-host` binary (`cli/`)
//! renders what it returns. `docs/architecture.md` draws the flow.

pub mod base;
pub mod community;
pub mod config;
pub mod core;
pub mod firelog;
pub mod fleet;
pub mod ledger;
pub mod model;
pub mod ops;
pub mod report;
pub mod runtime;
pub mod scan;
pub mod sources;
pub mod watch;

pub use crate::core::sentinel::run_scan;
pub use scan::{ScanError, ScanOptions, ScanReport};
