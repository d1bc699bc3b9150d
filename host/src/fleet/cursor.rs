//! The shipper's place in the fire log, and this output folder's install id.
//!
//! It owns `fleet.cursor` (the newest `seq` the server acked, written
//! atomically after the ack, so a crash leaves the previous value, never a
//! torn one) and [`install_id`]: the first 16 hex digits of the log's first
//! entry's hash. That hash is fixed when the first fire is sealed, so the id
//! is stable for the life of the folder (a key rotation signs heads with a
//! new key but never changes an entry), and it names nothing about the
//! machine or its user. It never talks to the network.

use std::path::Path;

use crate::ledger::LedgerView;

pub const CURSOR_FILE: &str = "fleet.cursor";

/// The stored cursor; 0 when none was stored (nothing acked yet).
pub fn read(out: &Path) -> u64 {
    std::fs::read_to_string(out.join(CURSOR_FILE)).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// Stores `seq` as the cursor, atomically.
pub fn store(out: &Path, seq: u64) -> std::io::Result<()> {
    crate::base::private_fs::write_atomic(&out.join(CURSOR_FILE), seq.to_string().as_bytes())
}

/// The install id, once the log has a first entry.
pub fn install_id(view: &LedgerView) -> Option<String> {
    let first = view.fire_hash(1).ok().flatten()?;
    first.get(..16).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_is_zero_until_stored_and_survives_a_rewrite() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(read(tmp.path()), 0);
        store(tmp.path(), 7).unwrap();
        store(tmp.path(), 9).unwrap();
        assert_eq!(read(tmp.path()), 9);
    }
}
