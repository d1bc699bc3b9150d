//! The key the ledger signs its exported heads with: opened from its file
//! outside the output folder, and replaced on purpose.
//!
//! It owns deciding whether a missing key may be made (only for a folder
//! with no signed log yet: no fire and no head in the store, no head or
//! segment in the folder), finishing a rotation a crash interrupted (the next
//! key put in place when its entry was committed, dropped when not), and
//! `key rotate`: a `key-rotation` entry signed by the old key, or a
//! `key-lost` entry when it is gone, appended in a transaction of its own,
//! then the head signed with the new key. Where the key file is and how it
//! is checked is [`crate::firelog::key_file`]'s. It never touches the data dir.

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use rusqlite::OptionalExtension;
use serde::Serialize;

use super::export::segments::Appender;
use super::{Ledger, LedgerError};
use crate::firelog::{
    self, FireBody, FireEntry, FireType, HEAD_FILE, KeyChange, KeyError, KeyFile, KeyOpened, PUBLIC_KEY_FILE,
    PublicKeyFile,
};

/// The name key entries carry as their `detector`: the host itself.
pub const HOST: &str = "sentinel-host";

/// What `key rotate` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyRotated {
    pub out_dir: PathBuf,
    pub key_file: PathBuf,
    /// The new key's id.
    pub kid: String,
    /// The id of the key it replaces, when one was known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_kid: Option<String>,
    /// The entry that records it (`key-rotation` or `key-lost`); none for a
    /// folder with no signed log and no key yet (nothing to hand over).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<FireType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fire_seq: Option<u64>,
}

fn key_err(e: KeyError) -> LedgerError {
    LedgerError::Key(Box::new(e))
}

impl Ledger {
    /// Opens the signing key of this folder (`given`, else its default key
    /// file: [`KeyFile::locate`]), moving an older folder's key out first;
    /// a missing key is made only when the folder holds no signed log yet.
    /// Every head from now on is signed with it.
    pub fn open_signing_key(&mut self, given: Option<&Path>) -> Result<KeyOpened, LedgerError> {
        let file = KeyFile::locate(&self.dir, given).map_err(key_err)?;
        self.finish_rotation(&file)?;
        let opened = file.open(self.has_signed_log()?).map_err(key_err)?;
        if let Some(notice) = opened.notice() {
            tracing::debug!("{notice}");
        }
        self.signer = Some(opened.key.clone());
        Ok(opened)
    }

    /// The key to sign with: the one opened, else this folder's default
    /// (in this crate's unit tests, a key of the process's own per folder,
    /// so that no test writes into the user's config folder).
    pub(super) fn signing_key(&mut self) -> Result<SigningKey, LedgerError> {
        if let Some(key) = &self.signer {
            return Ok(key.clone());
        }
        #[cfg(test)]
        let key = test_key(&self.dir);
        #[cfg(not(test))]
        let key = self.open_signing_key(None)?.key;
        self.signer = Some(key.clone());
        Ok(key)
    }

    /// Whether this folder already holds a signed log: a fire or a signed
    /// head in the store, or a head or a first segment in the folder.
    fn has_signed_log(&self) -> Result<bool, LedgerError> {
        Ok(self.fire_count()? > 0
            || self.fire_head()?.is_some()
            || self.dir.join(HEAD_FILE).exists()
            || self.dir.join(firelog::segment_name(1)).exists())
    }

    /// A rotation's next key left beside the key file: put in place when
    /// the store's last key entry names it, removed when not.
    fn finish_rotation(&self, file: &KeyFile) -> Result<(), LedgerError> {
        let Some(next) = file.read_next().map_err(key_err)? else { return Ok(()) };
        let public = crate::base::hex(next.verifying_key().as_bytes());
        let committed = self.last_key_change()?.is_some_and(|k| k.public_key == public);
        let done = if committed { file.commit_next() } else { file.drop_next() };
        done.map_err(key_err)
    }

    /// The key named by the store's last key entry.
    fn last_key_change(&self) -> Result<Option<KeyChange>, LedgerError> {
        let line: Option<String> = self
            .conn
            .query_row(
                "SELECT line FROM fires WHERE line LIKE '%\"type\":\"key-%' ORDER BY seq DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err("cannot read the fire log"))?;
        Ok(line.and_then(|l| serde_json::from_str::<FireEntry>(&l).ok()).and_then(|e| e.body.key().cloned()))
    }

    /// The public key of the last head signed: the store's copy, else the
    /// folder's `fires.pub.json`.
    fn last_public_key(&self) -> Result<Option<String>, LedgerError> {
        if let Some(head) = self.fire_head()? {
            return Ok(Some(head.public_key));
        }
        let published = std::fs::read_to_string(self.dir.join(PUBLIC_KEY_FILE)).ok();
        Ok(published.and_then(|t| serde_json::from_str::<PublicKeyFile>(&t).ok()).map(|p| p.public_key))
    }

    /// Replaces the signing key on purpose (`key rotate`), at `at`: a new
    /// key, and a `key-rotation` entry signed by the old one when it is
    /// there, a `key-lost` entry when it is gone; then the head, signed by
    /// the new key. The new key is written beside the key file first and put
    /// in place once its entry is committed (a crash in between is finished
    /// by the next open).
    pub fn rotate_key(&mut self, given: Option<&Path>, at: i64) -> Result<KeyRotated, LedgerError> {
        let file = KeyFile::locate(&self.dir, given).map_err(key_err)?;
        self.finish_rotation(&file)?;
        let old = file.read().map_err(key_err)?;
        let new = firelog::generate().map_err(key_err)?;
        let new_public = new.verifying_key();
        let previous = match &old {
            Some(k) => Some(crate::base::hex(k.verifying_key().as_bytes())),
            None => self.last_public_key()?,
        };
        let mut rotated = KeyRotated {
            out_dir: self.dir.clone(),
            key_file: file.path().to_owned(),
            kid: firelog::kid(&new_public),
            previous_kid: previous.as_deref().and_then(kid_of_hex),
            recorded: None,
            fire_seq: None,
        };
        if old.is_none() && !self.has_signed_log()? {
            file.write(&new).map_err(key_err)?;
            self.signer = Some(new);
            return Ok(rotated);
        }
        file.write_next(&new).map_err(key_err)?;
        let fire_type = if old.is_some() { FireType::KeyRotation } else { FireType::KeyLost };
        let path = self.db_path.clone();
        let e = move |source| LedgerError::Store { path: path.clone(), action: "cannot record the key change", source };
        let tx = self.conn.transaction().map_err(&e)?;
        let mut appender = Appender::open(&tx).map_err(&e)?;
        let (seq, prev) = appender.next_position();
        let signature = old.as_ref().map(|o| firelog::sign_rotation(o, seq, &prev, &new_public, at));
        let change =
            KeyChange { previous_key: previous, public_key: crate::base::hex(new_public.as_bytes()), signature };
        let entry = key_entry(fire_type, at, change, &rotated);
        appender.append(&tx, entry.view()).map_err(&e)?;
        appender.flush(&tx).map_err(&e)?;
        tx.commit().map_err(&e)?;
        file.commit_next().map_err(key_err)?;
        self.signer = Some(new);
        self.export_fires(at)?;
        (rotated.recorded, rotated.fire_seq) = (Some(fire_type), Some(seq));
        Ok(rotated)
    }
}

fn kid_of_hex(public: &str) -> Option<String> {
    let bytes = firelog::unhex32(public)?;
    ed25519_dalek::VerifyingKey::from_bytes(&bytes).ok().map(|k| firelog::kid(&k))
}

/// A key entry: the host's, with the keys named in `reason` for a reader.
fn key_entry(fire_type: FireType, at: i64, change: KeyChange, rotated: &KeyRotated) -> FireEntry {
    let from = rotated.previous_kid.as_deref().unwrap_or("an unknown key");
    let reason = match fire_type {
        FireType::KeyRotation => format!("rotated by the operator: {from} hands over to {}", rotated.kid),
        _ => format!("the signing key {from} was gone; {} replaces it, vouched for by nothing in the log", rotated.kid),
    };
    let body = match fire_type {
        FireType::KeyRotation => FireBody::KeyRotation { reason, key: change },
        _ => FireBody::KeyLost { reason, key: change },
    };
    super::count::fires::fact_fire(HOST, at, None, body)
}

/// The key this host signs `dir`'s log with, before a [`Ledger`] is open
/// (a new store checking the exported log it continues): the folder's
/// default key file, which must exist since the folder holds a signed log
/// (in this crate's unit tests, the process's own key for the folder).
pub(in crate::ledger) fn host_key(dir: &Path) -> Result<SigningKey, LedgerError> {
    #[cfg(test)]
    return Ok(test_key(dir));
    #[cfg(not(test))]
    {
        let file = KeyFile::locate(dir, None).map_err(key_err)?;
        Ok(file.open(true).map_err(key_err)?.key)
    }
}

#[cfg(test)]
fn test_key(dir: &Path) -> SigningKey {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    static KEYS: Mutex<BTreeMap<PathBuf, [u8; 32]>> = Mutex::new(BTreeMap::new());
    let mut keys = KEYS.lock().unwrap_or_else(|e| e.into_inner());
    let seed = *keys.entry(dir.to_owned()).or_insert_with(|| firelog::generate().unwrap().to_bytes());
    SigningKey::from_bytes(&seed)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::ledger::ScanCommit;

    fn ledger_with_key() -> (tempfile::TempDir, PathBuf, Ledger) {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        crate::base::private_fs::create_dir(&out).unwrap();
        let key = tmp.path().join("keys/k.ed25519");
        let mut l = Ledger::open(&out).unwrap();
        l.open_signing_key(Some(&key)).unwrap();
        l.commit(ScanCommit { scan_time: 10, ..Default::default() }).unwrap();
        (tmp, key, l)
    }

    #[test]
    fn a_missing_key_with_a_signed_log_is_refused_and_not_made() {
        let (_tmp, key, l) = ledger_with_key();
        let out = l.dir().to_owned();
        drop(l);
        std::fs::remove_file(&key).unwrap();
        let mut l = Ledger::open(&out).unwrap();
        let err = l.open_signing_key(Some(&key)).unwrap_err();
        assert!(err.to_string().contains("k.ed25519") && err.to_string().contains("key rotate"), "{err}");
        assert!(!key.exists());
    }

    #[test]
    fn a_rotation_hands_over_to_the_new_key_and_a_kept_key_still_verifies() {
        let (tmp, key, mut l) = ledger_with_key();
        let kept = tmp.path().join("kept.pub.json");
        std::fs::copy(l.dir().join(PUBLIC_KEY_FILE), &kept).unwrap();
        let r = l.rotate_key(Some(&key), 20).unwrap();
        assert_eq!((r.recorded, r.fire_seq), (Some(FireType::KeyRotation), Some(1)));
        l.commit(ScanCommit { scan_time: 30, ..Default::default() }).unwrap();
        let v = crate::ledger::verify_out_dir(l.dir(), Some(&kept));
        assert!(v.ok, "{v:?}");
        assert_eq!(v.head.unwrap().kid, r.kid, "the head is signed by the new key");
        assert!(!file_next(&key).exists());
    }

    #[test]
    fn a_lost_key_is_a_finding_until_the_new_key_is_vouched_for() {
        let (tmp, key, mut l) = ledger_with_key();
        let kept = tmp.path().join("kept.pub.json");
        std::fs::copy(l.dir().join(PUBLIC_KEY_FILE), &kept).unwrap();
        std::fs::remove_file(&key).unwrap();
        let r = l.rotate_key(Some(&key), 20).unwrap();
        assert_eq!(r.recorded, Some(FireType::KeyLost));
        for public_key in [None, Some(kept.as_path())] {
            let v = crate::ledger::verify_out_dir(l.dir(), public_key);
            let f = v.finding.expect("a lost key is a finding");
            assert!(f.problem.contains("key-lost") && f.seq == Some(1), "{f:?}");
        }
        // The operator vouches for the new key by keeping its public half.
        let vouched = tmp.path().join("new.pub.json");
        std::fs::copy(l.dir().join(PUBLIC_KEY_FILE), &vouched).unwrap();
        assert!(crate::ledger::verify_out_dir(l.dir(), Some(&vouched)).ok);
    }

    #[test]
    fn a_rotation_a_crash_cut_short_is_finished_or_dropped_at_the_next_open() {
        let (_tmp, key, mut l) = ledger_with_key();
        let old = std::fs::read(&key).unwrap();
        let r = l.rotate_key(Some(&key), 20).unwrap();
        // The crash: the entry committed, the next key not yet in place.
        std::fs::rename(&key, file_next(&key)).unwrap();
        std::fs::write(&key, &old).unwrap();
        crate::base::private_fs::restrict(&key);
        let opened = l.open_signing_key(Some(&key)).unwrap();
        assert_eq!(firelog::kid(&opened.key.verifying_key()), r.kid, "the committed rotation's key is in place");
        assert!(!file_next(&key).exists());
        // A next key whose entry never committed is dropped.
        KeyFile::locate(l.dir(), Some(&key)).unwrap().write_next(&firelog::generate().unwrap()).unwrap();
        let opened = l.open_signing_key(Some(&key)).unwrap();
        assert_eq!(firelog::kid(&opened.key.verifying_key()), r.kid);
        assert!(!file_next(&key).exists());
    }

    fn file_next(key: &Path) -> PathBuf {
        KeyFile::locate(Path::new("/nonexistent-out"), Some(key)).unwrap().next_path()
    }
}
