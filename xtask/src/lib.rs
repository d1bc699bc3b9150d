//! Project chores shared by `cargo xtask` and the test suite: building
//! detector components (in Rust, Python, JavaScript and C) and guest
//! fixtures, scaffolding new detectors, generating data dirs, and packaging.

pub mod datagen;
pub mod dist;
pub mod gateway;
pub mod guest;
pub mod lints;
pub mod scaffold;
