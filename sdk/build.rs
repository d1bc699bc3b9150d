//! Compiles the normalizer's patterns into DFAs at build time.
//!
//! Owns the step from pattern text (`src/normalize/patterns.rs`, shared with
//! the crate) to serialized automata in `OUT_DIR`: for each pattern a
//! forward DFA (where a match ends) and a reverse DFA (where it starts),
//! built by `regex-automata` (the engine under the `regex` crate, with its
//! leftmost-first semantics), dense or, for the patterns `SPARSE` names,
//! sparse, written little-endian (wasm32 and every target we build for),
//! plus `dfas.rs`, which embeds them. A detector then
//! deserializes them (a validation pass, no compilation). Never runs at run
//! time.

use std::fmt::Write as _;
use std::path::PathBuf;

use regex_automata::dfa::{dense, regex::Regex};

#[path = "src/normalize/patterns.rs"]
#[allow(dead_code)]
mod patterns;

fn main() {
    println!("cargo::rerun-if-changed=src/normalize/patterns.rs");
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut code = String::new();
    let all = patterns::all();
    for (name, pattern) in &all {
        let re = Regex::builder()
            .dense(dense::Config::new().minimize(true))
            .build(pattern)
            .unwrap_or_else(|e| panic!("pattern {name} does not compile: {e}"));
        for (dir, dfa) in [("fwd", re.forward()), ("rev", re.reverse())] {
            let bytes = if patterns::SPARSE.contains(name) {
                dfa.to_sparse()
                    .unwrap_or_else(|e| panic!("pattern {name} has no sparse DFA: {e}"))
                    .to_bytes_little_endian()
            } else {
                let (bytes, pad) = dfa.to_bytes_little_endian();
                bytes[pad..].to_vec()
            };
            let file = out.join(format!("{name}.{dir}.dfa"));
            std::fs::write(&file, bytes).expect("OUT_DIR is writable");
        }
    }
    writeln!(code, "/// A compiled pattern: its name, whether sparse, its forward DFA and its reverse DFA.").unwrap();
    writeln!(code, "pub(super) type Embedded = (&'static str, bool, &'static Aligned<[u8]>, &'static Aligned<[u8]>);")
        .unwrap();
    writeln!(code, "/// Every compiled pattern.").unwrap();
    writeln!(code, "pub(super) static DFAS: [Embedded; {}] = [", all.len()).unwrap();
    for (name, _) in &all {
        let sparse = patterns::SPARSE.contains(name);
        writeln!(
            code,
            "    (\"{name}\", {sparse}, &Aligned {{ _align: [], bytes: *include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}.fwd.dfa\")) }}, &Aligned {{ _align: [], bytes: *include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}.rev.dfa\")) }}),"
        )
        .unwrap();
    }
    writeln!(code, "];").unwrap();
    writeln!(code, "/// Each pattern's index in [`DFAS`], by its name in upper case.").unwrap();
    writeln!(code, "#[allow(dead_code)]\npub(crate) mod id {{").unwrap();
    for (i, (name, _)) in all.iter().enumerate() {
        writeln!(code, "    pub(crate) const {}: usize = {i};", name.to_uppercase()).unwrap();
    }
    writeln!(code, "}}").unwrap();
    std::fs::write(out.join("dfas.rs"), code).expect("OUT_DIR is writable");
}
