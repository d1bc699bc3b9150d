//! Four-byte windows over a line, tested thirteen at a time.
//!
//! Owns [`any_window`] (whether some window `t[i..i + 4]` of a line, the
//! bytes past its end read as zeros, passes a test) and [`each_hit`]
//! (where the windows that pass it start), each test written once over
//! [`Lanes`] so that it runs on one byte or on sixteen: with SSE2 on
//! x86_64 (which every x86_64 has), and with `simd128` on wasm32 (which
//! the repository's guest builds enable, `.cargo/config.toml`), thirteen
//! windows take one load, a few instructions and no branch; elsewhere (a
//! guest built without `simd128`) the windows are read one at a time. On
//! the short lines errors are, that is a fraction of what a loop over the
//! bytes costs (and, in a guest, of the fuel and epoch checks each of its
//! iterations pays). Never decides what a gate needs (`gates.rs` does).

/// Bytes, one or sixteen at a time, and the masks tests of them give
/// (each lane all ones where the test holds, else zero).
pub(super) trait Lanes: Copy {
    /// Where the byte is `c`.
    fn is(self, c: u8) -> Self;
    /// Where the byte is in `lo..=hi`.
    fn within(self, lo: u8, hi: u8) -> Self;
    /// The bytes with bit 5 set (`| 0x20`: a letter in lower case).
    fn folded(self) -> Self;
    fn and(self, other: Self) -> Self;
    fn or(self, other: Self) -> Self;
    /// Where the byte is an ASCII digit.
    #[inline(always)]
    fn digit(self) -> Self {
        self.within(b'0', b'9')
    }
}

/// A test of a window `a b c d` (four bytes in a row); a zero byte (past
/// the line's end) must pass as no byte of the classes it tests for `a`.
pub(super) trait Window {
    fn hit<L: Lanes>(a: L, b: L, c: L, d: L) -> L;
}

/// One byte: a mask is `0xFF` or `0`.
impl Lanes for u8 {
    #[inline(always)]
    fn is(self, c: u8) -> Self {
        if self == c { 0xFF } else { 0 }
    }
    #[inline(always)]
    fn within(self, lo: u8, hi: u8) -> Self {
        if self.wrapping_sub(lo) <= hi - lo { 0xFF } else { 0 }
    }
    #[inline(always)]
    fn folded(self) -> Self {
        self | 0x20
    }
    #[inline(always)]
    fn and(self, other: Self) -> Self {
        self & other
    }
    #[inline(always)]
    fn or(self, other: Self) -> Self {
        self | other
    }
}

/// Whether the window at `t[i]` passes `W` (the bytes past the end read as zeros).
fn hit_at<W: Window>(t: &[u8], i: usize) -> bool {
    let at = |i: usize| t.get(i).copied().unwrap_or(0);
    W::hit(at(i), at(i + 1), at(i + 2), at(i + 3)) != 0
}

/// Whether some window of `t` passes `W` (each window one at a time):
/// where there are no vectors, and the reference the blocks are checked
/// against (`gates::window_tests`).
pub(super) fn each_window<W: Window>(t: &[u8]) -> bool {
    (0..t.len()).any(|i| hit_at::<W>(t, i))
}

// SAFETY (each `unsafe` block in this module): SSE2 is part of x86_64's
// baseline, which every x86_64 build enables (the `cfg` checks it), so the
// intrinsics run on every machine this code runs on; they read no memory
// but the one load, whose bounds its block states.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8, _mm_srli_si128, _mm_sub_epi8,
    };

    use super::{Lanes, Window};

    /// Sixteen bytes as the bytes `k` places on in each window (`k` 0 to
    /// 3): the one load of a block, read at each place of its windows. A
    /// test shifts its mask down by `k`, so lane `i` of every mask is
    /// window `i`'s (the last three lanes run past the load); a mask's `k`
    /// is 0. So each test of a block's bytes is made once, whatever the
    /// places it is made at, and the block loads once.
    #[derive(Clone, Copy)]
    pub(super) struct Sixteen {
        v: __m128i,
        k: u8,
    }

    #[allow(clippy::cast_possible_wrap)]
    #[inline(always)]
    fn splat(c: u8) -> __m128i {
        unsafe { _mm_set1_epi8(c as i8) }
    }

    /// A mask of the load's lanes as the windows' lanes `k` places back.
    #[inline(always)]
    fn placed(m: __m128i, k: u8) -> Sixteen {
        let v = unsafe {
            match k {
                0 => m,
                1 => _mm_srli_si128::<1>(m),
                2 => _mm_srli_si128::<2>(m),
                _ => _mm_srli_si128::<3>(m),
            }
        };
        Sixteen { v, k: 0 }
    }

    impl Lanes for Sixteen {
        #[inline(always)]
        fn is(self, c: u8) -> Self {
            placed(unsafe { _mm_cmpeq_epi8(self.v, splat(c)) }, self.k)
        }
        #[inline(always)]
        fn within(self, lo: u8, hi: u8) -> Self {
            // `x - lo` wraps below `lo`: in range where min(x - lo, hi - lo) is x - lo.
            let m = unsafe {
                let x = _mm_sub_epi8(self.v, splat(lo));
                _mm_cmpeq_epi8(_mm_min_epu8(x, splat(hi - lo)), x)
            };
            placed(m, self.k)
        }
        #[inline(always)]
        fn folded(self) -> Self {
            Sixteen { v: unsafe { _mm_or_si128(self.v, splat(0x20)) }, k: self.k }
        }
        #[inline(always)]
        fn and(self, other: Self) -> Self {
            Sixteen { v: unsafe { _mm_and_si128(self.v, other.v) }, k: 0 }
        }
        #[inline(always)]
        fn or(self, other: Self) -> Self {
            Sixteen { v: unsafe { _mm_or_si128(self.v, other.v) }, k: 0 }
        }
    }

    /// Which of the [`super::blocks::WINDOWS`] windows starting in `b[..13]` pass
    /// `W`: bit `i` for the window at `b[i]`.
    #[inline(always)]
    pub(super) fn hits<W: Window>(b: &[u8; 16]) -> u16 {
        // The sixteen bytes read are `b`'s (an unaligned load has no
        // alignment to keep).
        let v = unsafe { _mm_loadu_si128(b.as_ptr().cast()) };
        let at = |k: u8| Sixteen { v, k };
        let hits = unsafe { _mm_movemask_epi8(W::hit(at(0), at(1), at(2), at(3)).v) };
        (hits & ((1 << super::blocks::WINDOWS) - 1)) as u16
    }
}

// SAFETY (each `unsafe` block in this module): the one load reads the
// sixteen bytes of the block it is given; on wasm32 an instruction the
// engine does not support fails validation when the module loads, never
// at run time, so the `simd128` functions are safe to call.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128 {
    use std::arch::wasm32::{
        u8x16_bitmask, u8x16_eq, u8x16_min, u8x16_shuffle, u8x16_splat, u8x16_sub, v128, v128_and, v128_load, v128_or,
    };

    use super::{Lanes, Window};

    /// Sixteen bytes as the bytes `k` places on in each window, as on
    /// x86_64 (the `sse2` module): one load a block, each test made once
    /// and its mask moved down `k` lanes.
    #[derive(Clone, Copy)]
    pub(super) struct Sixteen {
        v: v128,
        k: u8,
    }

    /// A mask of the load's lanes as the windows' lanes `k` places back
    /// (the lanes past the load read zero).
    #[inline(always)]
    fn placed(m: v128, k: u8) -> Sixteen {
        let z = u8x16_splat(0);
        let v = match k {
            0 => m,
            1 => u8x16_shuffle::<1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16>(m, z),
            2 => u8x16_shuffle::<2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 16>(m, z),
            _ => u8x16_shuffle::<3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 16, 16>(m, z),
        };
        Sixteen { v, k: 0 }
    }

    impl Lanes for Sixteen {
        #[inline(always)]
        fn is(self, c: u8) -> Self {
            placed(u8x16_eq(self.v, u8x16_splat(c)), self.k)
        }
        #[inline(always)]
        fn within(self, lo: u8, hi: u8) -> Self {
            // `x - lo` wraps below `lo`: in range where min(x - lo, hi - lo) is x - lo.
            let x = u8x16_sub(self.v, u8x16_splat(lo));
            placed(u8x16_eq(u8x16_min(x, u8x16_splat(hi - lo)), x), self.k)
        }
        #[inline(always)]
        fn folded(self) -> Self {
            Sixteen { v: v128_or(self.v, u8x16_splat(0x20)), k: self.k }
        }
        #[inline(always)]
        fn and(self, other: Self) -> Self {
            Sixteen { v: v128_and(self.v, other.v), k: 0 }
        }
        #[inline(always)]
        fn or(self, other: Self) -> Self {
            Sixteen { v: v128_or(self.v, other.v), k: 0 }
        }
    }

    /// Which of the windows starting in `b[..13]` pass `W`, as on x86_64.
    #[inline(always)]
    pub(super) fn hits<W: Window>(b: &[u8; 16]) -> u16 {
        let v = unsafe { v128_load(b.as_ptr().cast()) };
        let at = |k: u8| Sixteen { v, k };
        u8x16_bitmask(W::hit(at(0), at(1), at(2), at(3)).v) & ((1 << super::blocks::WINDOWS) - 1)
    }
}

/// The block schedule both readers share, where there are vectors.
#[cfg(any(
    all(target_arch = "x86_64", target_feature = "sse2"),
    all(target_arch = "wasm32", target_feature = "simd128")
))]
mod blocks {
    use std::ops::ControlFlow;

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pub(super) use super::simd128::hits;
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    pub(super) use super::sse2::hits;

    /// How many windows a block of sixteen bytes holds whole: those
    /// starting in its first thirteen bytes.
    pub(super) const WINDOWS: usize = 13;

    /// Calls `f` with the start of each window of `t` that `hits` passes,
    /// in order, each once, until it breaks: each block of windows read at
    /// once, in place (the last one ending where the line does,
    /// overlapping the one before, its windows already read skipped), then
    /// the three windows that run past the end; a line shorter than a
    /// block is copied, zeros after it.
    #[inline(always)]
    pub(super) fn walk(
        t: &[u8],
        hits: impl Fn(&[u8; 16]) -> u16,
        mut f: impl FnMut(usize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let n = t.len();
        // Window `start + k` for each hit `k` of the block at `start`, from
        // `from` on and before the line's end.
        let mut report = |start: usize, hits: u16, from: usize| {
            let mut h = hits;
            while h != 0 {
                let i = start + h.trailing_zeros() as usize;
                h &= h - 1;
                if i >= from && i < n {
                    f(i)?;
                }
            }
            ControlFlow::Continue(())
        };
        let block = |b: &[u8]| hits(b.try_into().expect("sixteen bytes"));
        if n < 16 {
            let mut b = [0u8; WINDOWS + 16];
            b[..n].copy_from_slice(t);
            report(0, block(&b[..16]), 0)?;
            if n > WINDOWS {
                report(WINDOWS, block(&b[WINDOWS..]), WINDOWS)?;
            }
            return ControlFlow::Continue(());
        }
        let mut start = 0;
        while start + 16 <= n {
            report(start, block(&t[start..start + 16]), start)?;
            start += WINDOWS;
        }
        // The windows before `start` are read; `start` is at most `n - 3`.
        if start + 3 < n {
            report(n - 16, block(&t[n - 16..]), start)?;
        }
        let mut tail = [0u8; 16];
        tail[..3].copy_from_slice(&t[n - 3..]);
        report(n - 3, block(&tail) & 0b111, start)
    }
}

/// Whether this build reads sixteen bytes at a time (the `blocks` above).
pub(crate) const VECTORS: bool = cfg!(any(
    all(target_arch = "x86_64", target_feature = "sse2"),
    all(target_arch = "wasm32", target_feature = "simd128")
));

/// Whether some window of `t` passes `W`, sixteen bytes at a time where
/// the target has vectors of them (SSE2 on x86_64, `simd128` on wasm32),
/// else one window at a time.
#[inline]
pub(super) fn any_window<W: Window>(t: &[u8]) -> bool {
    #[cfg(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        all(target_arch = "wasm32", target_feature = "simd128")
    ))]
    return blocks::walk(t, blocks::hits::<W>, |_| std::ops::ControlFlow::Break(())).is_break();
    #[cfg(not(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        all(target_arch = "wasm32", target_feature = "simd128")
    )))]
    each_window::<W>(t)
}

/// Calls `f` with the start of every window of `t` that passes `W`, in
/// order, each once (as [`any_window`] reads them).
#[inline]
pub(super) fn each_hit<W: Window>(t: &[u8], mut f: impl FnMut(usize)) {
    #[cfg(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        all(target_arch = "wasm32", target_feature = "simd128")
    ))]
    let _ = blocks::walk(t, blocks::hits::<W>, |i| {
        f(i);
        std::ops::ControlFlow::Continue(())
    });
    #[cfg(not(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        all(target_arch = "wasm32", target_feature = "simd128")
    )))]
    each_hit_one_by_one::<W>(t, f)
}

/// [`each_hit`] one window at a time: where there are no vectors, and the
/// reference the blocks are checked against.
#[cfg_attr(
    all(
        any(
            all(target_arch = "x86_64", target_feature = "sse2"),
            all(target_arch = "wasm32", target_feature = "simd128")
        ),
        not(test)
    ),
    allow(dead_code)
)]
pub(super) fn each_hit_one_by_one<W: Window>(t: &[u8], f: impl FnMut(usize)) {
    (0..t.len()).filter(|&i| hit_at::<W>(t, i)).for_each(f);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    struct Colon;
    impl Window for Colon {
        #[inline(always)]
        fn hit<L: Lanes>(a: L, _: L, _: L, _: L) -> L {
            a.is(b':')
        }
    }

    struct DigitDash;
    impl Window for DigitDash {
        #[inline(always)]
        fn hit<L: Lanes>(a: L, b: L, _: L, _: L) -> L {
            a.digit().and(b.is(b'-'))
        }
    }

    struct DotThenA;
    impl Window for DotThenA {
        #[inline(always)]
        fn hit<L: Lanes>(a: L, _: L, c: L, _: L) -> L {
            a.is(b'.').and(c.folded().is(b'a'))
        }
    }

    struct Four;
    impl Window for Four {
        #[inline(always)]
        fn hit<L: Lanes>(a: L, b: L, c: L, d: L) -> L {
            a.is(b'b').and(b.is(b' ')).and(c.within(b'0', b'1')).and(d.is(b'0').or(d.is(0)))
        }
    }

    /// A colon then a zero: only a window past the end has one.
    struct ColonLast;
    impl Window for ColonLast {
        #[inline(always)]
        fn hit<L: Lanes>(a: L, b: L, _: L, _: L) -> L {
            a.is(b':').and(b.is(0))
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

        #[test]
        fn blocks_read_every_window_as_a_loop_over_them_does(
            t in prop::collection::vec(prop::sample::select(&b"ab01:-. A"[..]), 0..90),
        ) {
            // A window of each width, so every byte of a window is read
            // wherever it falls: in a block, the overlapping last block, the tail.
            let line = String::from_utf8_lossy(&t);
            prop_assert_eq!(any_window::<Colon>(&t), each_window::<Colon>(&t), "{:?}", line);
            prop_assert_eq!(any_window::<DigitDash>(&t), each_window::<DigitDash>(&t), "{:?}", line);
            prop_assert_eq!(any_window::<DotThenA>(&t), each_window::<DotThenA>(&t), "{:?}", line);
            prop_assert_eq!(any_window::<Four>(&t), each_window::<Four>(&t), "{:?}", line);
            let (mut blocks, mut one_by_one) = (Vec::new(), Vec::new());
            each_hit::<DigitDash>(&t, |i| blocks.push(i));
            each_hit_one_by_one::<DigitDash>(&t, |i| one_by_one.push(i));
            prop_assert_eq!(&blocks, &one_by_one, "{:?}", line);
            let (mut blocks, mut one_by_one) = (Vec::new(), Vec::new());
            each_hit::<ColonLast>(&t, |i| blocks.push(i));
            each_hit_one_by_one::<ColonLast>(&t, |i| one_by_one.push(i));
            prop_assert_eq!(&blocks, &one_by_one, "{:?}", line);
        }
    }

    #[test]
    fn windows_at_a_line_end_read_zeros_past_it() {
        for n in 0..70 {
            let line = format!("{}:", "x".repeat(n));
            assert!(any_window::<ColonLast>(line.as_bytes()), "{n}");
            assert!(each_window::<ColonLast>(line.as_bytes()), "{n}");
            assert!(!any_window::<ColonLast>(&line.as_bytes()[..n]), "{n}");
        }
    }
}
