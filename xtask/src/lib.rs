//! Project chores shared by `cargo xtask` and the test suite: building
//! detector components and guest fixtures, and generating data dirs.

pub mod datagen;
pub mod guest;
