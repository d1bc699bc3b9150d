//! One detector's scan: start it, push batches, finish it, and turn every
//! way a call can go wrong into a typed [`CallFailure`].
//!
//! Each call runs with fresh fuel and a fresh epoch deadline in the scan's own
//! store. A failed call poisons the scan: the store is dropped and the detector
//! gets no more calls this scan. Observations are checked here (declared kind,
//! count cap, and field by field through [`super::output`]) before anything
//! else sees them; a detector's error text and stderr are sanitized and capped
//! where they leave the guest. This module never
//! decides what a failure means for the detector's health; the scan does.

use std::fmt;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceAny;
use wasmtime::{Store, Trap, WasmBacktrace};

use super::bindings::{Instance, PreparedBatch, Returned, types};
use super::observations::{self, View};
use super::output;
use super::sandbox::{LimitBreach, LogLine, StoreData};
use super::{Limits, LoadedDetector, Runtime};
use crate::model::failure::{FailureKind, Phase};
use crate::model::observation::{ConfigValue, ObservationRef, Observations, Origin, Severity};

/// A failed call into a detector.
#[derive(Debug, Clone, thiserror::Error)]
#[error("detector {detector}: {phase} failed: {message}")]
pub struct CallFailure {
    pub detector: String,
    pub phase: Phase,
    pub kind: FailureKind,
    pub message: String,
    /// The guest backtrace, with function names where the component has them.
    pub backtrace: Option<String>,
    /// The tail of what the guest wrote to stderr (a panic message lands there).
    pub stderr: Option<String>,
}

/// Classifies a wasmtime error from a call. Limit breaches are read from the
/// store's limiter, which saw them happen.
pub(crate) fn classify_failure(
    detector: &str,
    phase: Phase,
    store: &Store<StoreData>,
    err: &wasmtime::Error,
    limits: &Limits,
) -> CallFailure {
    let backtrace = err.downcast_ref::<WasmBacktrace>().map(|bt| bt.to_string());
    let (kind, message): (FailureKind, String) = if let Some(breach) = &store.data().limiter.breach {
        (breach.kind(), breach.to_string())
    } else if let Some(breach) = LimitBreach::from_count_error(err, limits) {
        (breach.kind(), breach.to_string())
    } else if let Some(trap) = err.downcast_ref::<Trap>() {
        match trap {
            Trap::Interrupt => {
                (FailureKind::Deadline, format!("stopped at the {} ms deadline", limits.deadline.as_millis()))
            }
            Trap::OutOfFuel => {
                (FailureKind::Fuel, format!("ran out of fuel ({} units per call)", limits.fuel_per_call))
            }
            Trap::StackOverflow => (FailureKind::Stack, "wasm stack overflow".to_owned()),
            other => (FailureKind::Trap, format!("trapped: {other}")),
        }
    } else {
        // Can quote the guest (a function name from its name section).
        let msg = guest_text(&format!("{err:#}"));
        (FailureKind::Host, msg)
    };
    CallFailure { detector: detector.to_owned(), phase, kind, message, backtrace, stderr: stderr_tail(store) }
}

/// Bytes of a detector's error text kept.
const ERROR_TEXT_BYTES: usize = 4096;

/// Text a detector supplied, for a failure report: one line, sanitized, capped.
fn guest_text(raw: &str) -> String {
    let mut s = crate::base::sanitize::one_line(raw).into_owned();
    if s.len() > ERROR_TEXT_BYTES {
        let mut end = ERROR_TEXT_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// Bytes of guest stderr kept in a failure report.
const STDERR_TAIL: usize = 2048;

fn stderr_tail(store: &Store<StoreData>) -> Option<String> {
    let bytes = store.data().stderr.contents();
    if bytes.is_empty() {
        return None;
    }
    let tail = &bytes[bytes.len().saturating_sub(STDERR_TAIL)..];
    Some(crate::base::sanitize::multi_line(String::from_utf8_lossy(tail).trim()).into_owned())
}

/// Everything a scan knows besides its records, in host types.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanContext {
    pub scan_time_ms: i64,
    pub window_start_ms: i64,
    /// Operator values by key; keys the detector does not declare are ignored
    /// by the caller before this point.
    pub config: Vec<(String, ConfigValue)>,
    pub state: Option<Vec<u8>>,
}

/// What a finished scan hands back.
#[derive(Debug, Clone)]
pub struct ScanOutcome {
    /// What `finish` returned, and whatever earlier calls returned that was
    /// not taken.
    pub observations: Observations,
    pub state: Option<Vec<u8>>,
    pub stats: CallStats,
    pub logs: Vec<LogLine>,
    pub logs_dropped: u64,
}

/// Cost of one detector's scan, for the summary and the benchmark.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallStats {
    pub calls: u32,
    pub records: u64,
    pub fuel: u64,
    pub total: Duration,
    /// The slowest single call, to compare with the deadline.
    pub slowest: Duration,
    /// The final decision call (`finish`).
    pub finish: Duration,
    /// Instantiation and `start`, the first call.
    pub start: Duration,
}

/// A running scan of one detector.
pub struct DetectorScan<'r> {
    runtime: &'r Runtime,
    name: String,
    emits: Vec<String>,
    store: Store<StoreData>,
    world: Instance,
    scan: ResourceAny,
    /// Accepted and not yet taken by [`DetectorScan::take_observations`].
    observations: Observations,
    /// Accepted this scan, taken or not: the per-scan cap counts these.
    accepted: usize,
    stats: CallStats,
    scan_time_ms: i64,
    /// What the field checks changed, reported once at `finish`.
    clamps: output::Clamps,
}

impl fmt::Debug for DetectorScan<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DetectorScan").field("name", &self.name).field("stats", &self.stats).finish_non_exhaustive()
    }
}

impl Runtime {
    /// Instantiates `detector` in a fresh store and starts its scan.
    pub fn start_scan<'r>(
        &'r self,
        detector: &LoadedDetector,
        ctx: ScanContext,
    ) -> Result<DetectorScan<'r>, CallFailure> {
        let name = detector.descriptor.name.clone();
        let scan_time_ms = ctx.scan_time_ms;
        let mut store = self.new_store(ctx.scan_time_ms);
        let started = Instant::now();
        // Instantiation runs the component's start functions: it gets the
        // same fuel and deadline as any call.
        self.arm(&mut store);
        let world = detector
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify_failure(&name, Phase::Instantiate, &store, &e, &self.limits))?;
        let wit_ctx = types::ScanContext {
            scan_time: ctx.scan_time_ms,
            window_start: ctx.window_start_ms,
            config: ctx.config.into_iter().map(|(k, v)| (k, to_wit_config(v))).collect(),
            state: ctx.state,
        };
        self.arm(&mut store);
        let result = world.start(&mut store, &wit_ctx);
        let fuel = self.fuel_used(&store);
        let scan = match result {
            Ok(Ok(scan)) => scan,
            Ok(Err(e)) => return Err(detector_error(&name, Phase::Start, e, &store)),
            Err(e) => {
                return Err(classify_failure(&name, Phase::Start, &store, &e, &self.limits));
            }
        };
        let elapsed = started.elapsed();
        Ok(DetectorScan {
            runtime: self,
            name,
            emits: detector.descriptor.emits.clone(),
            store,
            world,
            scan,
            observations: Observations::new(&detector.descriptor.name),
            accepted: 0,
            scan_time_ms,
            clamps: output::Clamps::default(),
            stats: CallStats {
                calls: 1,
                records: 0,
                fuel,
                total: elapsed,
                slowest: elapsed,
                finish: Duration::ZERO,
                start: elapsed,
            },
        })
    }
}

impl DetectorScan<'_> {
    pub fn name(&self) -> &str {
        &self.name
    }

    fn account(&mut self, started: Instant) -> Duration {
        let elapsed = started.elapsed();
        let fuel = self.runtime.fuel_used(&self.store);
        self.stats.calls += 1;
        self.stats.fuel += fuel;
        self.stats.total += elapsed;
        self.stats.slowest = self.stats.slowest.max(elapsed);
        elapsed
    }

    /// Pushes one batch. On failure the scan is over for this detector.
    pub fn push(&mut self, batch: &PreparedBatch) -> Result<(), CallFailure> {
        self.runtime.arm(&mut self.store);
        let started = Instant::now();
        let result = self.world.push(&mut self.store, self.scan, batch);
        self.account(started);
        self.stats.records += u64::from(batch.inner.rows);
        match result {
            Ok(Ok(obs)) => self.accept(Phase::Push, obs),
            Ok(Err(e)) => Err(detector_error(&self.name, Phase::Push, e, &self.store)),
            Err(e) => Err(classify_failure(&self.name, Phase::Push, &self.store, &e, &self.runtime.limits)),
        }
    }

    /// Asks for the decision and ends the scan.
    pub fn finish(mut self) -> Result<ScanOutcome, CallFailure> {
        self.runtime.arm(&mut self.store);
        let started = Instant::now();
        let result = self.world.finish(&mut self.store, self.scan);
        self.stats.finish = self.account(started);
        let (observations, state) = match result {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(detector_error(&self.name, Phase::Finish, e, &self.store)),
            Err(e) => {
                return Err(classify_failure(&self.name, Phase::Finish, &self.store, &e, &self.runtime.limits));
            }
        };
        self.accept(Phase::Finish, observations)?;
        if let Some(state) = &state
            && state.len() > self.runtime.limits.state_bytes
        {
            return Err(self.invalid(
                Phase::Finish,
                format!("state of {} bytes is over the limit of {}", state.len(), self.runtime.limits.state_bytes),
            ));
        }
        let data = self.store.data_mut();
        if let Some(warning) = self.clamps.warning() {
            data.log.host_warning(warning);
        }
        let logs = std::mem::take(&mut data.log.lines);
        let logs_dropped = data.log.dropped;
        Ok(ScanOutcome { observations: self.observations, state, stats: self.stats, logs, logs_dropped })
    }

    pub fn stats(&self) -> &CallStats {
        &self.stats
    }

    /// Hands over what the detector reported so far, so a caller can stream
    /// observations out (to the ledger's staging) instead of holding them all
    /// until [`DetectorScan::finish`], which returns only what is left.
    pub fn take_observations(&mut self) -> Observations {
        std::mem::replace(&mut self.observations, Observations::new(&self.name))
    }

    /// Observations accepted this scan so far, taken or not.
    pub fn accepted(&self) -> usize {
        self.accepted
    }

    fn invalid(&self, phase: Phase, message: String) -> CallFailure {
        CallFailure {
            detector: self.name.clone(),
            phase,
            kind: FailureKind::InvalidOutput,
            message,
            backtrace: None,
            stderr: stderr_tail(&self.store),
        }
    }

    fn accept(&mut self, phase: Phase, obs: Returned) -> Result<(), CallFailure> {
        let per_call = self.runtime.limits.observations_per_call;
        if obs.len() > per_call {
            return Err(
                self.invalid(phase, format!("{} observations from one call, over the limit of {per_call}", obs.len()))
            );
        }
        let cap = self.runtime.limits.observations_per_scan;
        if self.accepted + obs.len() > cap {
            return Err(self.invalid(phase, format!("more than {cap} observations in one scan")));
        }
        self.accepted += obs.len();
        let (emits, name, scan_time_ms) = (&self.emits, &self.name, self.scan_time_ms);
        let (out, clamps) = (&mut self.observations, &mut self.clamps);
        // Within the caps just checked; the text about what the call returned
        // (a sanitized title may be longer: the buffer then grows as it did).
        out.reserve(obs.len(), obs.text_len());
        let checked = observations::each(&obs, |v| checked(v, emits, name, scan_time_ms, clamps, out));
        checked.map_err(|message| self.invalid(phase, message))
    }
}

/// Adds one observation to `out`, after every check on its values: the
/// fields are copied once, into the list's buffer.
fn checked(
    v: View<'_>,
    emits: &[String],
    detector: &str,
    scan_time_ms: i64,
    c: &mut output::Clamps,
    out: &mut Observations,
) -> Result<(), String> {
    if !emits.iter().any(|e| e == v.kind) {
        let kind = crate::base::sanitize::one_line(v.kind);
        return Err(format!("observation kind `{kind}` is not declared in emits"));
    }
    output::key("occurrence key", v.occurrence, false)?;
    output::key("signature", v.signature, true)?;
    let title = output::title(v.title);
    let [tool, bot_id, thread_id, turn_id] =
        [v.tool, v.bot_id, v.thread_id, v.turn_id].map(|id| output::opt_identifier(id, c));
    let (evidence_source, evidence_id) =
        (output::identifier(v.evidence_source, c), output::identifier(v.evidence_id, c));
    out.push(ObservationRef {
        detector,
        kind: v.kind,
        signature: v.signature,
        grouping_version: v.grouping_version,
        title: &title,
        origin: match v.origin {
            types::Origin::Harness => Origin::Harness,
            types::Origin::Shell => Origin::Shell,
            types::Origin::External => Origin::External,
        },
        severity: match v.severity {
            types::Severity::Low => Severity::Low,
            types::Severity::Medium => Severity::Medium,
            types::Severity::High => Severity::High,
        },
        tool: tool.as_deref(),
        bot_id: bot_id.as_deref(),
        thread_id: thread_id.as_deref(),
        turn_id: turn_id.as_deref(),
        at: output::at(v.at, scan_time_ms, c),
        occurrence: v.occurrence,
        evidence_source: &evidence_source,
        evidence_id: &evidence_id,
        wasted_turns: output::wasted_turns(v.wasted_turns, c),
        probation: false,
    });
    Ok(())
}

/// A `detector-error` the guest returned, with the tail of its stderr.
fn detector_error(name: &str, phase: Phase, e: types::DetectorError, store: &Store<StoreData>) -> CallFailure {
    let message = match &e {
        types::DetectorError::BadConfig(m) => format!("bad config: {}", guest_text(m)),
        types::DetectorError::BadInput(m) => format!("bad input: {}", guest_text(m)),
        types::DetectorError::Failed(m) => guest_text(m),
    };
    CallFailure {
        detector: name.to_owned(),
        phase,
        kind: FailureKind::DetectorError,
        message,
        backtrace: None,
        stderr: stderr_tail(store),
    }
}

pub(crate) fn convert_config_value(v: types::ConfigValue) -> ConfigValue {
    match v {
        types::ConfigValue::Boolean(b) => ConfigValue::Boolean(b),
        types::ConfigValue::Integer(i) => ConfigValue::Integer(i),
        types::ConfigValue::Float(f) => ConfigValue::Float(f),
        types::ConfigValue::Text(s) => ConfigValue::Text(s),
        types::ConfigValue::DurationMs(d) => ConfigValue::DurationMs(d),
    }
}

fn to_wit_config(v: ConfigValue) -> types::ConfigValue {
    match v {
        ConfigValue::Boolean(b) => types::ConfigValue::Boolean(b),
        ConfigValue::Integer(i) => types::ConfigValue::Integer(i),
        ConfigValue::Float(f) => types::ConfigValue::Float(f),
        ConfigValue::Text(s) => types::ConfigValue::Text(s),
        ConfigValue::DurationMs(d) => types::ConfigValue::DurationMs(d),
    }
}
