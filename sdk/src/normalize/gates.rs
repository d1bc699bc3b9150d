//! What a line holds, and what each placeholder rule's matches need.
//!
//! Owns the byte classes a line is read for in one pass ([`Holds`]) and
//! the shape tests the rules' gates make of it (a byte between digits, a
//! run of hex digits, a month's name, an operator before a boolean), most
//! of them as four-byte windows (`windows.rs` reads them): each a
//! necessary condition of some rule's match, so a rule skipped by its gate
//! could not have changed the line (the equivalence tests run every line
//! through the rules without gates too, and check each skip on its own).
//! Never replaces anything.

use super::counted;
use super::windows::{Lanes, Window, any_window, each_window};

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

/// The IP rule's window: a `.` between two digits.
struct DotBetweenDigits;
impl Window for DotBetweenDigits {
    #[inline(always)]
    fn hit<L: Lanes>(a: L, b: L, c: L, _: L) -> L {
        a.digit().and(b.is(b'.')).and(c.digit())
    }
}

/// Whether a `.` sits between two digits (`1.2`).
pub(super) fn dot_between_digits(l: &str) -> bool {
    any_window::<DotBetweenDigits>(l.as_bytes())
}

/// Whether a `.` comes before a letter or digit.
pub(super) fn dot_word(l: &str) -> bool {
    l.as_bytes().windows(2).any(|w| w[0] == b'.' && w[1].is_ascii_alphanumeric())
}

/// `a`–`f`, `A`–`F`, `x` or `X`: what a digit sits next to in a hex id.
#[inline(always)]
fn hex_letter<L: Lanes>(b: L) -> L {
    let f = b.folded();
    f.within(b'a', b'f').or(f.is(b'x'))
}

/// The hex rule's window: a digit next to a hex letter.
struct DigitByHex;
impl Window for DigitByHex {
    #[inline(always)]
    fn hit<L: Lanes>(a: L, b: L, _: L, _: L) -> L {
        a.digit().and(hex_letter(b)).or(hex_letter(a).and(b.digit()))
    }
}

/// Whether a digit sits next to `a`–`f`, `A`–`F`, `x` or `X`: every hex id
/// has one.
pub(super) fn digit_by_hex(l: &str) -> bool {
    any_window::<DigitByHex>(l.as_bytes())
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

/// The IPv6 rule's `::` window.
struct DoubleColon;
impl Window for DoubleColon {
    #[inline(always)]
    fn hit<L: Lanes>(a: L, b: L, _: L, _: L) -> L {
        a.is(b':').and(b.is(b':'))
    }
}

/// The IPv6 rule's need: the seven colons of a full address, or `::`.
pub(super) fn ipv6_colons(l: &str) -> bool {
    let colons = count(l, b':');
    colons >= 7 || (colons >= 2 && any_window::<DoubleColon>(l.as_bytes()))
}

/// The request id rule's need: a dash and a run of ten hex digits (every
/// form but `req_…` has both), or `req_`.
pub(super) fn request_id_shape(h: &Holds, l: &str) -> bool {
    h.len >= 18 && ((h.has(DASH) && hex_run(l, 10)) || (h.has(UNDERSCORE) && l.contains("req_")))
}

/// The UUID rule's window: a dash between hex digits, two after it.
struct UuidDash;
impl Window for UuidDash {
    #[inline(always)]
    fn hit<L: Lanes>(a: L, b: L, c: L, d: L) -> L {
        let hex = |x: L| x.digit().or(x.folded().within(b'a', b'f'));
        hex(a).and(b.is(b'-')).and(hex(c)).and(hex(d))
    }
}

/// The UUID rule's need: a line as long as one, and a dash between hex
/// digits (`…0-e29b`).
pub(super) fn uuid_shape(h: &Holds, l: &str) -> bool {
    h.len >= 36 && any_window::<UuidDash>(l.as_bytes())
}

/// The MAC rule's window: `:` or `-` with the same separator three bytes on.
struct MacSeparators;
impl Window for MacSeparators {
    #[inline(always)]
    fn hit<L: Lanes>(a: L, _: L, _: L, d: L) -> L {
        a.is(b':').and(d.is(b':')).or(a.is(b'-').and(d.is(b'-')))
    }
}

/// The MAC rule's need: a `:` or `-` with the same separator three bytes
/// on (`00:1a:…`, `00-1a-…`), in a line as long as an address.
pub(super) fn mac_shape(h: &Holds, l: &str) -> bool {
    h.len >= 17 && (h.has(COLON) || h.has(DASH)) && any_window::<MacSeparators>(l.as_bytes())
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

/// The named date rule's window: three letters, each one some month's
/// abbreviation has at its place (`Jan` … `Dec`).
struct MonthLetters;
impl Window for MonthLetters {
    #[inline(always)]
    fn hit<L: Lanes>(a: L, b: L, c: L, _: L) -> L {
        let any = |x: L, of: &[u8]| of.iter().fold(x.is(of[0]), |m, &c| m.or(x.is(c)));
        any(a, b"JFMASOND").and(any(b, b"aepuco")).and(any(c, b"nbrylgptvc"))
    }
}

/// The named date rule's need: a digit and a month's name (every form
/// has both), the names looked for only where a window has a month's
/// letters.
pub(super) fn named_date_shape(h: &Holds, l: &str) -> bool {
    let t = l.as_bytes();
    h.has(DIGIT | MONTH_INITIAL)
        && any_window::<MonthLetters>(t)
        && (0..t.len().saturating_sub(3)).any(|i| CLASS[t[i] as usize] & MONTH_INITIAL != 0 && month_at(t, i))
}

/// The `datetime` repr rule's need: a digit, `.`, `(` and `datetime.`.
pub(super) fn datetime_shape(h: &Holds, l: &str) -> bool {
    h.has(DIGIT | DOT | PAREN) && l.contains("datetime.")
}

/// The date rule's window: a digit, `-`, `:`, `T` or a blank, then two digits.
struct DateDigits;
impl Window for DateDigits {
    #[inline(always)]
    fn hit<L: Lanes>(a: L, b: L, c: L, d: L) -> L {
        let sep = b.is(b'-').or(b.is(b':')).or(b.is(b'T')).or(b.is(b' '));
        a.digit().and(sep).and(c.digit()).and(d.digit())
    }
}

/// The date rule's need: a digit, `-`, `:`, `T` or a blank, then two
/// digits (`6-01`, `5:04`, `2T15`, `2 15`): every form has one (an ISO
/// date's first dash, a time's first colon, a compact date's `T` or
/// blank), in a line long enough for a compact date and its time where
/// no `-` or `:` occurs.
pub(super) fn date_shape(h: &Holds, l: &str) -> bool {
    h.has(DIGIT) && (h.has(DASH) || h.has(COLON) || h.len >= 15) && any_window::<DateDigits>(l.as_bytes())
}

/// The boolean rule's window: `=` or `:`, then `t`, `f`, `T` or `F` after
/// up to two blanks or `>`, or three of them (which may go on).
struct Boolean;
impl Window for Boolean {
    #[inline(always)]
    fn hit<L: Lanes>(a: L, b: L, c: L, d: L) -> L {
        // `| 0x20` maps only `T` and `t` to `t`, `F` and `f` to `f`.
        let tf = |x: L| x.folded().is(b't').or(x.folded().is(b'f'));
        let gap = |x: L| x.is(b' ').or(x.is(b'\t')).or(x.is(b'>'));
        let op = a.is(b':').or(a.is(b'='));
        op.and(tf(b).or(gap(b).and(tf(c).or(gap(c).and(tf(d).or(gap(d)))))))
    }
}

/// The boolean rule's need: `=` or `:`, blanks, then `t`, `f`, `T` or `F`
/// (`=>` has its `>` in between; blanks after a bare `=` are allowed too,
/// which the rule is not: the gate only has to let every match through).
pub(super) fn bool_shape(h: &Holds, l: &str) -> bool {
    (h.has(EQUALS) || h.has(COLON)) && any_window::<Boolean>(l.as_bytes())
}

/// Every gate's window test over `t`, one bit each in a fixed order, then
/// the secret rules' key words found (`literal::key_words`' flags): as the
/// gates read them ([`any_window`], sixteen bytes at a time where the
/// target has vectors) and one window at a time ([`each_window`]; the key
/// words by their table). Equal on every line; the guest fixture
/// `window-check` compares them in wasm, where the first is the `simd128`
/// code (the unit tests run natively).
pub(crate) fn window_tests(t: &[u8]) -> (u32, u32) {
    type Test = fn(&[u8]) -> bool;
    let tests: [(Test, Test); 8] = [
        (any_window::<DotBetweenDigits>, each_window::<DotBetweenDigits>),
        (any_window::<DigitByHex>, each_window::<DigitByHex>),
        (any_window::<UuidDash>, each_window::<UuidDash>),
        (any_window::<MacSeparators>, each_window::<MacSeparators>),
        (any_window::<MonthLetters>, each_window::<MonthLetters>),
        (any_window::<DateDigits>, each_window::<DateDigits>),
        (any_window::<Boolean>, each_window::<Boolean>),
        (any_window::<DoubleColon>, each_window::<DoubleColon>),
    ];
    let (fast, each) = tests
        .iter()
        .enumerate()
        .fold((0, 0), |(fast, each), (i, (f, e))| (fast | (u32::from(f(t)) << i), each | (u32::from(e(t)) << i)));
    // The secret rules' key words (their flags), found through a window and by the table.
    let words = |w: u8| u32::from(w) << tests.len();
    (fast | words(super::literal::key_words(t)), each | words(super::literal::key_words_by_table(t)))
}
