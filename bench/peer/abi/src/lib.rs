//! The benchmark peer's guest side: a shipped detector behind a hand-written
//! pointer/length ABI instead of the component model's canonical ABI.
//!
//! Owns the four exports [`export_peer!`] makes and the layouts they read
//! and write (the host's half is `sentinel_bench::peer`):
//!
//! - `peer_alloc(size, align) -> ptr`: memory from the guest's allocator,
//!   which the host fills (as the canonical ABI's `cabi_realloc`).
//! - `peer_start(ptr, len) -> result`: the scan context, one buffer
//!   ([`decode_context`]).
//! - `peer_push(desc) -> result`: one batch, its lists in allocations of
//!   their own named by a descriptor of `u32` words ([`BATCH_WORDS`]),
//!   taken over without a copy, as the canonical ABI's lifting does.
//! - `peer_finish() -> result`.
//!
//! A result is `(ptr << 32) | len` of a header of `u32` words
//! ([`HEADER_WORDS`]) that names, in place, the lists of the
//! `observations` record the SDK packed; they stay valid until the next
//! call, and the host reads them where they lie. Everything between the
//! ABI and the detector is the SDK's own adapter (`sentinel_sdk::__private`),
//! the code the component runs: the batch's checks, the detector, the
//! packing. Never shipped, never a component.

use sentinel_sdk::__bindings::sentinel::detector::types;
use sentinel_sdk::__private::{GuestScan, ScanAdapter, start};
use sentinel_sdk::Detector;

/// Words of a batch descriptor: `rows, ncols, columns`, then `(ptr, len)`
/// of `source, kind, text, text_ends, ints, floats, nulls` (lengths in
/// elements). `columns` points at `ncols` triples `(name ptr, name len, ty)`.
pub const BATCH_WORDS: usize = 17;
/// Words of a result header: `tag, count`, then `(ptr, len)` of `text,
/// text_ends, present, origins, severities, grouping_versions, at,
/// wasted_turns`, then `has_state, state ptr, state len`. For an error
/// (`tag` 1 bad-config, 2 bad-input, 3 failed), words 2 and 3 are the
/// message.
pub const HEADER_WORDS: usize = 21;

/// One scan of `D`, and what its last call returned (kept until the next).
pub struct Peer<D: Detector> {
    scan: Option<ScanAdapter<D>>,
    kept: Option<Kept>,
    header: [u32; HEADER_WORDS],
}

enum Kept {
    Observations(types::Observations),
    Output(types::ScanOutput),
    /// Held only so that the message the header names stays alive.
    Error(#[allow(dead_code)] String),
}

impl<D: Detector> Default for Peer<D> {
    fn default() -> Self {
        Peer { scan: None, kept: None, header: [0; HEADER_WORDS] }
    }
}

fn addr<T>(p: *const T) -> u32 {
    p as usize as u32
}

/// Memory of `size` bytes aligned to `align` (a dangling, aligned pointer
/// for zero bytes), never freed by the host: the lists become the batch's.
pub fn alloc(size: u32, align: u32) -> u32 {
    if size == 0 {
        return align;
    }
    let layout = std::alloc::Layout::from_size_align(size as usize, align as usize).expect("a valid layout");
    // SAFETY: `layout` has a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    addr(p)
}

/// A `Vec` over an allocation [`alloc`] made and the host filled.
///
/// # Safety
/// `ptr` came from [`alloc`] with `len * size_of::<T>()` bytes and `T`'s
/// alignment (or is dangling for `len == 0`), and holds `len` valid `T`s.
unsafe fn take<T>(ptr: u32, len: u32) -> Vec<T> {
    if len == 0 {
        return Vec::new();
    }
    // SAFETY: the caller's contract.
    unsafe { Vec::from_raw_parts(ptr as usize as *mut T, len as usize, len as usize) }
}

/// # Safety
/// As [`take`], and the bytes are UTF-8 (the host writes Rust strings; the
/// canonical ABI's lifting in wit-bindgen's guest does not check either).
unsafe fn take_string(ptr: u32, len: u32) -> String {
    // SAFETY: the caller's contract.
    unsafe { String::from_utf8_unchecked(take(ptr, len)) }
}

/// Reads the batch a descriptor names, taking its lists over.
///
/// # Safety
/// `desc` points at [`BATCH_WORDS`] words the host wrote, naming lists it
/// allocated with [`alloc`] and filled.
unsafe fn decode_batch(desc: u32) -> types::Batch {
    // SAFETY: the caller's contract, for the descriptor and each list.
    unsafe {
        let w: Vec<u32> = take(desc, BATCH_WORDS as u32);
        let (rows, ncols) = (w[0], w[1]);
        let cols: Vec<u32> = take(w[2], ncols * 3);
        let columns = cols
            .chunks_exact(3)
            .map(|c| types::Column {
                name: take_string(c[0], c[1]),
                ty: match c[2] {
                    0 => types::ColumnType::Text,
                    1 => types::ColumnType::Int,
                    2 => types::ColumnType::Float,
                    _ => types::ColumnType::Boolean,
                },
            })
            .collect();
        types::Batch {
            source: take_string(w[3], w[4]),
            kind: take_string(w[5], w[6]),
            columns,
            rows,
            text: take(w[7], w[8]),
            text_ends: take(w[9], w[10]),
            ints: take(w[11], w[12]),
            floats: take(w[13], w[14]),
            nulls: take(w[15], w[16]),
        }
    }
}

/// A little-endian reader over the context buffer.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("scan context: truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().expect("8 bytes")))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.bytes(4)?.try_into().expect("4 bytes")))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.bytes(n)?.to_vec()).map_err(|_| "scan context: a name is not UTF-8".to_owned())
    }
}

/// The scan context: `scan_time i64, window_start i64, n u32`, then `n`
/// entries `(name: u32 len + bytes, tag u8, value)` (tag 0 boolean u8, 1
/// integer i64, 2 float f64, 3 text u32 len + bytes, 4 duration u64), then
/// `has_state u8` and, when 1, `u32 len + bytes`.
pub fn decode_context(buf: &[u8]) -> Result<types::ScanContext, String> {
    let mut r = Reader(buf);
    let scan_time = r.u64()? as i64;
    let window_start = r.u64()? as i64;
    let mut config = Vec::new();
    for _ in 0..r.u32()? {
        let name = r.string()?;
        let value = match r.bytes(1)?[0] {
            0 => types::ConfigValue::Boolean(r.bytes(1)?[0] != 0),
            1 => types::ConfigValue::Integer(r.u64()? as i64),
            2 => types::ConfigValue::Float(f64::from_bits(r.u64()?)),
            3 => types::ConfigValue::Text(r.string()?),
            4 => types::ConfigValue::DurationMs(r.u64()?),
            t => return Err(format!("scan context: unknown value tag {t}")),
        };
        config.push((name, value));
    }
    let state = match r.bytes(1)?[0] {
        0 => None,
        _ => {
            let n = r.u32()? as usize;
            Some(r.bytes(n)?.to_vec())
        }
    };
    Ok(types::ScanContext { scan_time, window_start, config, state })
}

impl<D: Detector> Peer<D> {
    /// `peer_start`: the context in `len` bytes at `ptr` (from [`alloc`]).
    ///
    /// # Safety
    /// `ptr` holds `len` bytes the host wrote.
    pub unsafe fn start(&mut self, ptr: u32, len: u32) -> u64 {
        // SAFETY: the caller's contract.
        let buf: Vec<u8> = unsafe { take(ptr, len) };
        let started = decode_context(&buf).map_err(types::DetectorError::Failed).and_then(start::<D>);
        match started {
            Ok(scan) => {
                self.scan = Some(scan);
                self.answer(Ok(None))
            }
            Err(e) => self.answer(Err(e)),
        }
    }

    /// `peer_push`: the batch the descriptor at `desc` names.
    ///
    /// # Safety
    /// As [`decode_batch`].
    pub unsafe fn push(&mut self, desc: u32) -> u64 {
        // SAFETY: the caller's contract.
        let batch = unsafe { decode_batch(desc) };
        let result = match &self.scan {
            Some(scan) => scan.push(batch).map(Kept::Observations),
            None => Err(types::DetectorError::Failed("push before start".into())),
        };
        self.answer(result.map(Some))
    }

    /// `peer_finish`: the decision, and the state to keep.
    pub fn finish(&mut self) -> u64 {
        let result = match self.scan.take() {
            Some(scan) => {
                let out = scan.finish().map(Kept::Output);
                // As in a component: the scan's memory goes with the
                // instance, not freed one allocation at a time.
                std::mem::forget(scan);
                out
            }
            None => Err(types::DetectorError::Failed("finish before start".into())),
        };
        self.answer(result.map(Some))
    }

    /// Keeps what a call returned and fills the header that names it.
    fn answer(&mut self, result: Result<Option<Kept>, types::DetectorError>) -> u64 {
        let h = &mut self.header;
        *h = [0; HEADER_WORDS];
        self.kept = match result {
            Ok(kept) => kept,
            Err(e) => {
                let (tag, m) = match e {
                    types::DetectorError::BadConfig(m) => (1, m),
                    types::DetectorError::BadInput(m) => (2, m),
                    types::DetectorError::Failed(m) => (3, m),
                };
                h[0] = tag;
                (h[2], h[3]) = (addr(m.as_ptr()), m.len() as u32);
                Some(Kept::Error(m))
            }
        };
        let (obs, state) = match &self.kept {
            Some(Kept::Observations(o)) => (Some(o), None),
            Some(Kept::Output(out)) => (Some(&out.observations), out.state.as_ref()),
            _ => (None, None),
        };
        if let Some(o) = obs {
            h[1] = o.count;
            let lists = [
                (addr(o.text.as_ptr()), o.text.len()),
                (addr(o.text_ends.as_ptr()), o.text_ends.len()),
                (addr(o.present.as_ptr()), o.present.len()),
                (addr(o.origins.as_ptr()), o.origins.len()),
                (addr(o.severities.as_ptr()), o.severities.len()),
                (addr(o.grouping_versions.as_ptr()), o.grouping_versions.len()),
                (addr(o.at.as_ptr()), o.at.len()),
                (addr(o.wasted_turns.as_ptr()), o.wasted_turns.len()),
            ];
            for (i, (p, n)) in lists.into_iter().enumerate() {
                (h[2 + 2 * i], h[3 + 2 * i]) = (p, n as u32);
            }
        }
        if let Some(s) = state {
            (h[18], h[19], h[20]) = (1, addr(s.as_ptr()), s.len() as u32);
        }
        (u64::from(addr(h.as_ptr())) << 32) | (HEADER_WORDS * 4) as u64
    }
}

/// Exports `$detector` through the peer ABI: `peer_alloc`, `peer_start`,
/// `peer_push`, `peer_finish`. Call it once, at the root of a `cdylib`.
#[macro_export]
macro_rules! export_peer {
    ($detector:ty) => {
        ::std::thread_local! {
            static PEER: ::std::cell::RefCell<$crate::Peer<$detector>> =
                ::std::cell::RefCell::new(::std::default::Default::default());
        }

        #[unsafe(no_mangle)]
        pub extern "C" fn peer_alloc(size: u32, align: u32) -> u32 {
            $crate::alloc(size, align)
        }

        /// # Safety
        /// The host's contract: `ptr` holds `len` bytes of context.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn peer_start(ptr: u32, len: u32) -> u64 {
            // SAFETY: the host's contract, passed on.
            PEER.with_borrow_mut(|p| unsafe { p.start(ptr, len) })
        }

        /// # Safety
        /// The host's contract: `desc` names a batch it wrote.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn peer_push(desc: u32) -> u64 {
            // SAFETY: the host's contract, passed on.
            PEER.with_borrow_mut(|p| unsafe { p.push(desc) })
        }

        #[unsafe(no_mangle)]
        pub extern "C" fn peer_finish() -> u64 {
            PEER.with_borrow_mut(|p| p.finish())
        }
    };
}
