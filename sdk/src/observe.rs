//! Building observations.

use crate::__bindings::sentinel::detector::types;
use crate::{Origin, Severity};

/// One fact to report. Start with [`Observation::new`], add what applies.
#[derive(Debug, Clone)]
pub struct Observation {
    inner: types::Observation,
}

impl Observation {
    /// `signature` groups observations into one issue (the host stores only a
    /// hash of it); `occurrence` is counted once however often it is seen;
    /// `evidence` is a `(source, id)` reference, never content. The grouping
    /// version starts at 1: set it with [`Observation::grouping_version`]
    /// (`normalize::VERSION` when the signature comes from the normalizer).
    pub fn new(kind: &str, signature: &str, title: &str, at: i64, occurrence: &str, evidence: (&str, &str)) -> Self {
        Observation {
            inner: types::Observation {
                kind: kind.into(),
                signature: signature.into(),
                grouping_version: 1,
                title: title.into(),
                origin: Origin::Harness,
                severity: Severity::Medium,
                tool: None,
                bot_id: None,
                thread_id: None,
                turn_id: None,
                at,
                occurrence: occurrence.into(),
                evidence: types::EvidenceRef { source: evidence.0.into(), id: evidence.1.into() },
                wasted_turns: 0,
            },
        }
    }

    /// Sets the version of the rules that built the signature: bump it when
    /// they change; `normalize::VERSION` for a signature the SDK normalizer
    /// built (`failure::classify`), which changes with it.
    pub fn grouping_version(mut self, version: u32) -> Self {
        self.inner.grouping_version = version;
        self
    }
    pub fn origin(mut self, origin: Origin) -> Self {
        self.inner.origin = origin;
        self
    }
    pub fn severity(mut self, severity: Severity) -> Self {
        self.inner.severity = severity;
        self
    }
    pub fn tool(mut self, tool: Option<&str>) -> Self {
        self.inner.tool = tool.map(Into::into);
        self
    }
    pub fn bot(mut self, bot_id: Option<&str>) -> Self {
        self.inner.bot_id = bot_id.map(Into::into);
        self
    }
    pub fn thread(mut self, thread_id: Option<&str>) -> Self {
        self.inner.thread_id = thread_id.map(Into::into);
        self
    }
    pub fn turn(mut self, turn_id: Option<&str>) -> Self {
        self.inner.turn_id = turn_id.map(Into::into);
        self
    }
    pub fn wasted_turns(mut self, n: u32) -> Self {
        self.inner.wasted_turns = n;
        self
    }

    pub fn kind(&self) -> &str {
        &self.inner.kind
    }
    pub fn signature(&self) -> &str {
        &self.inner.signature
    }
    pub fn title(&self) -> &str {
        &self.inner.title
    }
    pub fn get_origin(&self) -> Origin {
        self.inner.origin
    }
    pub fn get_severity(&self) -> Severity {
        self.inner.severity
    }
    pub fn get_tool(&self) -> Option<&str> {
        self.inner.tool.as_deref()
    }
    pub fn occurrence(&self) -> &str {
        &self.inner.occurrence
    }
    pub fn at(&self) -> i64 {
        self.inner.at
    }
    /// The `(source, id)` evidence reference.
    pub fn evidence(&self) -> (&str, &str) {
        (&self.inner.evidence.source, &self.inner.evidence.id)
    }
    pub fn get_bot(&self) -> Option<&str> {
        self.inner.bot_id.as_deref()
    }
    pub fn get_thread(&self) -> Option<&str> {
        self.inner.thread_id.as_deref()
    }

    pub(crate) fn into_wit(self) -> types::Observation {
        self.inner
    }
}
