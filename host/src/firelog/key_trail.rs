//! The signing key followed through a fire log's key entries.
//!
//! It owns [`KeyTrail`]: which key is in force at each entry (the kept key,
//! handed over by each `key-rotation` the key it replaces signed), the
//! finding of a forged rotation or a `key-lost`, and which key the head must
//! be signed with. It never reads a file: [`super::verify`] walks the log and
//! hands it each entry (those that change no key pass it by).

use ed25519_dalek::VerifyingKey;

use super::key::rotation_signed;
use super::verify::{Finding, finding};
use super::{FireBody, FireEntry, PUBLIC_KEY_FILE, unhex32};

/// The signing key in force as the walk goes: the kept public key (or, when
/// the folder's own `fires.pub.json` is all there is, the key the first key
/// entry says it replaces), handed over by each key-rotation entry signed by
/// the key it replaces. A key entry from a key not in force is no evidence
/// either way and is passed over; a key-lost entry from the key in force
/// hands over too, and is remembered as a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyTrail {
    trusted: Option<[u8; 32]>,
    kept: bool,
    lost: Option<u64>,
}

impl KeyTrail {
    pub(super) fn start(anchor: &VerifyingKey, kept: bool) -> Self {
        KeyTrail { trusted: kept.then(|| anchor.to_bytes()), kept, lost: None }
    }

    /// Follows entry `e` (after `prev`): an entry that changes no key
    /// leaves the trail as it is.
    pub(super) fn step(&mut self, e: &FireEntry, prev: &[u8; 32]) -> Result<(), String> {
        let (change, rotation) = match &e.body {
            FireBody::KeyRotation { key, .. } => (key, true),
            FireBody::KeyLost { key, .. } => (key, false),
            _ => return Ok(()),
        };
        let new = unhex32(&change.public_key)
            .filter(|k| VerifyingKey::from_bytes(k).is_ok())
            .ok_or("its new public key is not an Ed25519 key in hex")?;
        let previous = match change.previous_key.as_deref() {
            Some(p) => Some(unhex32(p).ok_or("its previous public key is not 32 bytes of hex")?),
            None => None,
        };
        if self.trusted.is_some_and(|t| previous != Some(t)) {
            return Ok(());
        }
        if rotation {
            let old = previous
                .and_then(|p| VerifyingKey::from_bytes(&p).ok())
                .ok_or("a key-rotation entry names no previous Ed25519 key")?;
            let signed = change
                .signature
                .as_deref()
                .is_some_and(|sig| rotation_signed(&old, sig, e.seq, prev, &new, e.recorded_at));
            if !signed {
                return Err(
                    "the key-rotation entry is not signed by the key it replaces: it was forged or altered".into()
                );
            }
        } else if self.lost.is_none() {
            self.lost = Some(e.seq);
        }
        self.trusted = Some(new);
        Ok(())
    }

    /// The head signed by the key in force at the end of the log (returned;
    /// `signed_by_anchor` is the head checked with the anchor, `check` checks
    /// it with another key), and no key lost on the way.
    pub(super) fn check_head(
        &self,
        anchor: &VerifyingKey,
        signed_by_anchor: Result<(), Finding>,
        check: impl FnOnce(&VerifyingKey) -> Result<(), Finding>,
    ) -> Result<VerifyingKey, Finding> {
        let signer = match self.trusted.and_then(|k| VerifyingKey::from_bytes(&k).ok()) {
            Some(in_force) if in_force != *anchor => {
                if !self.kept {
                    return Err(finding(
                        Some(PUBLIC_KEY_FILE),
                        None,
                        None,
                        "the published key is not the one the log's last key entry hands over to",
                    ));
                }
                check(&in_force)?;
                in_force
            }
            _ => {
                signed_by_anchor?;
                *anchor
            }
        };
        if let Some(seq) = self.lost {
            return Err(finding(
                None,
                None,
                Some(seq),
                "key-lost: the signing key was replaced here without its signature (the old key was gone), so nothing in the log vouches for the key that signed what follows; once you vouch for it, verify with --public-key naming the fires.pub.json written after the rotation",
            ));
        }
        Ok(signer)
    }
}
