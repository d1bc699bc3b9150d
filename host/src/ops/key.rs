//! `key rotate`: replacing the fire log's signing key on purpose.
//!
//! It owns that one command: the output folder chosen as a scan would, the
//! ledger opened under its writer lock (refused while a scan runs), and the
//! rotation ([`Ledger::rotate_key`]: a `key-rotation` entry signed by the old
//! key, or a `key-lost` entry when it is gone). It never touches the data dir.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::base::out_dir;
use crate::ledger::{KeyRotated, Ledger};
use crate::scan::{ScanError, resolve_data_dir};

/// Replaces the signing key of the output folder (`key_file`, else its
/// default key file) and records it in the fire log.
pub fn rotate(data_dir: Option<&Path>, out: Option<&Path>, key_file: Option<&Path>) -> Result<KeyRotated, ScanError> {
    let data_dir = resolve_data_dir(data_dir)?;
    let out = out_dir::prepare(out, &data_dir)?;
    crate::firelog::KeyFile::locate_outside(&out, key_file, &data_dir)
        .map_err(|e| ScanError::Ledger(crate::ledger::LedgerError::Key(Box::new(e))))?;
    let mut ledger = Ledger::open(&out)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    Ok(ledger.rotate_key(key_file, now)?)
}
