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

/// Whether a byte of `class` sits between two digits (`1.2`, `1-2`, `1:2`).
pub(super) fn between_digits(l: &str, class: u16) -> bool {
    l.as_bytes().windows(3).any(|w| w[0].is_ascii_digit() && CLASS[w[1] as usize] & class != 0 && w[2].is_ascii_digit())
}

/// Whether a `.` comes before a letter or digit.
pub(super) fn dot_word(l: &str) -> bool {
    l.as_bytes().windows(2).any(|w| w[0] == b'.' && w[1].is_ascii_alphanumeric())
}

/// Whether a digit sits next to `a`–`f`, `A`–`F`, `x` or `X`: every hex id
/// has one.
pub(super) fn digit_by_hex(l: &str) -> bool {
    let pair = |a: u8, b: u8| a.is_ascii_digit() && CLASS[b as usize] & HEX_LETTER != 0;
    l.as_bytes().windows(2).any(|w| pair(w[0], w[1]) || pair(w[1], w[0]))
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

/// Whether a run of `n` ASCII digits occurs.
pub(super) fn digit_run(l: &str, n: usize) -> bool {
    counted::has_run(l.as_bytes(), n, |b| b.is_ascii_digit())
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

/// The MAC rule's need: five colons or five dashes (five of either
/// together, counted in one pass).
pub(super) fn mac_shape(h: &Holds, l: &str) -> bool {
    h.len >= 17
        && h.has(HEX)
        && (h.has(COLON) || h.has(DASH))
        && l.as_bytes().iter().filter(|&&c| c == b':' || c == b'-').count() >= 5
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

/// The date rule's need: a digit, then `-` or `:` between digits, or the
/// eight digits of a compact date (in a line long enough for its time).
pub(super) fn date_shape(h: &Holds, l: &str) -> bool {
    h.has(DIGIT)
        && (((h.has(DASH) || h.has(COLON)) && between_digits(l, DASH | COLON)) || (h.len >= 15 && digit_run(l, 8)))
}

/// The boolean rule's need: `=` or `:`, blanks, then `t`, `f`, `T` or `F`
/// (`=>` has its `>` in between; blanks after a bare `=` are allowed too,
/// which the rule is not: the gate only has to let every match through).
pub(super) fn bool_shape(h: &Holds, l: &str) -> bool {
    if !h.has(EQUALS) && !h.has(COLON) {
        return false;
    }
    let t = l.as_bytes();
    let mut i = 0;
    while i < t.len() {
        let b = t[i];
        i += 1;
        if b != b':' && b != b'=' {
            continue;
        }
        let mut j = i + usize::from(b == b'=' && t.get(i) == Some(&b'>'));
        while matches!(t.get(j), Some(b' ' | b'\t')) {
            j += 1;
        }
        if matches!(t.get(j), Some(b't' | b'f' | b'T' | b'F')) {
            return true;
        }
    }
    false
}
