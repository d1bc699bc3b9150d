//! Project chores shared by `cargo xtask` and the test suite: building
//! detector components (in Rust, Python and JavaScript) and guest fixtures,
//! scaffolding new detectors, and generating data dirs.

pub mod datagen;
pub mod gateway;
pub mod guest;
pub mod scaffold;
