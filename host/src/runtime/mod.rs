//! The detector runtime: one wasmtime `Engine` for the process, components
//! loaded and checked against the capability table, and a fresh sandboxed
//! store per detector per scan.
//!
//! It owns everything that touches wasmtime: the engine configuration (fuel,
//! epoch interruption, stack cap), the linker with the deny-all WASI and the
//! host's log interface, loading (`loader`), the per-store sandbox
//! (`sandbox`), calls into a scan (`session`) and the compiled-code cache
//! (`cache`). It never reads the data dir and writes only that cache (a
//! folder of its own, `0700`): sources feed it batches, the ledger takes
//! what comes out. It never runs a guest without fuel and an epoch deadline,
//! except in a runtime built by `Runtime::unmetered`, which exists only with
//! the `bench-unmetered` feature: the benchmark's measure of what metering
//! costs, which no command of the binary constructs. The same feature lends
//! the benchmark this runtime's engine and deadline (`Runtime::bench_engine`),
//! on which it runs its core-module peer of a detector under the same fuel
//! and epoch.

mod bindings;
mod cache;
pub mod capabilities;
mod loader;
mod observations;
pub mod output;
mod sandbox;
mod session;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::component::Linker;
use wasmtime::{Config, Engine};

pub use crate::model::failure::{FailureKind, Phase};
pub use bindings::PreparedBatch;
pub use bindings::WitVersion;
pub use cache::CacheUse;
pub use loader::{Inspection, LoadError, LoadedDetector, detector_files, shared_refusals};
pub use sandbox::{LimitBreach, LogLevel, LogLine};
pub use session::{CallFailure, CallStats, DetectorScan, ScanContext, ScanOutcome};

use sandbox::StoreData;

/// Every cap a detector runs under. All are configurable; the defaults are
/// documented in `docs/sandbox.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Fuel (roughly, wasm instructions) for one call into a detector.
    pub fuel_per_call: u64,
    /// Wall-clock deadline for one call: the fire rule says 100 ms.
    pub deadline: Duration,
    /// Linear memory a store may grow to, in bytes.
    pub memory_bytes: usize,
    /// Elements a table may grow to.
    pub table_elements: usize,
    /// Core instances, tables and memories a store may create.
    pub instances: usize,
    pub tables: usize,
    pub memories: usize,
    /// Native stack a guest may use, in bytes (engine-wide).
    pub max_wasm_stack: usize,
    /// Observations one detector may return from one call.
    pub observations_per_call: usize,
    /// Observations one detector may return in one scan (they are staged in
    /// the ledger until the scan commits: this bounds that file).
    pub observations_per_scan: usize,
    /// New fires (occurrences counted for the first time) and new issues one
    /// detector may add in one scan, at least: its cap is this or the number
    /// of records it was handed, whichever is larger. A detector over it
    /// fails the scan as `over-limit` and nothing of its scan is committed.
    pub fires_per_scan: usize,
    /// Bytes of `log` one detector may write in one scan.
    pub log_bytes_per_scan: usize,
    /// Bytes of stdout and of stderr kept per store.
    pub stdio_bytes: usize,
    /// Largest component file accepted, in bytes.
    pub component_bytes: u64,
    /// Largest state blob a detector may keep, in bytes.
    pub state_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel_per_call: 500_000_000,
            deadline: Duration::from_millis(100),
            memory_bytes: 128 << 20,
            table_elements: 100_000,
            instances: 64,
            tables: 64,
            memories: 16,
            max_wasm_stack: 512 << 10,
            observations_per_call: 10_000,
            observations_per_scan: 1_000_000,
            fires_per_scan: 10_000,
            log_bytes_per_scan: 64 << 10,
            stdio_bytes: 64 << 10,
            component_bytes: 64 << 20,
            state_bytes: 1 << 20,
        }
    }
}

/// Milliseconds between epoch ticks: the deadline is enforced to within one tick.
const TICK: Duration = Duration::from_millis(1);

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot configure the wasm engine")]
    Engine(#[source] wasmtime::Error),
    #[error("cannot start the epoch ticker")]
    Ticker(#[source] std::io::Error),
    #[error("cannot link the host interfaces")]
    Link(#[source] wasmtime::Error),
    #[error("cannot read the detectors directory {path}")]
    DetectorsDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Set to `1`, the engine writes `/tmp/perf-<pid>.map` so that `perf report`
/// names the compiled guest functions. A measuring aid: it changes no code
/// and no limit.
pub const PERFMAP_VAR: &str = "SENTINEL_PERFMAP";

/// The process-wide runtime: engine, linker, limits and the epoch ticker.
pub struct Runtime {
    engine: Engine,
    linker: Linker<StoreData>,
    limits: Limits,
    cache: Option<cache::ComponentCache>,
    /// Advances the epoch while the runtime lives; `None` only in the
    /// benchmark's unmetered runtime, which has no fuel either.
    ticker: Option<Ticker>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("limits", &self.limits).finish_non_exhaustive()
    }
}

struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Advances the engine's epoch every [`TICK`] until dropped.
    fn start(engine: &Engine) -> Result<Self, RuntimeError> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let engine = engine.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("sentinel-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(TICK);
                        engine.increment_epoch();
                    }
                })
                .map_err(RuntimeError::Ticker)?
        };
        Ok(Ticker { stop, thread: Some(thread) })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Runtime {
    pub fn new(limits: Limits) -> Result<Self, RuntimeError> {
        Self::build(limits, true)
    }

    /// The same runtime with neither fuel nor an epoch deadline: a call runs
    /// until it returns. The benchmark runs the shipped components on it
    /// beside the real runtime, so that the page can say what metering costs
    /// (docs/benchmarks.md). Only `sentinel-bench` enables the feature; no
    /// command of the binary constructs one.
    #[cfg(feature = "bench-unmetered")]
    pub fn unmetered(limits: Limits) -> Result<Self, RuntimeError> {
        Self::build(limits, false)
    }

    /// The engine (its epoch advanced by this runtime's ticker) and the
    /// per-call deadline in epoch ticks: the benchmark runs its core-module
    /// peer of a detector on them, with [`Limits::fuel_per_call`], so that
    /// the peer is metered exactly as a component is (docs/benchmarks.md).
    /// Only with the `bench-unmetered` feature; no command of the binary
    /// calls it.
    #[cfg(feature = "bench-unmetered")]
    pub fn bench_engine(&self) -> (&Engine, u64) {
        (&self.engine, self.deadline_ticks())
    }

    fn build(limits: Limits, metered: bool) -> Result<Self, RuntimeError> {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(metered)
            .epoch_interruption(metered)
            .max_wasm_stack(limits.max_wasm_stack)
            .wasm_backtrace_details(wasmtime::WasmBacktraceDetails::Enable);
        // `perf` names guest functions when asked (docs/benchmarks.md, "Profiling a component").
        if std::env::var_os(PERFMAP_VAR).is_some_and(|v| v == "1") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(RuntimeError::Engine)?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(RuntimeError::Link)?;
        sandbox::link_virtual_sleep(&mut linker).map_err(RuntimeError::Link)?;
        bindings::add_to_linker(&mut linker).map_err(RuntimeError::Link)?;

        let ticker = if metered { Some(Ticker::start(&engine)?) } else { None };
        Ok(Runtime { engine, linker, limits, cache: None, ticker })
    }

    /// Keeps compiled components in `dir` (created `0700` when first used).
    pub fn with_cache(mut self, dir: std::path::PathBuf) -> Self {
        self.cache = Some(cache::ComponentCache::new(&self.engine, dir));
        self
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Fuel and the epoch deadline are on: always, but in the benchmark's
    /// unmetered runtime (the one without a ticker).
    fn metered(&self) -> bool {
        self.ticker.is_some()
    }

    /// Epoch ticks that make up the per-call deadline.
    fn deadline_ticks(&self) -> u64 {
        (self.limits.deadline.as_millis() / TICK.as_millis()).max(1) as u64
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker.take();
    }
}
