//! The chain continued from its export: a store that is behind the exported
//! fire log (a new `ledger.db` after the old one was deleted or lost, or an
//! older copy put back) takes the log's entries from the exported files
//! before anything is appended, so the next fire is entry `count + 1` of the
//! same chain and no exported byte is ever written again.
//!
//! It owns deciding whether the store is behind ([`claimed`]), checking the
//! exported log first (every segment, the chain and the head's signature, as
//! `verify` checks them with the folder's published key, and the head signed
//! with the key this host signs with) and copying its
//! entries, byte for byte, into the store's `fires` table in one transaction
//! with the bookkeeping the next export needs (the closed segments, the head
//! as the anchor, and the count floor that keeps an occurrence those fires
//! counted from being counted again). A log that does not verify, or a store whose entries are
//! not the log's, is refused ([`LedgerError::ExportedLog`]): nothing is
//! copied. It never writes an exported file and never decides a fire.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{OptionalExtension, params};

use crate::firelog::{self, FireBody, FireEntry, HEAD_FILE, Head, SEGMENT_ENTRIES, Verification, segment_name};
use crate::ledger::meta::{self, MetaKey};
use crate::ledger::{Ledger, LedgerError};

/// What the exported files say of the log, read before anything is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::ledger) enum Claimed {
    /// No segment and no head: nothing was ever exported here.
    Nothing,
    /// A head that reads as one, counting this many entries (not yet verified).
    Head(u64),
    /// Segments without a head that reads: a log that cannot be continued
    /// unless the store already holds it.
    Unreadable,
}

/// What the output folder's exported files claim.
pub(in crate::ledger) fn claimed(dir: &Path) -> Claimed {
    let head = std::fs::read_to_string(dir.join(HEAD_FILE)).ok().and_then(|t| serde_json::from_str::<Head>(&t).ok());
    if let Some(head) = head {
        return Claimed::Head(head.count);
    }
    let segments = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("fires-") && n.ends_with(".ndjson")));
    if segments || dir.join(HEAD_FILE).exists() { Claimed::Unreadable } else { Claimed::Nothing }
}

/// Whether a store holding `stored` entries is behind what the files claim.
pub(in crate::ledger) fn behind(stored: u64, claimed: Claimed) -> bool {
    match claimed {
        Claimed::Nothing => false,
        Claimed::Head(count) => count > stored,
        // A head the store can write again (a crash before the first head was
        // written); a store with nothing cannot tell what the segments were.
        Claimed::Unreadable => stored == 0,
    }
}

/// Checks the exported log in `dir` as `verify` does (the folder's own
/// published key), and that its head was signed with the key this host
/// signs with (the one the next export signs with): a log forged and signed
/// with another key, its published key replaced, is never taken in. The
/// verification, or the refusal naming the file.
pub(in crate::ledger) fn verified(dir: &Path) -> Result<Verification, LedgerError> {
    let v = firelog::verify_dir(dir, None);
    match &v.finding {
        None if v.ok
            && let Some(head) = &v.head =>
        {
            let key = crate::ledger::signing::host_key(dir)?.verifying_key();
            if head.public_key != crate::base::hex(key.as_bytes()) {
                let problem = format!(
                    "the head was signed with key {}, not with this host's signing key {}: the log was signed elsewhere",
                    head.kid,
                    firelog::kid(&key)
                );
                return Err(refused(dir, HEAD_FILE, None, None, &problem));
            }
            Ok(v)
        }
        finding => {
            let f = finding.clone().unwrap_or_else(|| firelog::finding(Some(HEAD_FILE), None, None, "no signed head"));
            Err(LedgerError::ExportedLog {
                path: dir.join(f.file.as_deref().unwrap_or(HEAD_FILE)),
                line: f.line,
                seq: f.seq,
                problem: f.problem,
            })
        }
    }
}

/// A new store beside an exported fire log continues that log: it is
/// checked before the store is created (`existed`: it already was), so one
/// that does not verify is refused with nothing written.
pub(in crate::ledger) fn checked_before_creating(
    dir: &Path,
    existed: bool,
) -> Result<Option<Verification>, LedgerError> {
    if existed || !behind(0, claimed(dir)) {
        return Ok(None);
    }
    verified(dir).map(Some)
}

/// What continuing the chain did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Continued {
    /// Entries copied from the exported files into the store.
    pub copied: u64,
    /// The log's length: the next fire is entry `count + 1`.
    pub count: u64,
}

impl Ledger {
    /// [`Ledger::continue_exported_log`], and the open's summary says so
    /// (beside a state reset, if there was one).
    pub(in crate::ledger) fn go_on_from_export(&mut self, verified: Option<Verification>) -> Result<(), LedgerError> {
        if let Some(c) = self.continue_exported_log(verified)? {
            let note = format!(
                "the fire log goes on from its exported head: {} entries copied from the verified files, the next fire is entry {}",
                c.copied,
                c.count + 1
            );
            self.reset = Some(match self.reset.take() {
                Some(reason) => format!("{reason}; {note}"),
                None => note,
            });
        }
        Ok(())
    }

    /// Continues the chain from the exported log when the store is behind
    /// it (see the module); `verified`, when given, is the check the open
    /// made before it created the store. `None`: the store was not behind.
    pub(in crate::ledger) fn continue_exported_log(
        &mut self,
        verified: Option<Verification>,
    ) -> Result<Option<Continued>, LedgerError> {
        let stored = self.fire_count()?;
        if !behind(stored, claimed(&self.dir)) {
            return Ok(None);
        }
        let v = match verified {
            Some(v) => v,
            None => self::verified(&self.dir)?,
        };
        let head = v.head.clone().expect("a verified log has its head");
        let copied = self.copy_exported(stored, &head)?;
        let continued = Continued { copied, count: head.count };
        tracing::warn!(
            dir = %self.dir.display(),
            copied,
            count = head.count,
            "the ledger was behind the exported fire log: its entries were copied from the verified files, the chain goes on"
        );
        Ok(Some(continued))
    }

    /// Copies the exported entries after `stored` into the store, checking
    /// each against the chain again as it goes (the files are read a second
    /// time), with the bookkeeping the next export needs; one transaction.
    fn copy_exported(&mut self, stored: u64, head: &Head) -> Result<u64, LedgerError> {
        let dir = self.dir.clone();
        let db = self.db_path.clone();
        let e =
            move |source| LedgerError::Store { path: db.clone(), action: "cannot copy the exported fire log", source };
        let mut prev: Option<[u8; 32]> = None;
        if stored > 0 {
            let hash: Option<String> = self
                .conn
                .query_row("SELECT hash FROM fires WHERE seq = ?1", [stored as i64], |r| r.get(0))
                .optional()
                .map_err(&e)?;
            prev = Some(hash.as_deref().and_then(firelog::unhex32).unwrap_or([0; 32]));
        }
        let tx = self.conn.transaction().map_err(&e)?;
        let mut chain =
            Chain { dir: &dir, seq: 0, prev: [0; 32], stored, stored_hash: prev, copied: 0, floors: HashMap::new() };
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO fires(seq, hash, line, detector, kind, type) VALUES(?1, ?2, ?3,
                    json_extract(?3, '$.detector'), json_extract(?3, '$.kind'), json_extract(?3, '$.type'))",
                )
                .map_err(&e)?;
            for index in 1..=head.count.div_ceil(SEGMENT_ENTRIES) {
                chain.segment(index, &mut |seq, hash, line| {
                    insert.execute(params![seq as i64, hash, line]).map(drop).map_err(&e)
                })?;
            }
        }
        if chain.seq != head.count || crate::base::hex(&chain.prev) != head.hash {
            return Err(refused(&dir, HEAD_FILE, None, Some(chain.seq), "the log changed while it was copied"));
        }
        let head_json = serde_json::to_string_pretty(head)
            .map_err(|e| LedgerError::Export { path: dir.join(HEAD_FILE), source: std::io::Error::other(e) })?;
        // An occurrence the copied fires counted is never counted again,
        // whatever the store remembers of it: the reset rule's floor, per kind.
        for (kind, at) in &chain.floors {
            tx.execute(
                "INSERT INTO count_floor(kind, at) VALUES(?1, ?2) ON CONFLICT(kind) DO UPDATE SET at = MAX(at, excluded.at)",
                params![kind, at],
            )
            .map_err(&e)?;
        }
        let closed = (head.count / SEGMENT_ENTRIES).to_string();
        for (key, value) in [(MetaKey::FiresClosed, closed), (MetaKey::FiresHead, head_json)] {
            meta::write(&tx, &key, Some(&value)).map_err(&e)?;
        }
        // What the files look like is for the next export to record.
        meta::write(&tx, &MetaKey::FiresFiles, None).map_err(&e)?;
        tx.commit().map_err(&e)?;
        Ok(chain.copied)
    }
}

/// The chain as the copy reads it, segment by segment.
struct Chain<'a> {
    dir: &'a Path,
    seq: u64,
    prev: [u8; 32],
    /// Entries the store already holds, and the hash of its last one.
    stored: u64,
    stored_hash: Option<[u8; 32]>,
    copied: u64,
    /// The newest occurrence each kind's copied fires counted, ms.
    floors: HashMap<String, i64>,
}

impl Chain<'_> {
    /// Reads segment `index`, handing every entry after the stored ones to `put`.
    fn segment(
        &mut self,
        index: u64,
        put: &mut dyn FnMut(u64, &str, &str) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        let name = segment_name(index);
        let text = std::fs::read_to_string(self.dir.join(&name))
            .map_err(|err| refused(self.dir, &name, None, None, &format!("cannot read: {err}")))?;
        // Split on `\n` alone: the line kept is the file's bytes, so the
        // segment written again from the store starts with them exactly.
        let mut lines: Vec<&str> = text.split('\n').collect();
        if lines.last() == Some(&"") {
            lines.pop();
        }
        for (n, line) in (1..).zip(lines) {
            self.seq += 1;
            let seq = self.seq;
            let bad = |p: &str| refused(self.dir, &name, Some(n), Some(seq), p);
            let entry: FireEntry =
                serde_json::from_str(line).map_err(|err| bad(&format!("not a fire entry: {err}")))?;
            let hash = entry.compute_hash(&self.prev);
            if entry.seq != seq || entry.prev != crate::base::hex(&self.prev) || entry.hash != crate::base::hex(&hash) {
                return Err(bad("the entry no longer chains: the log changed while it was copied"));
            }
            self.prev = hash;
            if seq == self.stored && self.stored_hash.is_some_and(|h| h != hash) {
                return Err(bad("the ledger's entry differs from the exported one: ledger.db holds another log"));
            }
            if seq > self.stored {
                put(seq, &entry.hash, line)?;
                self.copied += 1;
                if let FireBody::Occurrence { kind, .. } | FireBody::Regression { kind, .. } = &entry.body {
                    let floor = self.floors.entry(kind.clone()).or_insert(entry.at);
                    *floor = (*floor).max(entry.at);
                }
            }
        }
        Ok(())
    }
}

fn refused(dir: &Path, file: &str, line: Option<u64>, seq: Option<u64>, problem: &str) -> LedgerError {
    LedgerError::ExportedLog { path: dir.join(file), line, seq, problem: problem.to_owned() }
}

/// Where a refusal points, as the error shows it.
pub(in crate::ledger) fn place(path: &Path, line: &Option<u64>, seq: &Option<u64>) -> String {
    let mut s = path.display().to_string();
    if let Some(l) = line {
        s.push_str(&format!(", line {l}"));
    }
    if let Some(q) = seq {
        s.push_str(&format!(", entry {q}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::ledger::{STORE_FILE, ScanCommit, verify_out_dir};
    use crate::model::observation::Observation;

    fn obs(i: i64) -> Observation {
        Observation::numbered(i as usize)
    }

    /// One scan of occurrences `from..to`, through the tally (segments a
    /// scan closes are written ahead, as a real scan writes them).
    fn scan(l: &mut Ledger, from: i64, to: i64, at: i64) -> crate::ledger::CommitReport {
        let o: Vec<Observation> = (from..to).map(obs).collect();
        l.begin_scan(at, BTreeMap::new()).unwrap();
        l.stage(o.iter().map(Observation::view)).unwrap();
        l.commit(ScanCommit { scan_time: at, ..Default::default() }).unwrap()
    }

    /// Every fire-log file in `dir`, by name, with its bytes.
    fn log_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("fires"))
            .map(|n| (n.clone(), std::fs::read(dir.join(&n)).unwrap()))
            .collect()
    }

    fn delete_store(dir: &Path) {
        for f in [STORE_FILE, "ledger.db-wal", "ledger.db-shm"] {
            let _ = std::fs::remove_file(dir.join(f));
        }
    }

    #[test]
    fn a_deleted_store_continues_the_chain_and_never_writes_an_exported_byte_again() {
        let dir = tempfile::tempdir().unwrap();
        {
            // Ten fires, four a segment: 1 and 2 closed, 3 open with two.
            let mut l = Ledger::open(dir.path()).unwrap();
            scan(&mut l, 0, 10, 10);
        }
        let before = log_files(dir.path());
        #[cfg(unix)]
        let open_inode = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(dir.path().join(segment_name(3))).unwrap().ino()
        };
        delete_store(dir.path());
        let mut l = Ledger::open(dir.path()).unwrap();
        assert_eq!(l.fire_count().unwrap(), 10, "the exported entries are the store's again");
        assert!(l.reset_reason().unwrap().contains("the next fire is entry 11"), "{:?}", l.reset_reason());
        // Seen again (m0..m9) and new (m10..m17): only the new are fires.
        let r = scan(&mut l, 0, 18, 20);
        assert_eq!(r.counted, 8, "{r:?}");
        assert_eq!(l.fire_count().unwrap(), 18);
        let after = log_files(dir.path());
        for seg in 1..=3 {
            let name = segment_name(seg);
            assert!(after[&name].starts_with(&before[&name]), "{name}: an exported byte was written again");
        }
        assert_eq!(after[&segment_name(1)], before[&segment_name(1)]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let now = std::fs::metadata(dir.path().join(segment_name(3))).unwrap().ino();
            assert_eq!(now, open_inode, "the open segment was appended to, not replaced");
        }
        let v = verify_out_dir(dir.path(), None);
        assert!(v.ok && v.entries == 18 && v.ledger_checked, "{v:?}");
    }

    #[test]
    fn an_exported_log_that_does_not_verify_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut l = Ledger::open(dir.path()).unwrap();
            scan(&mut l, 0, 10, 10);
        }
        let seg = dir.path().join(segment_name(2));
        let text = std::fs::read_to_string(&seg).unwrap().replacen("\"m5\"", "\"m9\"", 1);
        std::fs::write(&seg, text).unwrap();
        delete_store(dir.path());
        let before = log_files(dir.path());
        let err = Ledger::open(dir.path()).unwrap_err();
        let LedgerError::ExportedLog { path, line, .. } = &err else { panic!("{err}") };
        assert_eq!((path, *line), (&seg, Some(2)), "{err}");
        assert!(err.to_string().contains("altered") && err.to_string().contains("nothing was written"), "{err}");
        assert!(!dir.path().join(STORE_FILE).exists(), "no store was created");
        assert_eq!(log_files(dir.path()), before);
        // A head gone with the store: the segments alone cannot be continued.
        std::fs::write(&seg, std::fs::read_to_string(&seg).unwrap().replacen("\"m9\"", "\"m5\"", 1)).unwrap();
        std::fs::remove_file(dir.path().join(HEAD_FILE)).unwrap();
        let err = Ledger::open(dir.path()).unwrap_err();
        assert!(matches!(&err, LedgerError::ExportedLog { path, .. } if path.ends_with(HEAD_FILE)), "{err}");
    }

    #[test]
    fn an_older_store_put_back_takes_the_entries_it_lacks_and_counts_none_again() {
        let dir = tempfile::tempdir().unwrap();
        let old = tempfile::tempdir().unwrap();
        {
            let mut l = Ledger::open(dir.path()).unwrap();
            scan(&mut l, 0, 6, 10);
        }
        std::fs::copy(dir.path().join(STORE_FILE), old.path().join(STORE_FILE)).unwrap();
        {
            let mut l = Ledger::open(dir.path()).unwrap();
            scan(&mut l, 6, 11, 20);
        }
        delete_store(dir.path());
        std::fs::copy(old.path().join(STORE_FILE), dir.path().join(STORE_FILE)).unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        assert_eq!(l.fire_count().unwrap(), 11);
        // m6..m10 were counted after the copy was made: never again.
        let r = scan(&mut l, 0, 12, 30);
        assert_eq!(r.counted, 1, "{r:?}");
        let v = verify_out_dir(dir.path(), None);
        assert!(v.ok && v.entries == 12, "{v:?}");
    }

    #[test]
    fn a_store_that_holds_another_log_is_refused() {
        let (dir, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        {
            let mut l = Ledger::open(dir.path()).unwrap();
            scan(&mut l, 0, 10, 10);
            let mut o = Ledger::open(other.path()).unwrap();
            scan(&mut o, 100, 103, 10);
        }
        delete_store(dir.path());
        std::fs::copy(other.path().join(STORE_FILE), dir.path().join(STORE_FILE)).unwrap();
        let err = Ledger::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("ledger.db holds another log"), "{err}");
    }

    #[test]
    fn a_log_signed_with_another_key_than_the_hosts_is_never_taken_in() {
        use crate::firelog::{PUBLIC_KEY_FILE, PublicKeyFile, sign_head};
        let dir = tempfile::tempdir().unwrap();
        {
            let mut l = Ledger::open(dir.path()).unwrap();
            scan(&mut l, 0, 6, 10);
        }
        // The forger: the head signed again with a key of their own, its
        // public half published in place of the host's; the ledger deleted.
        let head: Head = serde_json::from_str(&std::fs::read_to_string(dir.path().join(HEAD_FILE)).unwrap()).unwrap();
        let forger = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
        let forged = sign_head(&forger, head.count, &firelog::unhex32(&head.hash).unwrap(), head.signed_at);
        std::fs::write(dir.path().join(HEAD_FILE), serde_json::to_string(&forged).unwrap()).unwrap();
        let public = PublicKeyFile::of(&forger.verifying_key());
        std::fs::write(dir.path().join(PUBLIC_KEY_FILE), serde_json::to_string(&public).unwrap()).unwrap();
        assert!(firelog::verify_dir(dir.path(), None).ok, "self-consistent with the forged key");
        delete_store(dir.path());
        let err = Ledger::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not with this host's signing key"), "{err}");
        assert!(!dir.path().join(STORE_FILE).exists());
    }

    #[test]
    fn a_store_ahead_of_its_export_or_level_with_it_copies_nothing() {
        assert!(!behind(5, Claimed::Head(5)) && !behind(6, Claimed::Head(5)) && !behind(0, Claimed::Nothing));
        assert!(behind(4, Claimed::Head(5)) && behind(0, Claimed::Unreadable) && !behind(3, Claimed::Unreadable));
    }
}
