//! Host-side bindings: one module per WIT version the host speaks, each
//! bound once, and the one place that tells them apart.
//!
//! Owns: the bindings of the newest contract (`wit/detector.wit`, here at
//! the crate's top level of this module), the frozen releases
//! (`since_v0_1_0`, generated from `wit/since_v0.1.0/`, with its conversions
//! to the newest types), linking every version's host interfaces, and the
//! version-neutral handles the loader and the session use ([`Pre`],
//! [`Instance`], [`Returned`]), and the batch converted once per version
//! ([`PreparedBatch`]). Never: checking what a detector returns (the session
//! and [`super::output`] do) or deciding what a version may do. An older
//! version is converted to the newest shapes at this edge; the only other
//! places that name a frozen release's types are the session's call of a
//! 0.1.0 `push` and the reading of 0.1.0 observations
//! (`super::observations`), and outside `runtime/` the host speaks one
//! contract.
//!
//! The pattern is the one Zed's extension host uses (`wit/since_vX`): a new
//! release adds a module and a folder, and leaves the older ones untouched.

mod batch;
pub(crate) mod since_v0_1_0;

pub use batch::PreparedBatch;

mod latest {
    wasmtime::component::bindgen!({
        world: "detector-world",
        path: "../wit",
    });
}

use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker, ResourceAny};

pub(crate) use latest::exports::sentinel::detector::detector as guest;
pub(crate) use latest::sentinel::detector::host as host_api;
pub(crate) use latest::sentinel::detector::types;
use latest::{DetectorWorld, DetectorWorldPre};

use super::sandbox::StoreData;

/// A version of `sentinel:detector` this host speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WitVersion {
    V0_1_0,
    V0_2_0,
}

impl WitVersion {
    /// Every version the host speaks, oldest first.
    pub const ALL: [WitVersion; 2] = [WitVersion::V0_1_0, WitVersion::V0_2_0];
    /// The newest: what `wit/detector.wit` holds and the SDKs build against.
    pub const LATEST: WitVersion = WitVersion::V0_2_0;

    pub fn as_str(self) -> &'static str {
        match self {
            WitVersion::V0_1_0 => "0.1.0",
            WitVersion::V0_2_0 => "0.2.0",
        }
    }

    pub fn parse(s: &str) -> Option<WitVersion> {
        WitVersion::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for WitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Links the host interfaces of every version (their names differ by
/// version, so they live side by side in one linker).
pub(crate) fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    DetectorWorld::add_to_linker::<StoreData, HasSelf<StoreData>>(linker, |s| s)?;
    since_v0_1_0::DetectorWorld::add_to_linker::<StoreData, HasSelf<StoreData>>(linker, |s| s)?;
    Ok(())
}

impl types::Host for StoreData {}

impl host_api::Host for StoreData {
    fn log(&mut self, level: host_api::Level, message: String) {
        use super::sandbox::LogLevel;
        let level = match level {
            host_api::Level::Debug => LogLevel::Debug,
            host_api::Level::Info => LogLevel::Info,
            host_api::Level::Warn => LogLevel::Warn,
            host_api::Level::Error => LogLevel::Error,
        };
        self.log.push(level, message);
    }
}

/// A component pre-instantiated against the linker, in its version.
pub(crate) enum Pre {
    V0_1_0(since_v0_1_0::DetectorWorldPre<StoreData>),
    V0_2_0(DetectorWorldPre<StoreData>),
}

impl Pre {
    pub fn new(version: WitVersion, pre: InstancePre<StoreData>) -> wasmtime::Result<Pre> {
        Ok(match version {
            WitVersion::V0_1_0 => Pre::V0_1_0(since_v0_1_0::DetectorWorldPre::new(pre)?),
            WitVersion::V0_2_0 => Pre::V0_2_0(DetectorWorldPre::new(pre)?),
        })
    }

    pub fn version(&self) -> WitVersion {
        match self {
            Pre::V0_1_0(_) => WitVersion::V0_1_0,
            Pre::V0_2_0(_) => WitVersion::V0_2_0,
        }
    }

    pub fn instantiate(&self, store: &mut Store<StoreData>) -> wasmtime::Result<Instance> {
        Ok(match self {
            Pre::V0_1_0(p) => Instance::V0_1_0(p.instantiate(store)?),
            Pre::V0_2_0(p) => Instance::V0_2_0(p.instantiate(store)?),
        })
    }
}

/// One instance of a detector, in its version.
pub(crate) enum Instance {
    V0_1_0(since_v0_1_0::DetectorWorld),
    V0_2_0(DetectorWorld),
}

/// Observations as a call returned them: packed (0.2.0 on) or as records (0.1.0).
pub(crate) enum Returned {
    Packed(types::Observations),
    Records(Vec<since_v0_1_0::types::Observation>),
}

impl Returned {
    /// How many observations, before any is looked at.
    pub fn len(&self) -> usize {
        match self {
            Returned::Packed(p) => p.count as usize,
            Returned::Records(r) => r.len(),
        }
    }

    /// Bytes of text the observations hold, as far as the result says
    /// without looking at each (0 for records): room to make before copying.
    pub fn text_len(&self) -> usize {
        match self {
            Returned::Packed(p) => p.text.len(),
            Returned::Records(_) => 0,
        }
    }
}

type Call<T> = wasmtime::Result<Result<T, types::DetectorError>>;

impl Instance {
    pub fn describe(&self, store: &mut Store<StoreData>) -> wasmtime::Result<guest::Descriptor> {
        match self {
            Instance::V0_1_0(w) => w.sentinel_detector_detector().call_describe(store).map(since_v0_1_0::descriptor),
            Instance::V0_2_0(w) => w.sentinel_detector_detector().call_describe(store),
        }
    }

    pub fn start(&self, store: &mut Store<StoreData>, ctx: &types::ScanContext) -> Call<ResourceAny> {
        match self {
            Instance::V0_1_0(w) => {
                let ctx = since_v0_1_0::scan_context(ctx);
                Ok(w.sentinel_detector_detector().call_start(store, &ctx)?.map_err(since_v0_1_0::error))
            }
            Instance::V0_2_0(w) => w.sentinel_detector_detector().call_start(store, ctx),
        }
    }

    pub fn push(&self, store: &mut Store<StoreData>, scan: ResourceAny, batch: &PreparedBatch) -> Call<Returned> {
        match self {
            Instance::V0_1_0(w) => {
                let r = w.sentinel_detector_detector().scan().call_push(store, scan, batch.v0_1_0())?;
                Ok(r.map(Returned::Records).map_err(since_v0_1_0::error))
            }
            Instance::V0_2_0(w) => {
                let r = w.sentinel_detector_detector().scan().call_push(store, scan, &batch.inner)?;
                Ok(r.map(Returned::Packed))
            }
        }
    }

    /// The remaining observations and the state to keep.
    pub fn finish(&self, store: &mut Store<StoreData>, scan: ResourceAny) -> Call<(Returned, Option<Vec<u8>>)> {
        match self {
            Instance::V0_1_0(w) => {
                let r = w.sentinel_detector_detector().scan().call_finish(store, scan)?;
                Ok(r.map(|o| (Returned::Records(o.observations), o.state)).map_err(since_v0_1_0::error))
            }
            Instance::V0_2_0(w) => {
                let r = w.sentinel_detector_detector().scan().call_finish(store, scan)?;
                Ok(r.map(|o| (Returned::Packed(o.observations), o.state)))
            }
        }
    }
}
