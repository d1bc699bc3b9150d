//! The fire log's format: entries (typed by fire type, [`entry`]; flat on
//! the wire, [`line`]), the hash chain over a canonical encoding, the signed
//! head; the signing key ([`key`]) and `verify` over the exported files
//! ([`verify`]).
//!
//! It owns everything someone else needs to check the log without the host:
//! the canonical encoding (documented in `docs/fire-log.md`), SHA-256
//! chaining, the Ed25519 head signature with key id
//! `sidecar-v1-{first 8 hex of sha256(public key)}`, the key file outside the
//! output folder ([`key_file`]: where it lives, its owner and mode checked at
//! every open, the one-time move out of an older folder), the key-rotation
//! entries' signatures and the key followed through them ([`KeyTrail`]),
//! [`verify_dir`], which reads only the exported
//! `fires-*.ndjson` segments, `fires.head.json` and a public key, and
//! [`check_witnessed`], a head held by the fleet's witness against them. It imports
//! nothing of the ledger. It never decides what a fire is (the ledger's
//! commit does) and never writes a segment (the ledger's export does).

mod entry;
mod key;
pub mod key_file;
mod key_trail;
mod line;
mod verify;
mod witness;

pub use entry::{FireBody, FireEntry, FireEntryRef, FireType, PROBATION_MARKER};
pub use key::{KeyChange, KeyError, PublicKeyFile, generate, kid, sign_head, sign_rotation};
pub use key_file::{KeyFile, KeyOpened, OpenedHow};
pub use key_trail::KeyTrail;
pub use verify::{
    Check, CheckName, Finding, NO_WITNESS, Resume, STOPPED, Status, Verification, finding, verify_dir, verify_dir_from,
};
pub use witness::{check_witnessed, install_id};

use serde::{Deserialize, Serialize};

/// Entries per exported segment: closed segments are written once and never
/// again; the open one is replaced atomically after every commit.
/// (Four in this crate's unit tests, so that they can cut segments cheaply.)
pub const SEGMENT_ENTRIES: u64 = if cfg!(test) { 4 } else { 4096 };
pub const HEAD_FILE: &str = "fires.head.json";
pub const PUBLIC_KEY_FILE: &str = "fires.pub.json";
/// Where an older release kept the signing key: in the output folder, beside
/// the log. Found there, it is moved to its [`KeyFile`] once.
pub const KEY_FILE: &str = "fire-key.ed25519";
const ENTRY_DOMAIN: &[u8] = b"sentinel-fire-v1\0";
const HEAD_DOMAIN: &[u8] = b"sentinel-fire-head-v1\0";

/// A segment's file name: `fires-000001.ndjson` holds entries 1 to 4096.
pub fn segment_name(index: u64) -> String {
    format!("fires-{index:06}.ndjson")
}

/// The index of the segment named `name`, when `name` is exactly what
/// [`segment_name`] writes for it.
pub fn segment_index(name: &str) -> Option<u64> {
    let index = name.strip_prefix("fires-")?.strip_suffix(".ndjson")?.parse().ok()?;
    (segment_name(index) == name).then_some(index)
}

/// Whether `name` is one of the fire log's files in an output folder (a
/// segment, the head, the public key, or a file that looks like one: what
/// the health source and the fast path watch).
pub fn is_log_file(name: &str) -> bool {
    name.starts_with("fires") && (name.ends_with(".ndjson") || name.ends_with(".json"))
}

/// The log's head: how many entries, and the last one's hash, signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Head {
    pub format: String,
    pub count: u64,
    pub hash: String,
    pub signed_at: i64,
    pub kid: String,
    pub public_key: String,
    pub signature: String,
}

/// The bytes a head's signature covers: `"sentinel-fire-head-v1\0"`, the
/// count (8 bytes, big-endian), the last hash (32 bytes), the signing time
/// (8 bytes, big-endian, ms).
pub(super) fn head_message(count: u64, hash: &[u8; 32], signed_at: i64) -> Vec<u8> {
    let mut m = HEAD_DOMAIN.to_vec();
    m.extend(count.to_be_bytes());
    m.extend(hash);
    m.extend(signed_at.to_be_bytes());
    m
}
pub fn unhex32(s: &str) -> Option<[u8; 32]> {
    let v = unhex(s)?;
    v.try_into().ok()
}

pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_index_is_read_only_from_the_name_segment_name_writes() {
        for i in [1, 43, 999_999, 1_234_567] {
            assert_eq!(segment_index(&segment_name(i)), Some(i));
        }
        for name in
            ["fires-1.ndjson", "fires-0000001.ndjson", "fires-x.ndjson", "fires-000001.json", ".fires-000001.ndjson"]
        {
            assert_eq!(segment_index(name), None, "{name}");
        }
    }
}
