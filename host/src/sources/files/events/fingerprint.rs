//! What identifies an event log's file across renames and copies: the
//! fingerprint of its first line, and the checksum of the bytes just before
//! a cursor's offset.
//!
//! It owns the content test that says a file *continues* a cursor (same
//! first line, same bytes before the offset). It never decides which cursor
//! a file takes ([`super::matching`]) and never parses a line.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use sha2::{Digest, Sha256};

use super::FileCursor;

/// Bytes of the first line hashed into the fingerprint.
pub(super) const FINGERPRINT_BYTES: usize = 4096;
/// Bytes before the offset whose checksum proves the file still holds what was read.
pub(super) const TAIL_BYTES: u64 = 64;

pub(super) fn short_hash(bytes: &[u8]) -> String {
    crate::base::hex(&Sha256::digest(bytes)[..8])
}

/// The fingerprint of a file's first complete line, if it has one.
pub(super) fn fingerprint(file: &mut File) -> std::io::Result<Option<String>> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; FINGERPRINT_BYTES];
    let mut filled = 0;
    while filled < buf.len() {
        let n = file.read(&mut buf[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(fingerprint_of(&buf[..filled]))
}

/// The fingerprint of the first line in `head` (the first bytes of a file).
pub(super) fn fingerprint_of(head: &[u8]) -> Option<String> {
    let head = &head[..head.len().min(FINGERPRINT_BYTES)];
    match head.iter().position(|&b| b == b'\n') {
        Some(nl) => Some(short_hash(&head[..nl])),
        // A first line longer than the window is fingerprinted by the window.
        None if head.len() == FINGERPRINT_BYTES => Some(short_hash(head)),
        None => None,
    }
}

/// Appends `more` to `buf` and keeps only the last `n` bytes of the two,
/// copying no more of `more` than is kept.
pub(super) fn append_last(buf: &mut Vec<u8>, more: &[u8], n: usize) {
    if more.len() >= n {
        buf.clear();
        buf.extend_from_slice(&more[more.len() - n..]);
        return;
    }
    buf.extend_from_slice(more);
    if buf.len() > n {
        buf.drain(..buf.len() - n);
    }
}

/// The bytes (up to [`TAIL_BYTES`]) before `offset`.
pub(super) fn bytes_before(file: &mut File, offset: u64) -> std::io::Result<Vec<u8>> {
    let start = offset.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut buf = vec![0u8; (offset - start) as usize];
    file.read_exact(&mut buf)?;
    Ok(buf)
}

/// Whether `file` (of `len` bytes, first line `fp`) continues `cursor`.
pub(super) fn continues(file: &mut File, len: u64, fp: &str, cursor: &FileCursor) -> bool {
    cursor.fingerprint == fp
        && len >= cursor.offset
        && bytes_before(file, cursor.offset).is_ok_and(|b| short_hash(&b) == cursor.tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the pieces' lengths, what is kept is the last `n` bytes of
    /// everything appended, as appending it all and cutting would keep.
    #[test]
    fn append_last_keeps_the_last_bytes_of_everything_appended() {
        let pieces: [&[u8]; 6] = [b"abc", b"", b"defghijk", b"l", b"mnopqrstuvwxyz0123", b"45"];
        for n in [0, 1, 4, 8, 20, 64] {
            let (mut kept, mut all) = (Vec::new(), Vec::new());
            for p in pieces {
                append_last(&mut kept, p, n);
                all.extend_from_slice(p);
                assert_eq!(kept, all[all.len().saturating_sub(n)..], "n = {n}, after {:?}", String::from_utf8_lossy(p));
            }
        }
    }
}
