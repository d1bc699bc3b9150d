//! No code: this crate exists for its `Cargo.toml`, which names the features
//! of the WebAssembly tooling crates that wasmtime's macros and sentinel-host
//! both build, so that cargo compiles each of them once (see the manifest).
//!
//! Owns: nothing at run time. Never: code, or a dependency the two sides do
//! not already share.
