//! Fixture `cost_v0_1_0`: the `cost` detector built against the released
//! contract `sentinel:detector@0.1.0` (the frozen `wit/since_v0.1.0/`),
//! straight on its generated bindings, the way a third party built detectors
//! before 0.2.0: observations go back as a list of records of strings. The
//! host must still load it, run it, and pass `detectors/cost/cases` with it.
//!
//! It is a port of `cost` (its name says so), so it may share the kind.

wit_bindgen::generate!({
    world: "detector-world",
    path: "../../../wit/since_v0.1.0",
});

use exports::sentinel::detector::detector::{Guest, GuestScan, Scan};
use sentinel::detector::types::{
    Batch, ColumnType, ConfigKey, ConfigValue, Descriptor, DetectorError, EvidenceRef, Observation, Origin,
    ScanContext, ScanOutput, Severity, Subscription,
};

struct Component;

struct CostScan {
    threshold: f64,
    title: String,
}

/// A batch's columns, found by name: `(index in columns, slot in its array)`.
struct Cells<'a> {
    b: &'a Batch,
    slots: Vec<(ColumnType, usize)>,
}

impl<'a> Cells<'a> {
    fn new(b: &'a Batch) -> Result<Self, DetectorError> {
        let (mut t, mut i, mut f) = (0, 0, 0);
        let mut slots = Vec::new();
        for c in &b.columns {
            let n = match c.ty {
                ColumnType::Text => &mut t,
                ColumnType::Int | ColumnType::Boolean => &mut i,
                ColumnType::Float => &mut f,
            };
            slots.push((c.ty, *n));
            *n += 1;
        }
        let rows = b.rows as usize;
        if b.text_ends.len() != t * rows || b.ints.len() != i * rows || b.floats.len() != f * rows {
            return Err(DetectorError::BadInput("cell arrays do not match columns x rows".into()));
        }
        Ok(Cells { b, slots })
    }
    fn col(&self, name: &str) -> Option<usize> {
        self.b.columns.iter().position(|c| c.name == name)
    }
    fn null(&self, c: usize, r: usize) -> bool {
        let bit = c * self.b.rows as usize + r;
        self.b.nulls.get(bit / 8).is_none_or(|x| x & (1 << (bit % 8)) != 0)
    }
    fn text(&self, c: Option<usize>, r: usize) -> Option<String> {
        let c = c?;
        let (ColumnType::Text, slot) = self.slots[c] else { return None };
        if self.null(c, r) {
            return None;
        }
        let idx = slot * self.b.rows as usize + r;
        let start = if idx == 0 { 0 } else { self.b.text_ends[idx - 1] as usize };
        let bytes = self.b.text.get(start..self.b.text_ends[idx] as usize)?;
        String::from_utf8(bytes.to_vec()).ok()
    }
    fn number(&self, c: Option<usize>, r: usize) -> Option<f64> {
        let c = c?;
        if self.null(c, r) {
            return None;
        }
        let rows = self.b.rows as usize;
        match self.slots[c] {
            (ColumnType::Float, s) => Some(self.b.floats[s * rows + r]),
            (ColumnType::Int, s) => Some(self.b.ints[s * rows + r] as f64),
            _ => None,
        }
    }
    fn time(&self, c: Option<usize>, r: usize) -> Option<i64> {
        let c = c?;
        if self.null(c, r) {
            return None;
        }
        let rows = self.b.rows as usize;
        match self.slots[c] {
            (ColumnType::Int, s) => Some(self.b.ints[s * rows + r]),
            (ColumnType::Float, s) => {
                let x = self.b.floats[s * rows + r];
                (x.is_finite() && x >= i64::MIN as f64 && x < i64::MAX as f64).then_some(x as i64)
            }
            _ => None,
        }
    }
}

impl GuestScan for CostScan {
    fn push(&self, b: Batch) -> Result<Vec<Observation>, DetectorError> {
        if b.source != "events" || b.kind != "turn-completed" {
            return Ok(Vec::new());
        }
        let cells = Cells::new(&b)?;
        let (id, cost, at) = (cells.col("id"), cells.col("cost"), cells.col("created_at"));
        let (bot, thread, turn) = (cells.col("bot_id"), cells.col("thread_id"), cells.col("turn_id"));
        let mut out = Vec::new();
        for r in 0..b.rows as usize {
            let (Some(id), Some(cost), Some(at)) = (cells.text(id, r), cells.number(cost, r), cells.time(at, r)) else {
                continue;
            };
            if cost.is_nan() || cost <= self.threshold {
                continue;
            }
            let bot_id = cells.text(bot, r);
            out.push(Observation {
                kind: "cost".into(),
                signature: bot_id.clone().unwrap_or_else(|| "-".into()),
                grouping_version: 1,
                title: self.title.clone(),
                origin: Origin::Harness,
                severity: Severity::High,
                tool: None,
                bot_id,
                thread_id: cells.text(thread, r),
                turn_id: cells.text(turn, r),
                at,
                occurrence: id.clone(),
                evidence: EvidenceRef { source: "events".into(), id },
                wasted_turns: 0,
            });
        }
        Ok(out)
    }

    fn finish(&self) -> Result<ScanOutput, DetectorError> {
        Ok(ScanOutput { observations: Vec::new(), state: None })
    }
}

impl Guest for Component {
    type Scan = CostScan;

    fn describe() -> Descriptor {
        Descriptor {
            name: "cost_v0_1_0".into(),
            version: "0.1.0".into(),
            emits: vec!["cost".into()],
            subscriptions: vec![Subscription { source: "events".into(), kind: "turn-completed".into() }],
            config: vec![ConfigKey {
                name: "cost".into(),
                doc: "USD above which a single turn is reported".into(),
                default: ConfigValue::Float(5.0),
            }],
            cadence_seconds: None,
        }
    }

    fn start(ctx: ScanContext) -> Result<Scan, DetectorError> {
        let threshold = match ctx.config.iter().find(|(k, _)| k == "cost").map(|(_, v)| v) {
            Some(ConfigValue::Float(f)) => *f,
            Some(ConfigValue::Integer(i)) => *i as f64,
            _ => return Err(DetectorError::BadConfig("`cost` must be a number".into())),
        };
        if !threshold.is_finite() || threshold < 0.0 {
            return Err(DetectorError::BadConfig(format!("`cost` must be a non-negative number, got {threshold}")));
        }
        Ok(Scan::new(CostScan { threshold, title: format!("a turn cost more than ${threshold:.2}") }))
    }
}

export!(Component);
