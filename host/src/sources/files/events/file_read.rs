//! One file of the event log read from an offset, one complete line at a
//! time, into the batch.
//!
//! It owns the byte bookkeeping of a read (the offset after each newline,
//! the tail checksum kept from the bytes actually consumed, the first line
//! checked against the fingerprint listed, over-long lines skipped to their
//! end, a partial last line left for the next scan) and the skip of lines
//! delivered before. It never decides where a read starts
//! ([`super::matching`]) and never writes anything.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use super::fingerprint::{FINGERPRINT_BYTES, TAIL_BYTES, append_last, bytes_before, fingerprint_of, short_hash};
use super::line::{Event, Line, parse};
use super::{EventsSource, FileCursor, Tally};
use crate::model::record::BatchBuilder;
use crate::sources::{ReadContext, Sink, SourceError};

/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;

/// One file's read: where its records go and what was delivered before.
pub(super) struct FileRead<'r, 'k> {
    pub source: &'r EventsSource,
    /// The file's name in the folder (the record's `file`).
    pub name: &'r str,
    /// The fingerprint the file had when it was listed.
    pub fp: String,
    /// For a file read again from its start: lines at or below their
    /// thread's mark here are skipped.
    pub skip: Option<&'r BTreeMap<String, i64>>,
    pub ctx: &'r ReadContext<'r>,
    /// The threads' high-water marks, raised as events are delivered.
    pub threads: &'r mut BTreeMap<String, i64>,
    pub builder: &'r mut BatchBuilder,
    pub sink: &'r mut Sink<'k>,
    pub tally: &'r mut Tally,
}

/// Where a read stands in the file's bytes.
struct Position {
    /// Bytes consumed: just after the last newline.
    offset: u64,
    /// The last bytes consumed, for the tail checksum.
    rolling: Vec<u8>,
    /// The file's first bytes, while the read is from the start and short of the window.
    head: Vec<u8>,
    from_start: bool,
    /// The start of a line that began in an earlier chunk.
    pending: Vec<u8>,
    /// The last bytes of the line being read, for the tail checksum.
    line_tail: Vec<u8>,
    /// True while inside a line already over the limit: skip to its end.
    overlong: bool,
}

/// What ended a line.
enum Ended {
    /// A line to parse: `pending` followed by the piece.
    Line,
    /// Over the limit: skipped and counted.
    Overlong,
    /// The first line is not the one listed: the file was replaced meanwhile.
    Replaced,
}

impl Position {
    /// Accounts for `upto_nl` (the rest of a line, its newline included).
    fn end_line(&mut self, upto_nl: &[u8], fp: &str, max_line_bytes: usize) -> Ended {
        let piece = &upto_nl[..upto_nl.len() - 1];
        if self.from_start && self.head.len() < FINGERPRINT_BYTES {
            let first_line = self.head.is_empty();
            self.head.extend_from_slice(&self.line_tail);
            self.head.extend_from_slice(upto_nl);
            if first_line && fingerprint_of(&self.head).as_deref() != Some(fp) {
                return Ended::Replaced;
            }
        }
        append_last(&mut self.rolling, &self.line_tail, TAIL_BYTES as usize);
        append_last(&mut self.rolling, upto_nl, TAIL_BYTES as usize);
        self.line_tail.clear();
        let line_len = self.pending.len() + piece.len();
        self.offset += line_len as u64 + 1;
        if self.overlong || line_len > max_line_bytes {
            self.overlong = false;
            self.pending.clear();
            return Ended::Overlong;
        }
        Ended::Line
    }

    /// The line just ended: `piece` alone, or appended to what came before.
    fn line<'a>(&'a mut self, piece: &'a [u8]) -> &'a [u8] {
        if self.pending.is_empty() {
            piece
        } else {
            self.pending.extend_from_slice(piece);
            &self.pending
        }
    }

    /// Keeps `data`, the start of a line with no newline yet.
    fn partial(&mut self, data: &[u8], max_line_bytes: usize) {
        append_last(&mut self.line_tail, data, TAIL_BYTES as usize);
        if self.overlong || self.pending.len() + data.len() > max_line_bytes {
            self.overlong = true;
            self.pending.clear();
        } else {
            self.pending.extend_from_slice(data);
        }
    }
}

impl FileRead<'_, '_> {
    /// Reads complete lines of `file` from `start` and returns the new cursor;
    /// `None` when the file changed since it was listed (the bytes before
    /// `start` no longer match `prev_tail`, or its first line is another),
    /// so the cursor it had must be kept.
    pub fn read(mut self, file: &mut File, start: u64, prev_tail: &str) -> Result<Option<FileCursor>, SourceError> {
        let path = self.source.folder(self.ctx.data_dir).join(self.name);
        let mut at = Position {
            offset: start,
            rolling: Vec::new(),
            head: Vec::new(),
            from_start: start == 0,
            pending: Vec::new(),
            line_tail: Vec::new(),
            overlong: false,
        };
        if start > 0 {
            match bytes_before(file, start) {
                Ok(pre) if short_hash(&pre) == prev_tail => at.rolling = pre,
                // It changed since the check: keep the cursor as it was. A
                // copy of the old content can still continue it; the changed
                // file is reset by the next scan, skipping what was delivered.
                _ => return Ok(None),
            }
        }
        file.seek(SeekFrom::Start(start)).map_err(|e| self.source.err(&path, e))?;
        let max = self.source.max_line_bytes;
        let mut chunk = vec![0u8; CHUNK];
        loop {
            let n = file.read(&mut chunk).map_err(|e| self.source.err(&path, e))?;
            if n == 0 {
                break;
            }
            let mut data = &chunk[..n];
            while let Some(nl) = memchr::memchr(b'\n', data) {
                let (upto_nl, rest) = data.split_at(nl + 1);
                data = rest;
                match at.end_line(upto_nl, &self.fp, max) {
                    // The file listed is not the file being read: it was
                    // replaced or truncated meanwhile. Read nothing of it now;
                    // the next scan sees the new state whole.
                    Ended::Replaced => return Ok(None),
                    Ended::Overlong => self.tally.skipped += 1,
                    Ended::Line => {
                        let line = at.line(&upto_nl[..nl]);
                        self.on_line(line)?;
                        at.pending.clear();
                    }
                }
            }
            at.partial(data, max);
        }
        // A partial last line (or a partial over-long one) is not consumed.
        Ok(Some(FileCursor { offset: at.offset, fingerprint: self.fp, tail: short_hash(&at.rolling) }))
    }

    fn on_line(&mut self, line: &[u8]) -> Result<(), SourceError> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        match parse(line) {
            Line::Malformed => self.tally.skipped += 1,
            Line::Other => {}
            Line::TurnCompleted(ev) => self.deliver(&ev)?,
        }
        Ok(())
    }

    /// Pushes `ev` unless it was delivered before, raising its thread's mark.
    fn deliver(&mut self, ev: &Event) -> Result<(), SourceError> {
        let thread = ev.thread_id.as_deref().unwrap_or("");
        if let (Some(seen), Some(c)) = (self.skip, ev.created_at)
            && seen.get(thread).is_some_and(|&h| c <= h)
        {
            return Ok(());
        }
        if let Some(c) = ev.created_at {
            match self.threads.get_mut(thread) {
                Some(h) => *h = (*h).max(c),
                None => _ = self.threads.insert(thread.to_owned(), c),
            }
        }
        let stopped = |reason: String| SourceError::Stopped { source_name: self.source.name.clone(), reason };
        self.builder.push_row(&ev.cells(self.name)).map_err(|e| stopped(e.to_string()))?;
        self.tally.records += 1;
        if self.builder.rows() as usize >= self.ctx.batch_rows {
            (self.sink)(self.builder.take()).map_err(stopped)?;
        }
        Ok(())
    }
}
