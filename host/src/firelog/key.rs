//! The fire log's signing key and its published half.
//!
//! It owns the key id, `fires.pub.json`'s shape, signing a head, a new key
//! from the OS's randomness, and what a key-rotation entry's signature
//! covers. Where the key file lives and how it is opened is [`super::key_file`]'s.
//! It never reads or writes a segment.

use std::path::{Path, PathBuf};

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Head, head_message, unhex32};

/// The published key id: `sidecar-v1-{first 8 hex of sha256(public key)}`.
pub fn kid(public_key: &VerifyingKey) -> String {
    format!("sidecar-v1-{}", &crate::base::hex(&Sha256::digest(public_key.as_bytes()))[..8])
}

/// The public half, as `fires.pub.json` publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicKeyFile {
    pub alg: String,
    pub kid: String,
    pub public_key: String,
}

impl PublicKeyFile {
    pub fn of(key: &VerifyingKey) -> Self {
        PublicKeyFile { alg: "Ed25519".into(), kid: kid(key), public_key: crate::base::hex(key.as_bytes()) }
    }
}

/// What a key-rotation or key-lost entry says about the signing key: the
/// key in force before (hex; absent in a key-lost entry when no head was
/// ever signed), the key from this entry on (hex), and, in a key-rotation
/// entry, the old key's Ed25519 signature over [`rotation_message`] (hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_key: Option<String>,
    pub public_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read or create the signing key {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a signing key (32 bytes of hex expected); it was left untouched")]
    Malformed { path: PathBuf },
    #[error("no randomness for a new signing key")]
    Random(#[source] getrandom::Error),
    #[error(
        "the signing key {path} is missing, and the output folder {out} already holds a signed fire log: a new key is never made silently (it would sign a log nobody can tell from a forgery); put the key file back, name it with --key-file (or `key_file` under [fire_log] in the config file), or replace it on purpose with `sentinel-host key rotate`, which records a key-lost entry"
    )]
    Missing { path: PathBuf, out: PathBuf },
    #[error("the signing key {path} is refused: {problem}; it was left untouched")]
    Unsafe { path: PathBuf, problem: String },
    #[error(
        "two signing keys: {moved} (the output folder's, from an older release) and {path} differ; keep the one whose public half is the folder's fires.pub.json and move the other away"
    )]
    TwoKeys { moved: PathBuf, path: PathBuf },
    #[error(
        "the signing key {path} would lie inside the output folder {out}, which is what hands it out with the log; name a key file elsewhere with --key-file"
    )]
    InsideOutput { path: PathBuf, out: PathBuf },
    #[error(
        "the signing key {path} would lie inside the data dir {data_dir}, which sentinel never writes; name a key file elsewhere with --key-file (or set XDG_CONFIG_HOME outside the data dir)"
    )]
    InsideDataDir { path: PathBuf, data_dir: PathBuf },
    #[error("no default folder for the signing key: neither XDG_CONFIG_HOME nor HOME is set; pass --key-file")]
    NoHome,
}

const ROTATION_DOMAIN: &[u8] = b"sentinel-key-rotation-v1\0";

/// The bytes the old key signs in a key-rotation entry: the 25 bytes
/// `sentinel-key-rotation-v1\0`, the entry's `seq` (8 bytes, big-endian),
/// the previous entry's hash (32 raw bytes), the new public key (32 raw
/// bytes) and `recordedAt` (8 bytes, big-endian, signed). It ties the new key
/// to one place in one chain.
pub fn rotation_message(seq: u64, prev: &[u8; 32], new_key: &[u8; 32], recorded_at: i64) -> Vec<u8> {
    let mut m = ROTATION_DOMAIN.to_vec();
    m.extend(seq.to_be_bytes());
    m.extend(prev);
    m.extend(new_key);
    m.extend(recorded_at.to_be_bytes());
    m
}

/// The old key's signature handing over to `new_key` at entry `seq` after `prev`.
pub fn sign_rotation(old: &SigningKey, seq: u64, prev: &[u8; 32], new_key: &VerifyingKey, recorded_at: i64) -> String {
    crate::base::hex(&old.sign(&rotation_message(seq, prev, new_key.as_bytes(), recorded_at)).to_bytes())
}

/// Whether `signature` (hex) is `old`'s over the rotation to `new_key`.
pub(super) fn rotation_signed(
    old: &VerifyingKey,
    signature: &str,
    seq: u64,
    prev: &[u8; 32],
    new_key: &[u8; 32],
    recorded_at: i64,
) -> bool {
    let Some(sig) = super::unhex(signature).and_then(|v| <[u8; 64]>::try_from(v).ok()) else { return false };
    old.verify_strict(&rotation_message(seq, prev, new_key, recorded_at), &ed25519_dalek::Signature::from_bytes(&sig))
        .is_ok()
}

/// A new signing key from the OS's randomness.
pub fn generate() -> Result<SigningKey, KeyError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(KeyError::Random)?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The key a key file's text holds (32 bytes of hex).
pub(super) fn parse_key(text: &str, path: &Path) -> Result<SigningKey, KeyError> {
    let seed = unhex32(text.trim()).ok_or_else(|| KeyError::Malformed { path: path.to_owned() })?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Signs a head of `count` entries ending in `hash`.
pub fn sign_head(key: &SigningKey, count: u64, hash: &[u8; 32], signed_at: i64) -> Head {
    let signature = key.sign(&head_message(count, hash, signed_at));
    let public = key.verifying_key();
    Head {
        format: "sentinel-fire-head-v1".into(),
        count,
        hash: crate::base::hex(hash),
        signed_at,
        kid: kid(&public),
        public_key: crate::base::hex(public.as_bytes()),
        signature: crate::base::hex(&signature.to_bytes()),
    }
}
