//! The normalizer's rules as automata compiled at build time.
//!
//! Owns loading the DFAs `build.rs` serialized from `patterns.rs` (dense or
//! sparse; pointers into embedded bytes, once per instance: no compilation,
//! and no validation pass, which the tests run), the choice between such a DFA
//! and a scan for each rule, and the one search the rules need: every
//! non-overlapping match, leftmost-first (what the `regex` crate's
//! `replace_all` visits). Never decides what a match becomes.

use std::ops::Range;
use std::sync::LazyLock;

use regex_automata::dfa::{dense, regex::Regex, sparse};

/// Bytes aligned for a zero-copy DFA (its transition table is `u32`s).
#[repr(C)]
pub(super) struct Aligned<B: ?Sized> {
    _align: [u32; 0],
    bytes: B,
}

include!(concat!(env!("OUT_DIR"), "/dfas.rs"));

/// A compiled pattern's automata: dense (a table lookup a byte) or sparse
/// (a search among a state's transitions; `patterns::SPARSE`).
enum Automata {
    Dense(Regex<dense::DFA<&'static [u32]>>),
    Sparse(Regex<sparse::DFA<&'static [u8]>>),
}

/// One compiled pattern.
pub(crate) struct Rule {
    #[cfg_attr(not(test), allow(dead_code))]
    name: &'static str,
    re: Automata,
}

impl Rule {
    /// Gives `visit` every match, left to right, as byte ranges.
    pub(crate) fn each_match(&self, text: &str, visit: impl FnMut(Range<usize>)) {
        match &self.re {
            Automata::Dense(re) => re.find_iter(text).map(|m| m.range()).for_each(visit),
            Automata::Sparse(re) => re.find_iter(text).map(|m| m.range()).for_each(visit),
        }
    }
}

/// How a rule finds its matches: a compiled pattern, or a scan that
/// pushes every match, left to right, onto a list (`counted.rs`).
#[derive(Clone, Copy)]
pub(crate) enum Finder {
    Dfa(usize),
    Scan(fn(&str, &mut Vec<Range<usize>>)),
}

thread_local! {
    /// The list a scan's matches go to, kept from one scan to the next.
    static FOUND: std::cell::RefCell<Vec<Range<usize>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Finder {
    /// Writes into `out` (cleared first) `text` with every match replaced
    /// by what `with` writes for it (given the text and the match's range);
    /// `false`, with `out` left empty, when nothing matched. The caller
    /// keeps `out` from one rule to the next: no allocation once it is large
    /// enough.
    pub(crate) fn replace_into(
        self,
        text: &str,
        out: &mut String,
        mut with: impl FnMut(&str, Range<usize>, &mut String),
    ) -> bool {
        out.clear();
        let mut last = None;
        let mut visit = |m: Range<usize>| {
            if last.is_none() {
                // Room for the text and a few placeholders longer than what they replace.
                out.reserve(text.len() + 16);
            }
            out.push_str(&text[last.unwrap_or(0)..m.start]);
            let end = m.end;
            with(text, m, out);
            last = Some(end);
        };
        match self {
            Finder::Dfa(i) => rule(i).each_match(text, &mut visit),
            Finder::Scan(scan) => FOUND.with_borrow_mut(|found| {
                found.clear();
                scan(text, found);
                found.drain(..).for_each(&mut visit);
            }),
        }
        let Some(last) = last else { return false };
        out.push_str(&text[last..]);
        true
    }
}

/// A dense DFA from bytes `build.rs` wrote, without the validation pass
/// (which walks every transition: about half a millisecond for all of
/// them, in every fresh instance of a detector). The tests validate every
/// one (`every_dfa_passes_validation`).
fn unchecked(name: &str, a: &'static Aligned<[u8]>) -> dense::DFA<&'static [u32]> {
    // SAFETY: the bytes were serialized by `DFA::to_bytes_little_endian` of
    // this same regex-automata (one version in Cargo.lock for the build
    // script and the crate), for a little-endian target, and embedded
    // unchanged with `include_bytes!` into 4-byte-aligned storage.
    unsafe { dense::DFA::from_bytes_unchecked(&a.bytes) }
        .unwrap_or_else(|e| panic!("the {name} DFA built by build.rs does not load: {e}"))
        .0
}

/// [`unchecked`] for a sparse DFA.
fn unchecked_sparse(name: &str, a: &'static Aligned<[u8]>) -> sparse::DFA<&'static [u8]> {
    // SAFETY: as for `unchecked`: bytes of `sparse::DFA::to_bytes_little_endian`
    // of this same regex-automata, for a little-endian target, unchanged
    // (a sparse DFA needs no alignment).
    unsafe { sparse::DFA::from_bytes_unchecked(&a.bytes) }
        .unwrap_or_else(|e| panic!("the {name} sparse DFA built by build.rs does not load: {e}"))
        .0
}

fn load(&(name, is_sparse, forward, reverse): &Embedded) -> Rule {
    let re = if is_sparse {
        Automata::Sparse(
            Regex::builder().build_from_dfas(unchecked_sparse(name, forward), unchecked_sparse(name, reverse)),
        )
    } else {
        Automata::Dense(Regex::builder().build_from_dfas(unchecked(name, forward), unchecked(name, reverse)))
    };
    Rule { name, re }
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| DFAS.iter().map(load).collect());

/// The compiled pattern at index `id` (see [`id`]).
pub(crate) fn rule(id: usize) -> &'static Rule {
    &RULES[id]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_loads_under_its_name() {
        for (i, (name, _)) in super::super::patterns::all().into_iter().enumerate() {
            assert_eq!(rule(i).name, name);
        }
        assert_eq!(rule(id::EMAIL).name, "email");
    }

    #[test]
    fn every_dfa_passes_validation() {
        for (name, is_sparse, forward, reverse) in &DFAS {
            assert_eq!(*is_sparse, super::super::patterns::SPARSE.contains(name), "{name}");
            for a in [forward, reverse] {
                if *is_sparse {
                    sparse::DFA::from_bytes(&a.bytes).map(|_| ()).unwrap_or_else(|e| panic!("{name}: {e}"));
                } else {
                    dense::DFA::from_bytes(&a.bytes).map(|_| ()).unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
        }
    }
}
