//! ASCII word boundaries and white space, as the rules' patterns mean them.
//!
//! Owns what `(?-u:\b)` and ASCII `\s` look at, for the scans that stand in
//! for a pattern (`numbers`, `counted`, `literal`, `paths`) and the in-place
//! collapsing of spaces: one definition, so that every scan cuts words and
//! spaces where its pattern would. Never looks past ASCII.

/// An ASCII word character: what `(?-u:\b)` looks at.
#[inline]
pub(super) fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether an ASCII word boundary lies before byte `i` of `t`.
#[inline]
pub(super) fn boundary(t: &[u8], i: usize) -> bool {
    let before = i > 0 && word(t[i - 1]);
    let after = i < t.len() && word(t[i]);
    before != after
}

/// `\s`, ASCII: tab, line feed, vertical tab, form feed, carriage return,
/// space.
#[inline]
pub(super) fn space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}
