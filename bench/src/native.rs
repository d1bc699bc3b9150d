//! The shipped Rust detectors linked natively, run through the same adapter
//! the component runs (`sentinel_sdk::__private`): the batch is copied in,
//! checked, handed to the detector, and the observations packed into the
//! WIT shape (contract 0.2.0), exactly as the component packs them. The only difference from the component is the sandbox, which
//! is what the component-vs-native ratio measures.
//!
//! This module only runs detector code; it reads no files and keeps no
//! clock beyond timing each call (wall clock for latencies, the thread's CPU
//! time for the run as a whole).

use std::time::{Duration, Instant};

use sentinel_host::model::observation::ConfigValue;
use sentinel_host::model::record::{Batch, ColumnType};
use sentinel_sdk::__bindings::sentinel::detector::types as wit;
use sentinel_sdk::__private::{GuestScan, count, start};
use sentinel_sdk::Detector;

/// One native run over a list of batches.
#[derive(Debug, Clone)]
pub struct NativeRun {
    pub observations: usize,
    /// From `start` to the end of `finish`.
    pub total: Duration,
    /// The same span in the calling thread's CPU time ([`crate::cpu`]).
    pub cpu: Duration,
    /// Each `push`, in order.
    pub pushes: Vec<Duration>,
    pub finish: Duration,
}

pub type NativeFn = fn(&wit::ScanContext, &[wit::Batch]) -> Result<NativeRun, String>;

/// The native twin of a shipped detector, by descriptor name.
pub fn twin(name: &str) -> Option<NativeFn> {
    Some(match name {
        "cost" => run::<cost::Cost>,
        "queue_wait" => run::<queue_wait::QueueWait>,
        "retry_loop" => run::<retry_loop::RetryLoop>,
        "tool_error" => run::<tool_error::ToolError>,
        "turn_stop" => run::<turn_stop::TurnStop>,
        _ => return None,
    })
}

fn run<D: Detector>(ctx: &wit::ScanContext, batches: &[wit::Batch]) -> Result<NativeRun, String> {
    let started = Instant::now();
    let cpu = crate::cpu::thread_now();
    let scan = start::<D>(ctx.clone()).map_err(|e| format!("start: {e:?}"))?;
    let mut observations = 0;
    let mut pushes = Vec::with_capacity(batches.len());
    for b in batches {
        let t = Instant::now();
        // The component gets its own copy of every batch: so does the twin.
        observations += count(&scan.push(b.clone()).map_err(|e| format!("push: {e:?}"))?);
        pushes.push(t.elapsed());
    }
    let t = Instant::now();
    let out = scan.finish().map_err(|e| format!("finish: {e:?}"))?;
    let finish = t.elapsed();
    observations += count(&out.observations);
    drop(out);
    let cpu = crate::cpu::thread_now().saturating_sub(cpu);
    Ok(NativeRun { observations, total: started.elapsed(), cpu, pushes, finish })
}

/// A host batch in the WIT shape the SDK receives.
pub fn to_wit(b: &Batch) -> wit::Batch {
    wit::Batch {
        source: b.source.clone(),
        kind: b.kind.clone(),
        columns: b
            .columns
            .iter()
            .map(|c| wit::Column {
                name: c.name.to_string(),
                ty: match c.ty {
                    ColumnType::Text => wit::ColumnType::Text,
                    ColumnType::Int => wit::ColumnType::Int,
                    ColumnType::Float => wit::ColumnType::Float,
                    ColumnType::Boolean => wit::ColumnType::Boolean,
                },
            })
            .collect(),
        rows: b.rows,
        text: b.text.clone(),
        text_ends: b.text_ends.clone(),
        ints: b.ints.clone(),
        floats: b.floats.clone(),
        nulls: b.nulls.clone(),
    }
}

/// A scan context in the WIT shape the SDK receives.
pub fn context(scan_time_ms: i64, config: &[(String, ConfigValue)]) -> wit::ScanContext {
    wit::ScanContext {
        scan_time: scan_time_ms,
        window_start: 0,
        config: config
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    ConfigValue::Boolean(b) => wit::ConfigValue::Boolean(*b),
                    ConfigValue::Integer(i) => wit::ConfigValue::Integer(*i),
                    ConfigValue::Float(f) => wit::ConfigValue::Float(*f),
                    ConfigValue::Text(t) => wit::ConfigValue::Text(t.clone()),
                    ConfigValue::DurationMs(d) => wit::ConfigValue::DurationMs(*d),
                };
                (k.clone(), v)
            })
            .collect(),
        state: None,
    }
}
