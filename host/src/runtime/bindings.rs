//! Host-side bindings generated from `wit/detector.wit`.
//!
//! Private to the runtime: the rest of the host speaks its own types
//! ([`crate::record::Batch`], [`crate::observation::Observation`]) and the
//! runtime converts at this edge.

wasmtime::component::bindgen!({
    world: "detector-world",
    path: "../wit",
});

pub(crate) use exports::sentinel::detector::detector as guest;
pub(crate) use sentinel::detector::host as host_api;
pub(crate) use sentinel::detector::types;
