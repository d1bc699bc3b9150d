//! The per-store sandbox: a deny-all WASI context, resource limits and the
//! bounded log a detector may write to.
//!
//! One [`StoreData`] backs one store, which serves one detector for one scan
//! (or one `describe` at load). It grants nothing a detector could use to act
//! on the world: no preopened directory, no environment, no arguments, no
//! sockets (every address and name lookup is refused), clocks pinned to the
//! scan time and randomness from a fixed seed. It also owns making such a
//! store ([`Runtime::new_store`]) and arming it before every call: fresh fuel
//! and a fresh epoch deadline ([`Runtime::arm`]). It never touches the data
//! dir.

use std::fmt;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wasi::p2::pipe::{ClosedInputStream, MemoryOutputPipe};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::{Limits, Runtime};
use crate::model::failure::FailureKind;

/// A limit a detector ran into, recorded by the limiter so the failure can be
/// named precisely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitBreach {
    #[error("linear memory limit of {limit} bytes exceeded (all memories together would hold {desired})")]
    Memory { limit: usize, desired: usize },
    #[error("table limit of {limit} elements exceeded (asked for {desired})")]
    Table { limit: usize, desired: usize },
    /// More core instances, tables or memories than a store may create
    /// (`what`: `instance`, `table` or `memory`). Wasmtime checks these counts
    /// itself, without asking the limiter, so this is read from its error.
    #[error("{what} count limit of {limit} exceeded (the component creates {at})")]
    Count { what: &'static str, limit: usize, at: usize },
}

impl LimitBreach {
    /// The failure kind this breach is reported as.
    pub fn kind(&self) -> FailureKind {
        match self {
            LimitBreach::Memory { .. } => FailureKind::Memory,
            LimitBreach::Table { .. } => FailureKind::Table,
            LimitBreach::Count { what: "instance", .. } => FailureKind::Instances,
            LimitBreach::Count { what: "table", .. } => FailureKind::Tables,
            LimitBreach::Count { .. } => FailureKind::Memories,
        }
    }

    /// The count breach wasmtime reports as `resource limit exceeded: {what}
    /// count too high at {at}` (wasmtime 48's `bump_resource_counts`).
    pub(crate) fn from_count_error(err: &wasmtime::Error, limits: &Limits) -> Option<Self> {
        err.chain().find_map(|cause| {
            let text = cause.to_string();
            let rest = text.strip_prefix("resource limit exceeded: ")?;
            let (what, at) = rest.split_once(" count too high at ")?;
            let at: usize = at.trim().parse().ok()?;
            let (what, limit) = match what {
                "instance" => ("instance", limits.instances),
                "table" => ("table", limits.tables),
                "memory" => ("memory", limits.memories),
                _ => return None,
            };
            Some(LimitBreach::Count { what, limit, at })
        })
    }
}

/// Enforces the memory and table caps and remembers the first breach. The
/// memory cap is for the store as a whole: a component with several memories
/// (up to [`Limits::memories`]) shares one budget across all of them.
pub(crate) struct Limiter {
    memory_bytes: usize,
    /// Bytes of linear memory the store's memories hold together.
    memory_total: usize,
    table_elements: usize,
    instances: usize,
    tables: usize,
    memories: usize,
    pub(crate) breach: Option<LimitBreach>,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let total = self.memory_total.saturating_sub(current).saturating_add(desired);
        if total > self.memory_bytes {
            let breach = LimitBreach::Memory { limit: self.memory_bytes, desired: total };
            self.breach.get_or_insert(breach.clone());
            return Err(breach.into());
        }
        let allowed = maximum.is_none_or(|max| desired <= max);
        if allowed {
            self.memory_total = total;
        }
        Ok(allowed)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            let breach = LimitBreach::Table { limit: self.table_elements, desired };
            self.breach.get_or_insert(breach.clone());
            return Err(breach.into());
        }
        Ok(maximum.is_none_or(|max| desired <= max))
    }

    fn instances(&self) -> usize {
        self.instances
    }
    fn tables(&self) -> usize {
        self.tables
    }
    fn memories(&self) -> usize {
        self.memories
    }
}

/// A line a detector logged through `sentinel:detector/host.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub level: LogLevel,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        })
    }
}

/// Bytes of a single log line kept; the rest is cut.
const LOG_LINE_BYTES: usize = 1024;
/// What every line costs of the byte budget besides its text, so that empty
/// lines are not free: the budget also bounds the number of lines.
pub(crate) const LOG_LINE_OVERHEAD: usize = 64;
/// Lines kept per scan at most, whatever their size.
pub(crate) const LOG_LINES: usize = 1000;
/// Bytes one call may move between guest and host (wasmtime's hostcall
/// fuel; its default is 128 MiB). The largest thing a detector sends the
/// host in one call is a call's observations: 10 000 of them (the per-call
/// cap) with long fields fit, 100 000 small ones already do not.
pub(crate) const HOSTCALL_BYTES: usize = 64 << 20;
/// Component-model handles live at once in one store (wasmtime's default is
/// 100 000, the WASI resource table's 1 000 000).
pub(crate) const COMPONENT_HANDLES: usize = 10_000;

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The log a detector writes to, bounded by bytes and lines per scan.
#[derive(Debug, Default)]
pub(crate) struct LogSink {
    budget: usize,
    pub(crate) lines: Vec<LogLine>,
    pub(crate) dropped: u64,
}

impl LogSink {
    /// Keeps one line, sanitized ([`crate::base::sanitize::one_line`]) here, at
    /// the edge, so no consumer ever sees it raw.
    pub(crate) fn push(&mut self, level: LogLevel, message: String) {
        // Dropped before any work once the scan's lines or bytes are spent:
        // a detector logging in a loop costs the host next to nothing.
        // (Escaping only lengthens a line: if its raw cut does not fit, nor will it.)
        let raw = cut(&message, LOG_LINE_BYTES);
        if self.lines.len() >= LOG_LINES || raw.len() + LOG_LINE_OVERHEAD > self.budget {
            self.dropped += 1;
            return;
        }
        let mut message = crate::base::sanitize::one_line(raw).into_owned();
        message.truncate(cut(&message, LOG_LINE_BYTES).len());
        let cost = message.len() + LOG_LINE_OVERHEAD;
        if cost > self.budget {
            self.dropped += 1;
            return;
        }
        self.budget -= cost;
        self.lines.push(LogLine { level, message });
    }

    /// A warning of the host's own about this detector (a few per scan at
    /// most): kept whatever the detector's budget.
    pub(crate) fn host_warning(&mut self, message: String) {
        self.lines.push(LogLine { level: LogLevel::Warn, message });
    }
}

/// A wall clock stopped at the scan time.
struct FixedWallClock(Duration);

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
    fn now(&self) -> Duration {
        self.0
    }
}

/// A monotonic clock that never moves: a detector cannot time anything.
struct FrozenMonotonicClock;

impl HostMonotonicClock for FrozenMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// A pollable that is always ready: in the sandbox's frozen time, every
/// sleep is already over. Without it a guest could block inside the host's
/// `poll` (a sleep), where the epoch deadline cannot reach it; with it a
/// sleeping loop is an ordinary loop, stopped by fuel or the deadline.
pub(crate) struct Ready;

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Ready {
    async fn ready(&mut self) {}
}

/// Replaces the monotonic clock's `subscribe-duration` and
/// `subscribe-instant` with ones that return a [`Ready`] pollable.
pub(crate) fn link_virtual_sleep(linker: &mut wasmtime::component::Linker<StoreData>) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi::p2::DynPollable;
    linker.allow_shadowing(true);
    let mut clock = linker.instance("wasi:clocks/monotonic-clock@0.2.12")?;
    let ready = |mut store: wasmtime::StoreContextMut<'_, StoreData>| -> wasmtime::Result<(Resource<DynPollable>,)> {
        let table = &mut store.data_mut().table;
        let r = table.push(Ready)?;
        Ok((wasmtime_wasi::p2::subscribe(table, r)?,))
    };
    clock.func_wrap("subscribe-duration", move |store, (_,): (u64,)| ready(store))?;
    clock.func_wrap("subscribe-instant", move |store, (_,): (u64,)| ready(store))?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Everything one store holds.
pub(crate) struct StoreData {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) log: LogSink,
    /// Captured, bounded; kept so the pipe lives as long as the store.
    _stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
}

impl StoreData {
    /// A fresh deny-all sandbox. `scan_time_ms` pins the wall clock.
    pub(crate) fn new(limits: &Limits, scan_time_ms: i64) -> Self {
        let stdout = MemoryOutputPipe::new(limits.stdio_bytes);
        let stderr = MemoryOutputPipe::new(limits.stdio_bytes);
        let since_epoch = Duration::from_millis(u64::try_from(scan_time_ms).unwrap_or(0));
        let wasi = WasiCtxBuilder::new()
            .stdin(ClosedInputStream)
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(FixedWallClock(since_epoch))
            .monotonic_clock(FrozenMonotonicClock)
            .secure_random(wasmtime_wasi::Deterministic::new(SEED.to_vec()))
            .insecure_random(wasmtime_wasi::Deterministic::new(SEED.to_vec()))
            .insecure_random_seed(0x05e7_17e1)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        StoreData {
            wasi,
            table: {
                let mut table = ResourceTable::new();
                table.set_max_capacity(COMPONENT_HANDLES);
                table
            },
            limiter: Limiter {
                memory_bytes: limits.memory_bytes,
                memory_total: 0,
                table_elements: limits.table_elements,
                instances: limits.instances,
                tables: limits.tables,
                memories: limits.memories,
                breach: None,
            },
            log: LogSink { budget: limits.log_bytes_per_scan, ..LogSink::default() },
            _stdout: stdout,
            stderr,
        }
    }
}

/// The fixed bytes behind `wasi:random`: deterministic by design, so a
/// detector's output depends on its inputs only.
const SEED: [u8; 16] = *b"sentinel-detsalt";

impl WasiView for StoreData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Where fuel and the epoch deadline are set: each store, and each call.
impl Runtime {
    /// A fresh sandboxed store with the runtime's limits.
    pub(crate) fn new_store(&self, scan_time_ms: i64) -> Store<StoreData> {
        let mut store = Store::new(&self.engine, StoreData::new(&self.limits, scan_time_ms));
        store.limiter(|d| &mut d.limiter);
        // wasmtime's defaults made explicit, and tighter (docs/sandbox.md).
        store.set_hostcall_fuel(HOSTCALL_BYTES);
        store.set_max_component_handles(COMPONENT_HANDLES);
        store.epoch_deadline_trap();
        store
    }

    /// Refills fuel and restarts the deadline before a call.
    pub(crate) fn arm(&self, store: &mut Store<StoreData>) {
        if !self.metered() {
            return;
        }
        // set_fuel only fails when fuel is not enabled, and it is when metered.
        let _ = store.set_fuel(self.limits.fuel_per_call);
        store.set_epoch_deadline(self.deadline_ticks());
    }

    /// Fuel the call just made used (0 when unmetered).
    pub(crate) fn fuel_used(&self, store: &Store<StoreData>) -> u64 {
        // Asked only when metered: without fuel `get_fuel` builds an error,
        // and with `RUST_BACKTRACE` set that captures a backtrace on every
        // call, which the bench's unmetered column would then count.
        if !self.metered() {
            return 0;
        }
        store.get_fuel().map_or(0, |left| self.limits.fuel_per_call.saturating_sub(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_sink_cuts_long_lines_and_drops_past_the_budget() {
        let mut sink = LogSink { budget: 1500, ..LogSink::default() };
        sink.push(LogLevel::Info, "é".repeat(600)); // 1200 bytes, cut to 1024, costs 1088
        assert_eq!(sink.lines[0].message.len(), 1024);
        sink.push(LogLevel::Info, "x".repeat(400)); // over the remaining 412
        assert_eq!(sink.lines.len(), 1);
        assert_eq!(sink.dropped, 1);
        sink.push(LogLevel::Warn, "short".into());
        assert_eq!(sink.lines.len(), 2);
    }

    #[test]
    fn empty_log_lines_are_counted_per_line() {
        let mut sink = LogSink { budget: usize::MAX, ..LogSink::default() };
        for _ in 0..LOG_LINES + 5 {
            sink.push(LogLevel::Info, String::new());
        }
        assert_eq!(sink.lines.len(), LOG_LINES);
        assert_eq!(sink.dropped, 5);
        let mut small = LogSink { budget: 10 * LOG_LINE_OVERHEAD, ..LogSink::default() };
        for _ in 0..20 {
            small.push(LogLevel::Info, String::new());
        }
        assert_eq!(small.lines.len(), 10, "each line costs its overhead");
    }

    #[test]
    fn log_lines_are_sanitized_at_the_edge() {
        let mut sink = LogSink { budget: 4096, ..LogSink::default() };
        sink.push(LogLevel::Warn, "a\u{1b}[2Jb\u{202e}c\nd".into());
        assert_eq!(sink.lines[0].message, "a\\u{1b}[2Jb\\u{202e}c\\u{a}d");
    }

    #[test]
    fn wasmtime_count_errors_are_read_as_count_breaches_and_nothing_else_is() {
        let limits = Limits::default();
        let err = wasmtime::Error::msg("resource limit exceeded: instance count too high at 65")
            .context("while instantiating");
        assert_eq!(
            LimitBreach::from_count_error(&err, &limits),
            Some(LimitBreach::Count { what: "instance", limit: limits.instances, at: 65 })
        );
        let err = wasmtime::Error::msg("resource limit exceeded: memory count too high at 17");
        assert!(matches!(
            LimitBreach::from_count_error(&err, &limits),
            Some(LimitBreach::Count { what: "memory", .. })
        ));
        for other in ["resource limit exceeded: fuel count too high at 3", "instance count too high at 65", "trap"] {
            assert_eq!(LimitBreach::from_count_error(&wasmtime::Error::msg(other), &limits), None, "{other}");
        }
    }

    #[test]
    fn memory_is_capped_across_all_memories_of_a_store() {
        let mut l = Limiter {
            memory_bytes: 100,
            memory_total: 0,
            table_elements: 0,
            instances: 1,
            tables: 1,
            memories: 4,
            breach: None,
        };
        assert!(l.memory_growing(0, 60, None).unwrap());
        // A second memory of 60 would put the store at 120.
        assert!(l.memory_growing(0, 60, None).is_err());
        assert!(matches!(l.breach, Some(LimitBreach::Memory { limit: 100, desired: 120 })));
        // Growing the first one within the total is fine.
        assert!(l.memory_growing(60, 100, None).unwrap());
    }
}
