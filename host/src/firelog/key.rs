//! The fire log's signing key and its published half.
//!
//! It owns the key file (generated on first use from the OS's randomness,
//! `0600` beside the ledger), the key id, `fires.pub.json`'s shape and signing
//! a head. It never reads or writes a segment.

use std::path::{Path, PathBuf};

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Head, KEY_FILE, head_message, unhex32};

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
}

/// The output folder's signing key: read, or generated on first use and kept
/// `0600` beside the ledger. Only the host that holds it can sign.
pub fn signing_key(out: &Path) -> Result<SigningKey, KeyError> {
    let path = out.join(KEY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let seed = unhex32(text.trim()).ok_or_else(|| KeyError::Malformed { path: path.clone() })?;
            Ok(SigningKey::from_bytes(&seed))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed).map_err(KeyError::Random)?;
            crate::base::private_fs::write_atomic(&path, crate::base::hex(&seed).as_bytes())
                .map_err(|source| KeyError::Io { path: path.clone(), source })?;
            Ok(SigningKey::from_bytes(&seed))
        }
        Err(source) => Err(KeyError::Io { path, source }),
    }
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
