//! Exit codes, documented in docs/cli.md, and which error exits with which.
//!
//! It owns the codes and mapping an error's cause chain to one; it never
//! prints.

use sentinel_host::ScanError;
use sentinel_host::base::out_dir::OutDirError;
use sentinel_host::config::ConfigError;
use sentinel_host::ledger::{LedgerError, LockError};
use sentinel_host::ops::service::ServiceError;
use sentinel_host::runtime::RuntimeError;

use crate::run::ListenError;

pub const OK: u8 = 0;
pub const INTERNAL: u8 = 1;
pub const USAGE: u8 = 2;
pub const CONFIG: u8 = 3;
pub const OUT_IN_DATA_DIR: u8 = 4;
pub const DATA_DIR: u8 = 5;
pub const OUTPUT_IO: u8 = 6;
pub const OUT_IN_GIT_REPO: u8 = 7;
pub const REPLAY_FAILED: u8 = 8;
pub const STALE_INSTALL: u8 = 9;
pub const NOT_INSTALLED: u8 = 10;
pub const OUT_IN_USE: u8 = 11;
pub const CHAIN_BROKEN: u8 = 12;
pub const SCAN_OVERRUN: u8 = 13;
pub const LISTEN: u8 = 14;
pub const SIGNING_KEY: u8 = 15;
/// `verify --witness`: the log verified, but the witness gave no verdict.
pub const WITNESS_NO_VERDICT: u8 = 16;

pub(crate) fn exit_code(err: &anyhow::Error) -> u8 {
    if err.downcast_ref::<ListenError>().is_some() {
        return LISTEN;
    }
    match err.downcast_ref::<ServiceError>() {
        Some(ServiceError::OutDir(e)) => return out_dir_code(e),
        Some(ServiceError::DataDir(e)) => return scan_code(e),
        Some(ServiceError::Write { .. }) => return OUTPUT_IO,
        Some(
            ServiceError::Runtime(RuntimeError::DetectorsDir { .. })
            | ServiceError::NoDetectors { .. }
            | ServiceError::DetectorRefused { .. }
            | ServiceError::BadPath { .. }
            | ServiceError::Config(_),
        ) => return CONFIG,
        _ => {}
    }
    if let Some(sentinel_host::ops::wit_export::WitExportError::UnknownVersion(_)) = err.downcast_ref() {
        return USAGE;
    }
    match err.downcast_ref::<sentinel_host::ops::issues::IssuesError>() {
        Some(sentinel_host::ops::issues::IssuesError::Scan(e)) => return scan_code(e),
        Some(sentinel_host::ops::issues::IssuesError::Lifecycle(sentinel_host::ledger::LifecycleError::Ledger(e))) => {
            return ledger_code(e);
        }
        // An unknown signature, or a fix of a fixed issue: the operator's input.
        Some(_) => return USAGE,
        None => {}
    }
    match err.downcast_ref::<sentinel_host::ops::report::ReportError>() {
        Some(sentinel_host::ops::report::ReportError::Scan(e)) => return scan_code(e),
        // A period too long or empty: the operator's input.
        Some(_) => return USAGE,
        None => {}
    }
    match err.downcast_ref::<sentinel_host::community::CommunityError>() {
        // The secret beside the signing key: placed or read as the key is.
        Some(
            sentinel_host::community::CommunityError::Key(_)
            | sentinel_host::community::CommunityError::BadSecret { .. },
        ) => {
            return SIGNING_KEY;
        }
        Some(sentinel_host::community::CommunityError::Ledger(e)) => return ledger_code(e),
        _ => {}
    }
    if err.downcast_ref::<sentinel_host::firelog::KeyError>().is_some() {
        return SIGNING_KEY;
    }
    if err.downcast_ref::<ConfigError>().is_some()
        || err.downcast_ref::<sentinel_host::watch::gates::EnvError>().is_some()
        || err.downcast_ref::<sentinel_host::ops::replay::ReplayError>().is_some()
        || err.downcast_ref::<sentinel_host::runtime::LoadError>().is_some()
    {
        return CONFIG;
    }
    err.downcast_ref::<ScanError>().map_or(INTERNAL, scan_code)
}

pub(crate) fn out_dir_code(e: &OutDirError) -> u8 {
    match e {
        OutDirError::InsideGitRepo { .. } => OUT_IN_GIT_REPO,
        OutDirError::InsideDataDir { .. } => OUT_IN_DATA_DIR,
        _ => OUTPUT_IO,
    }
}

pub(crate) fn ledger_code(e: &LedgerError) -> u8 {
    match e {
        LedgerError::Lock(LockError::Held { .. }) => OUT_IN_USE,
        LedgerError::Key(_) => SIGNING_KEY,
        _ => OUTPUT_IO,
    }
}

pub(crate) fn scan_code(e: &ScanError) -> u8 {
    match e {
        ScanError::OutDir(e) => out_dir_code(e),
        ScanError::Ledger(LedgerError::Lock(LockError::Held { .. })) => OUT_IN_USE,
        // A new or replaced ledger beside an exported log that does not verify.
        ScanError::Ledger(LedgerError::ExportedLog { .. }) => CHAIN_BROKEN,
        ScanError::Overrun { .. } => SCAN_OVERRUN,
        ScanError::Ledger(e) => ledger_code(e),
        ScanError::DataDir { .. } | ScanError::NoDataDir => DATA_DIR,
        ScanError::Runtime(RuntimeError::DetectorsDir { .. }) => CONFIG,
        _ => INTERNAL,
    }
}
