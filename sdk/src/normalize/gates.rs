//! What a line holds, and what each placeholder rule's matches need.
//!
//! Owns the byte classes a line is read for in one pass ([`Holds`]) and
//! the shape tests the rules' gates make of it (a byte between digits, a
//! run of hex digits, a month's name, an operator before a boolean): each
//! a necessary condition of some rule's match, so a rule skipped by its
//! gate could not have changed the line (the equivalence tests run every
//! line through the rules without gates too). Never replaces anything.

use super::counted;

/// Byte classes [`Holds::of`] tracks, as bits of [`CLASS`].
pub(super) const DIGIT: u16 = 1;
pub(super) const DOT: u16 = 1 << 1;
pub(super) const DASH: u16 = 1 << 2;
pub(super) const COLON: u16 = 1 << 3;
pub(super) const AT: u16 = 1 << 4;
/// `"`, `` ` `` and 0xE2 (the first byte of `“` and `‘`).
pub(super) const QUOTES: u16 = 1 << 5;
pub(super) const APOSTROPHE: u16 = 1 << 6;
pub(super) const BACKSLASH: u16 = 1 << 7;
pub(super) const SLASH: u16 = 1 << 8;
/// `[0-9a-fA-F]`.
pub(super) const HEX: u16 = 1 << 9;
/// `a`–`f`, `A`–`F`, `x`, `X`: what a digit sits next to in a hex id.
pub(super) const HEX_LETTER: u16 = 1 << 10;
/// `J`, `F`, `M`, `A`, `S`, `O`, `N`, `D`: a month's initial.
pub(super) const MONTH_INITIAL: u16 = 1 << 11;
/// A byte a control character may start with: C0, DEL, and 0xC2 (C1,
/// U+0080–U+009F, and the other characters up to U+00BF).
pub(super) const CONTROL: u16 = 1 << 12;
pub(super) const EQUALS: u16 = 1 << 13;
pub(super) const UNDERSCORE: u16 = 1 << 14;
pub(super) const PAREN: u16 = 1 << 15;

/// Each byte's classes.
pub(super) const CLASS: [u16; 256] = {
    let mut c = [0u16; 256];
    let mut b = 0;
    while b < 256 {
        let u = b as u8;
        let mut k = 0;
        if u.is_ascii_digit() {
            k |= DIGIT;
        }
        if u.is_ascii_hexdigit() {
            k |= HEX;
        }
        if matches!(u, b'J' | b'F' | b'M' | b'A' | b'S' | b'O' | b'N' | b'D') {
            k |= MONTH_INITIAL;
        }
        if u < 0x20 || u == 0x7F || u == 0xC2 {
            k |= CONTROL;
        }
        if matches!(u, b'a'..=b'f' | b'A'..=b'F' | b'x' | b'X') {
            k |= HEX_LETTER;
        }
        k |= match u {
            b'.' => DOT,
            b'-' => DASH,
            b':' => COLON,
            b'@' => AT,
            b'"' | b'`' | 0xE2 => QUOTES,
            b'\'' => APOSTROPHE,
            b'\\' => BACKSLASH,
            b'/' => SLASH,
            b'=' => EQUALS,
            b'_' => UNDERSCORE,
            b'(' => PAREN,
            _ => 0,
        };
        c[b] = k;
        b += 1;
    }
    c
};

/// What a line holds, in one pass over its bytes: the classes of byte it
/// has. With the shape tests below, computed only when the classes allow
/// a match, these are the tests each rule's matches need. They are
/// necessary conditions only, so skipping a rule never changes an output.
#[derive(Default, Clone, Copy)]
pub(super) struct Holds {
    /// Every class of byte seen.
    seen: u16,
    pub(super) len: usize,
}

impl Holds {
    pub(super) fn of(l: &str) -> Self {
        let t = l.as_bytes();
        Holds { seen: t.iter().fold(0, |seen, &b| seen | CLASS[b as usize]), len: t.len() }
    }

    /// Whether a byte of every class in `classes` occurs.
    pub(super) fn has(&self, classes: u16) -> bool {
        self.seen & classes == classes
    }
}

/// How many windows [`any_window`] reads at once.
const BLOCK: usize = 16;

/// Whether `hit` holds for some window of four bytes, `t[i..i + 4]` for
/// each `i` in `t` (the bytes past the end read as zeros, which every
/// `hit` takes for no byte of its classes). Each block of [`BLOCK`]
/// windows is read whole, with no early exit, so the compiler turns it
/// into vector instructions: on the short lines errors are, that costs a
/// fraction of a loop that stops at the first hit. The blocks are read in
/// place (the last one ends where the line does, overlapping the one
/// before), then the three windows that run past the end.
#[inline]
fn any_window(t: &[u8], hit: impl Fn(u8, u8, u8, u8) -> bool) -> bool {
    let block = |b: &[u8]| {
        let (w0, w1, w2, w3) = (&b[..BLOCK], &b[1..BLOCK + 1], &b[2..BLOCK + 2], &b[3..BLOCK + 3]);
        w0.iter().zip(w1).zip(w2).zip(w3).fold(false, |any, (((&a, &b), &c), &d)| any | hit(a, b, c, d))
    };
    let n = t.len();
    if n < BLOCK + 3 {
        let mut b = [0u8; BLOCK + 3];
        b[..n].copy_from_slice(t);
        let found = block(&b);
        if found || n <= BLOCK {
            return found;
        }
    } else {
        let mut start = 0;
        while start + BLOCK + 3 <= n {
            if block(&t[start..start + BLOCK + 3]) {
                return true;
            }
            start += BLOCK;
        }
        if start + 3 < n && block(&t[n - BLOCK - 3..]) {
            return true;
        }
    }
    let (x, y, z) = (t[n - 3], t[n - 2], t[n - 1]);
    hit(x, y, z, 0) | hit(y, z, 0, 0) | hit(z, 0, 0, 0)
}

#[inline]
fn digit(b: u8) -> bool {
    b.wrapping_sub(b'0') < 10
}

/// Whether a byte that passes `sep` sits between two digits (`1.2`, `1-2`, `1:2`).
pub(super) fn between_digits(l: &str, sep: impl Fn(u8) -> bool) -> bool {
    any_window(l.as_bytes(), |a, b, c, _| digit(a) & sep(b) & digit(c))
}

/// Whether a `.` comes before a letter or digit.
pub(super) fn dot_word(l: &str) -> bool {
    l.as_bytes().windows(2).any(|w| w[0] == b'.' && w[1].is_ascii_alphanumeric())
}

/// Whether a digit sits next to `a`–`f`, `A`–`F`, `x` or `X`: every hex id
/// has one.
pub(super) fn digit_by_hex(l: &str) -> bool {
    let letter = |b: u8| ((b | 0x20).wrapping_sub(b'a') < 6) | (b | 0x20 == b'x');
    any_window(l.as_bytes(), |a, b, _, _| (digit(a) & letter(b)) | (letter(a) & digit(b)))
}

/// Whether a run of `n` hex digits occurs.
pub(super) fn hex_run(l: &str, n: usize) -> bool {
    counted::has_run(l.as_bytes(), n, |b| b.is_ascii_hexdigit())
}

/// How many times `l` holds `b` (a loop the compiler vectorizes: cheaper
/// than stopping early on the short lines errors are).
pub(super) fn count(l: &str, b: u8) -> usize {
    l.as_bytes().iter().filter(|&&c| c == b).count()
}

/// The IPv6 rule's need: the seven colons of a full address, or `::`.
pub(super) fn ipv6_colons(l: &str) -> bool {
    let colons = count(l, b':');
    colons >= 7 || (colons >= 2 && l.contains("::"))
}

/// The request id rule's need: a dash and a run of ten hex digits (every
/// form but `req_…` has both), or `req_`.
pub(super) fn request_id_shape(h: &Holds, l: &str) -> bool {
    h.len >= 18 && ((h.has(DASH) && hex_run(l, 10)) || (h.has(UNDERSCORE) && l.contains("req_")))
}

/// The MAC rule's need: a `:` or `-` with the same separator three bytes
/// on (`00:1a:…`, `00-1a-…`), in a line as long as an address.
pub(super) fn mac_shape(h: &Holds, l: &str) -> bool {
    h.len >= 17
        && (h.has(COLON) || h.has(DASH))
        && any_window(l.as_bytes(), |a, _, _, d| ((a == b':') | (a == b'-')) & (a == d))
}

/// The month abbreviations, each with the letter its full name goes on with.
const MONTHS: [(&[u8; 3], u8); 12] = [
    (b"Jan", b'u'),
    (b"Feb", b'r'),
    (b"Mar", b'c'),
    (b"Apr", b'i'),
    (b"May", 0),
    (b"Jun", b'e'),
    (b"Jul", b'y'),
    (b"Aug", b'u'),
    (b"Sep", b't'),
    (b"Oct", b'o'),
    (b"Nov", b'e'),
    (b"Dec", b'e'),
];

/// Whether a month's name starts at `t[i]` where a date with names holds
/// it: after no letter, and followed by a blank, `-`, `.`, or the rest of
/// its full name (`Marvin` holds none).
fn month_at(t: &[u8], i: usize) -> bool {
    (i == 0 || !t[i - 1].is_ascii_alphabetic())
        && MONTHS.iter().any(|(m, next)| {
            &t[i..i + 3] == *m && (matches!(t[i + 3], b' ' | b'\t' | b'-' | b'.') || (*next != 0 && t[i + 3] == *next))
        })
}

/// The named date rule's need: a digit and a month's name (every form
/// has both), the names looked for only at a month's initial.
pub(super) fn named_date_shape(h: &Holds, l: &str) -> bool {
    let t = l.as_bytes();
    h.has(DIGIT | MONTH_INITIAL)
        && (0..t.len().saturating_sub(3)).any(|i| CLASS[t[i] as usize] & MONTH_INITIAL != 0 && month_at(t, i))
}

/// The `datetime` repr rule's need: a digit, `.`, `(` and `datetime.`.
pub(super) fn datetime_shape(h: &Holds, l: &str) -> bool {
    h.has(DIGIT | DOT | PAREN) && l.contains("datetime.")
}

/// The date rule's need: a digit, `-`, `:`, `T` or a blank, then two
/// digits (`6-01`, `5:04`, `2T15`, `2 15`): every form has one (an ISO
/// date's first dash, a time's first colon, a compact date's `T` or
/// blank), in a line long enough for a compact date and its time where
/// no `-` or `:` occurs.
pub(super) fn date_shape(h: &Holds, l: &str) -> bool {
    let sep = |b: u8| (b == b'-') | (b == b':') | (b == b'T') | (b == b' ');
    h.has(DIGIT)
        && (h.has(DASH) || h.has(COLON) || h.len >= 15)
        && any_window(l.as_bytes(), |a, b, c, d| digit(a) & sep(b) & digit(c) & digit(d))
}

/// The boolean rule's need: `=` or `:`, blanks, then `t`, `f`, `T` or `F`
/// (`=>` has its `>` in between; blanks after a bare `=` are allowed too,
/// which the rule is not: the gate only has to let every match through).
/// Read four bytes at a time from each byte, as [`any3`] reads three (an
/// operator with three blanks or `>` after it passes), then the last
/// three bytes one by one.
pub(super) fn bool_shape(h: &Holds, l: &str) -> bool {
    if !h.has(EQUALS) && !h.has(COLON) {
        return false;
    }
    let op = |b: u8| (b == b':') | (b == b'=');
    let gap = |b: u8| (b == b' ') | (b == b'\t') | (b == b'>');
    // `| 0x20` maps only `T` and `t` to `t`, `F` and `f` to `f`.
    let tf = |b: u8| (b | 0x20 == b't') | (b | 0x20 == b'f');
    any_window(l.as_bytes(), |a, b, c, d| op(a) & (tf(b) | (gap(b) & (tf(c) | (gap(c) & (tf(d) | gap(d)))))))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// [`any_window`] as a loop over every window, the bytes past the
    /// end read as zeros.
    fn each_window(t: &[u8], hit: impl Fn(u8, u8, u8, u8) -> bool) -> bool {
        let at = |i: usize| t.get(i).copied().unwrap_or(0);
        (0..t.len()).any(|i| hit(at(i), at(i + 1), at(i + 2), at(i + 3)))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn blocks_read_every_window_once_as_a_loop_does(
            t in prop::collection::vec(prop::sample::select(&b"ab01:-. "[..]), 0..90),
            at in 0usize..4,
        ) {
            // One window of each kind, at each of its four bytes: every
            // position a block, the overlapping last block or the tail reads.
            let hits: [&dyn Fn(u8, u8, u8, u8) -> bool; 4] = [
                &|a, _, _, _| a == b':',
                &|a, b, _, _| digit(a) & (b == b'-'),
                &|a, _, c, _| (a == b'.') & (c == b'a'),
                &|a, b, c, d| (a == b'b') & (b == b' ') & digit(c) & (d == b'0'),
            ];
            let hit = hits[at];
            prop_assert_eq!(any_window(&t, hit), each_window(&t, hit), "{:?}", String::from_utf8_lossy(&t));
        }
    }

    #[test]
    fn windows_at_a_line_end_read_zeros_past_it() {
        // A colon last in lines around a block's length: only the tail reads it.
        for n in 0..60 {
            let line = format!("{}:", "x".repeat(n));
            assert!(any_window(line.as_bytes(), |a, b, _, _| (a == b':') & (b == 0)), "{n}");
        }
    }
}
