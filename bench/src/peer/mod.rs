//! The canonical-ABI peer: a shipped Rust detector built as a plain core
//! wasm module (`bench/peer/`, the SDK's own adapter behind a hand-written
//! pointer/length ABI), run beside its component so that the page can say
//! what the component model's crossing costs, measured.
//!
//! Owns loading the peers and running one as a scan calls a component: a
//! fresh store, instantiate, `peer_start`, per batch its lists written into
//! memory the guest allocates (`peer_alloc`) and `peer_push`, then
//! `peer_finish`, every answer read in place with the session's checks
//! ([`checks`]). It runs on the product runtime's own engine
//! (`Runtime::bench_engine`: the same configuration, its epoch advanced by
//! the same ticker) with the same fuel per call, epoch deadline and store
//! limits; a guest import (the WASI and host functions the module names but
//! never calls on its paths) traps. Never part of the product: the module
//! and this code live in the benchmark only.

pub mod checks;
pub mod wire;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use sentinel_host::runtime::output::Clamps;
use sentinel_host::runtime::{Limits, Runtime};
use wasmtime::{Engine, InstancePre, Linker, Memory, Module, Store, StoreLimits, StoreLimitsBuilder, TypedFunc};

use sentinel_host::model::observation::Observations;
use wire::{List, PeerBatch};

/// Words of a batch descriptor (`peer_abi::BATCH_WORDS`): `rows, ncols,
/// columns`, then `(ptr, len)` of the seven lists of [`PeerBatch`].
const BATCH_WORDS: usize = 17;

/// The file of `detector`'s peer in a folder of built peers.
pub fn file(dir: &Path, detector: &str) -> PathBuf {
    dir.join(format!("peer_{detector}.wasm"))
}

/// Builds every peer under `bench/peer/` (as the detectors are built, core
/// modules instead of components) and returns the folder that holds them.
pub fn build(root: &Path, target_dir: &Path) -> Result<PathBuf> {
    xtask::guest::build_core_modules(&root.join("bench/peer"), &target_dir.join("bench-peer"))
}

/// The peers found for some detectors, compiled on the runtime's engine.
pub struct Peers {
    engine: Engine,
    deadline_ticks: u64,
    limits: Limits,
    loaded: Vec<(String, InstancePre<StoreLimits>)>,
}

/// One run of a peer, as `suite::ComponentRun` is of a component.
pub struct PeerRun {
    pub cpu: Duration,
    pub wall: Duration,
    pub pushes: Vec<Duration>,
    pub finish: Duration,
    pub observations: usize,
    pub fuel: u64,
}

/// A peer's exports in one instance.
struct Calls {
    memory: Memory,
    alloc: TypedFunc<(u32, u32), u32>,
    start: TypedFunc<(u32, u32), u64>,
    push: TypedFunc<u32, u64>,
    finish: TypedFunc<(), u64>,
}

impl Peers {
    /// The peers in `dir` of the detectors `names` (a detector without one
    /// is left out), on `runtime`'s engine.
    pub fn load<'a>(runtime: &Runtime, dir: &Path, names: impl Iterator<Item = &'a str>) -> Result<Self> {
        let (engine, deadline_ticks) = runtime.bench_engine();
        let mut loaded = Vec::new();
        for name in names {
            let path = file(dir, name);
            if !path.is_file() {
                continue;
            }
            let module = Module::from_file(engine, &path).map_err(|e| anyhow!("{}: {e:#}", path.display()))?;
            let mut linker = Linker::new(engine);
            linker.define_unknown_imports_as_traps(&module).map_err(|e| anyhow!("{name}: {e:#}"))?;
            loaded.push((name.to_owned(), linker.instantiate_pre(&module).map_err(|e| anyhow!("{name}: {e:#}"))?));
        }
        Ok(Peers { engine: engine.clone(), deadline_ticks, limits: runtime.limits().clone(), loaded })
    }

    pub fn has(&self, name: &str) -> bool {
        self.loaded.iter().any(|(n, _)| n == name)
    }

    /// Fresh fuel and a fresh deadline, as `Runtime::arm` gives a component.
    fn arm(&self, store: &mut Store<StoreLimits>) -> Result<()> {
        store.set_fuel(self.limits.fuel_per_call).map_err(|e| anyhow!("{e:#}"))?;
        store.set_epoch_deadline(self.deadline_ticks);
        Ok(())
    }

    fn used(&self, store: &Store<StoreLimits>) -> u64 {
        store.get_fuel().map_or(0, |left| self.limits.fuel_per_call.saturating_sub(left))
    }

    fn store(&self) -> Store<StoreLimits> {
        let l = &self.limits;
        let limits = StoreLimitsBuilder::new()
            .memory_size(l.memory_bytes)
            .table_elements(l.table_elements)
            .instances(l.instances)
            .tables(l.tables)
            .memories(l.memories)
            .build();
        let mut store = Store::new(&self.engine, limits);
        store.limiter(|l| l);
        store.epoch_deadline_trap();
        store
    }

    /// One scan of `name`'s peer over `batches`: what the component's run
    /// does, through the peer's ABI.
    /// `ctx` is [`wire::context`]'s, made before the timing as the batches are.
    pub fn run(
        &self,
        name: &str,
        emits: &[String],
        ctx: &List,
        scan_time_ms: i64,
        batches: &[PeerBatch],
    ) -> Result<PeerRun> {
        let pre = &self.loaded.iter().find(|(n, _)| n == name).with_context(|| format!("no peer of {name}"))?.1;
        let t = Instant::now();
        let cpu = crate::cpu::thread_now();
        let mut store = self.store();
        self.arm(&mut store)?;
        let instance = pre.instantiate(&mut store).map_err(|e| anyhow!("{name} (peer): instantiate: {e:#}"))?;
        let calls = Calls {
            memory: instance.get_memory(&mut store, "memory").context("the peer exports its memory")?,
            alloc: func(&instance, &mut store, "peer_alloc")?,
            start: func(&instance, &mut store, "peer_start")?,
            push: func(&instance, &mut store, "peer_push")?,
            finish: func(&instance, &mut store, "peer_finish")?,
        };
        let mut a = checks::Accepting {
            emits,
            detector: name,
            scan_time_ms,
            per_call: self.limits.observations_per_call,
            per_scan: self.limits.observations_per_scan,
            accepted: 0,
            clamps: Clamps::default(),
            out: Observations::new(name),
        };
        self.arm(&mut store)?;
        let at = write(&mut store, &calls, ctx)?;
        let answer = calls.start.call(&mut store, (at, ctx.len)).map_err(|e| anyhow!("{name} (peer): start: {e:#}"))?;
        let mut fuel = self.used(&store);
        let h = checks::header(calls.memory.data(&store), answer).map_err(|e| anyhow!("{name} (peer): start: {e}"))?;
        if let Some(e) = checks::error(calls.memory.data(&store), &h) {
            bail!("{name} (peer): start: {e}");
        }
        let mut pushes = Vec::with_capacity(batches.len());
        for b in batches {
            let c = Instant::now();
            self.arm(&mut store)?;
            let desc = write_batch(&mut store, &calls, b)?;
            let answer = calls.push.call(&mut store, desc).map_err(|e| anyhow!("{name} (peer): push: {e:#}"))?;
            fuel += self.used(&store);
            accept(&calls, &store, answer, &mut a).map_err(|e| anyhow!("{name} (peer): push: {e}"))?;
            pushes.push(c.elapsed());
        }
        let c = Instant::now();
        self.arm(&mut store)?;
        let answer = calls.finish.call(&mut store, ()).map_err(|e| anyhow!("{name} (peer): finish: {e:#}"))?;
        fuel += self.used(&store);
        let h = accept(&calls, &store, answer, &mut a).map_err(|e| anyhow!("{name} (peer): finish: {e}"))?;
        if h[18] != 0 && h[20] as usize > self.limits.state_bytes {
            bail!("{name} (peer): finish: state of {} bytes is over the limit", h[20]);
        }
        let finish = c.elapsed();
        drop(store);
        let observations = a.out.len();
        drop(a);
        let wall = t.elapsed();
        Ok(PeerRun { cpu: crate::cpu::thread_now().saturating_sub(cpu), wall, pushes, finish, observations, fuel })
    }
}

/// A typed export of a peer.
fn func<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    instance: &wasmtime::Instance,
    store: &mut Store<StoreLimits>,
    name: &str,
) -> Result<TypedFunc<P, R>> {
    instance.get_typed_func(&mut *store, name).map_err(|e| anyhow!("the peer's `{name}`: {e:#}"))
}

/// Reads one answer: its error, or its observations checked into `a`.
fn accept(
    calls: &Calls,
    store: &Store<StoreLimits>,
    answer: u64,
    a: &mut checks::Accepting<'_>,
) -> Result<[u32; checks::HEADER_WORDS], String> {
    let mem = calls.memory.data(store);
    let h = checks::header(mem, answer)?;
    if let Some(e) = checks::error(mem, &h) {
        return Err(e);
    }
    checks::accept(mem, &h, a)?;
    Ok(h)
}

/// Copies `list` into memory the guest allocates; returns its address.
fn write(store: &mut Store<StoreLimits>, calls: &Calls, list: &List) -> Result<u32> {
    let ptr =
        calls.alloc.call(&mut *store, (list.bytes.len() as u32, list.align)).map_err(|e| anyhow!("alloc: {e:#}"))?;
    calls.memory.write(&mut *store, ptr as usize, &list.bytes).map_err(|e| anyhow!("write: {e}"))?;
    Ok(ptr)
}

/// Writes a batch's lists and its descriptor; returns the descriptor's address.
fn write_batch(store: &mut Store<StoreLimits>, calls: &Calls, b: &PeerBatch) -> Result<u32> {
    let mut table = Vec::with_capacity(b.columns.len() * 12);
    for (name, ty) in &b.columns {
        let ptr = write(store, calls, name)?;
        for w in [ptr, name.len, *ty] {
            table.extend(w.to_le_bytes());
        }
    }
    let columns = write(store, calls, &List { len: b.columns.len() as u32 * 3, align: 4, bytes: table })?;
    let mut desc = Vec::with_capacity(BATCH_WORDS * 4);
    for w in [b.rows, b.columns.len() as u32, columns] {
        desc.extend(w.to_le_bytes());
    }
    for list in &b.lists {
        let ptr = write(store, calls, list)?;
        desc.extend(ptr.to_le_bytes());
        desc.extend(list.len.to_le_bytes());
    }
    write(store, calls, &List { len: BATCH_WORDS as u32, align: 4, bytes: desc })
}
