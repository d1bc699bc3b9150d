//! What this install last put into the bucket: `community-sent.json` in the
//! output folder.
//!
//! It owns that file: each key put, with a hash of the value put under it
//! (16 hex digits of SHA-256), so a record whose value is unchanged is never
//! put again and a scan that changed no count connects to nothing. Losing it
//! costs one re-put of each record under the same key (an overwrite, never a
//! second count). It never connects and never builds a record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::CommunityError;
use super::record::Record;

pub const SENT_FILE: &str = "community-sent.json";

/// Keys and the hash of the value last put under each.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Sent(BTreeMap<String, String>);

fn digest(bytes: &[u8]) -> String {
    crate::base::hex(&Sha256::digest(bytes)[..8])
}

pub fn path(out: &Path) -> PathBuf {
    out.join(SENT_FILE)
}

impl Sent {
    /// The file in `out`; an empty map when it is missing or unreadable (the
    /// records are then put again, under the same keys).
    pub fn read(out: &Path) -> Sent {
        let map = std::fs::read(path(out)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        Sent(map)
    }

    pub fn write(&self, out: &Path) -> Result<(), CommunityError> {
        let bytes = serde_json::to_vec(&self.0).expect("a map of strings serializes");
        crate::base::private_fs::write_atomic(&path(out), &bytes)
            .map_err(|source| CommunityError::Sent { path: path(out), source })
    }

    /// The records whose value differs from the one last put under their key.
    pub fn changed<'a>(&self, records: &'a [Record]) -> Vec<&'a Record> {
        records.iter().filter(|r| self.0.get(&r.key) != Some(&digest(&r.bytes))).collect()
    }

    /// Notes `r` as put.
    pub fn mark(&mut self, r: &Record) {
        self.0.insert(r.key.clone(), digest(&r.bytes));
    }

    /// Forgets keys that are no longer records (their weeks left the
    /// ledger's per-day history).
    pub fn keep_only(&mut self, records: &[Record]) {
        let keys: std::collections::HashSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
        self.0.retain(|k, _| keys.contains(k.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::community::record::Value;
    use crate::model::observation::Origin;

    fn record(key: &str, count: u64) -> Record {
        let value = Value { sig: "k:0".into(), kind: "k".into(), origin: Origin::Shell, tool: None, count };
        Record { key: key.into(), bytes: value.bytes(), value }
    }

    #[test]
    fn only_a_changed_value_is_put_again_and_the_map_survives_a_write() {
        let dir = tempfile::tempdir().unwrap();
        let mut sent = Sent::read(dir.path());
        let (a, b) = (record("a", 1), record("b", 2));
        assert_eq!(sent.changed(&[a.clone(), b.clone()]).len(), 2);
        sent.mark(&a);
        sent.mark(&b);
        sent.write(dir.path()).unwrap();
        let sent = Sent::read(dir.path());
        assert!(sent.changed(&[a.clone(), b.clone()]).is_empty(), "unchanged: nothing to put");
        let b3 = record("b", 3);
        assert_eq!(sent.changed(&[a, b3.clone()]), vec![&b3]);
    }
}
