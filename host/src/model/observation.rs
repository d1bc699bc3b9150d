//! What detectors report, in the host's own types.
//!
//! The runtime converts the WIT `observation` and `descriptor` records into
//! these at its edge, after checking them; the ledger consumes them. Nothing
//! here is stored as is: the ledger hashes signatures and occurrence keys.
//!
//! Owns: the host's shapes of an observation: [`Observation`] (owned, for
//! callers that build one by hand), [`Observations`] (a detector's checked
//! observations packed in one buffer, what a scan stages) and
//! [`ObservationRef`] (one of either, borrowed). Never: checks (the
//! runtime's) or counting (the ledger's).

use serde::{Deserialize, Serialize};

/// Titles are capped at this many characters (privacy rule of the scanner spec).
pub const TITLE_CHARS: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Harness,
    Shell,
    External,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Harness => "harness",
            Origin::Shell => "shell",
            Origin::External => "external",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "harness" => Origin::Harness,
            "shell" => Origin::Shell,
            "external" => Origin::External,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "low" => Severity::Low,
            "medium" => Severity::Medium,
            "high" => Severity::High,
            _ => return None,
        })
    }
}

/// One observation, as returned by a detector and checked by the runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The detector that reported it.
    pub detector: String,
    pub kind: String,
    /// The detector's grouping key. Hashed by the ledger, never stored.
    pub signature: String,
    /// The version of the rules that built `signature`.
    pub grouping_version: u32,
    pub title: String,
    pub origin: Origin,
    pub severity: Severity,
    pub tool: Option<String>,
    pub bot_id: Option<String>,
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    pub at: i64,
    /// Hashed by the ledger, never stored.
    pub occurrence: String,
    pub evidence_source: String,
    pub evidence_id: String,
    pub wasted_turns: u32,
    /// Made by a detector on probation: a field of the fire and of its
    /// issue, never part of the title.
    pub probation: bool,
}

impl Observation {
    /// This observation, borrowed.
    pub fn view(&self) -> ObservationRef<'_> {
        ObservationRef {
            detector: &self.detector,
            kind: &self.kind,
            signature: &self.signature,
            grouping_version: self.grouping_version,
            title: &self.title,
            origin: self.origin,
            severity: self.severity,
            tool: self.tool.as_deref(),
            bot_id: self.bot_id.as_deref(),
            thread_id: self.thread_id.as_deref(),
            turn_id: self.turn_id.as_deref(),
            at: self.at,
            occurrence: &self.occurrence,
            evidence_source: &self.evidence_source,
            evidence_id: &self.evidence_id,
            wasted_turns: self.wasted_turns,
            probation: self.probation,
        }
    }
}

/// One observation, borrowed: from an [`Observations`] list or an
/// [`Observation`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObservationRef<'a> {
    pub detector: &'a str,
    pub kind: &'a str,
    pub signature: &'a str,
    pub grouping_version: u32,
    pub title: &'a str,
    pub origin: Origin,
    pub severity: Severity,
    pub tool: Option<&'a str>,
    pub bot_id: Option<&'a str>,
    pub thread_id: Option<&'a str>,
    pub turn_id: Option<&'a str>,
    pub at: i64,
    pub occurrence: &'a str,
    pub evidence_source: &'a str,
    pub evidence_id: &'a str,
    pub wasted_turns: u32,
    pub probation: bool,
}

impl ObservationRef<'_> {
    pub fn to_owned(&self) -> Observation {
        Observation {
            detector: self.detector.to_owned(),
            kind: self.kind.to_owned(),
            signature: self.signature.to_owned(),
            grouping_version: self.grouping_version,
            title: self.title.to_owned(),
            origin: self.origin,
            severity: self.severity,
            tool: self.tool.map(str::to_owned),
            bot_id: self.bot_id.map(str::to_owned),
            thread_id: self.thread_id.map(str::to_owned),
            turn_id: self.turn_id.map(str::to_owned),
            at: self.at,
            occurrence: self.occurrence.to_owned(),
            evidence_source: self.evidence_source.to_owned(),
            evidence_id: self.evidence_id.to_owned(),
            wasted_turns: self.wasted_turns,
            probation: self.probation,
        }
    }
}

/// Text fields of one observation in an [`Observations`] buffer: kind,
/// signature, title, tool, bot, thread, turn, occurrence, evidence source
/// and id.
const TEXT_FIELDS: usize = 10;

/// What an observation holds besides its text.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fixed {
    grouping_version: u32,
    origin: Origin,
    severity: Severity,
    /// Bits 0 to 3: `tool`, `bot_id`, `thread_id`, `turn_id` present.
    present: u8,
    at: i64,
    wasted_turns: u32,
}

/// One detector's observations in one text buffer (end offsets per field)
/// and one row of fixed fields each: the host's form of what a call
/// returned, checked, with one allocation per list instead of a dozen
/// strings per observation. The detector and the probation mark are the
/// list's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observations {
    detector: String,
    probation: bool,
    text: String,
    ends: Vec<usize>,
    fixed: Vec<Fixed>,
}

impl Observations {
    /// An empty list of `detector`'s observations.
    pub fn new(detector: &str) -> Self {
        Observations { detector: detector.to_owned(), ..Observations::default() }
    }

    pub fn len(&self) -> usize {
        self.fixed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fixed.is_empty()
    }

    pub fn detector(&self) -> &str {
        &self.detector
    }

    /// Marks every observation of the list as made on probation (a field of
    /// the fire and of its issue, never part of the title).
    pub fn set_probation(&mut self, probation: bool) {
        self.probation = probation;
    }

    /// Makes room for `count` more observations holding `text` bytes of
    /// text, so that pushing them copies each field once and grows nothing.
    pub fn reserve(&mut self, count: usize, text: usize) {
        self.text.reserve(text);
        self.ends.reserve(count * TEXT_FIELDS);
        self.fixed.reserve(count);
    }

    /// Adds `o` (its `detector` and `probation` are the list's, whatever
    /// `o` says).
    pub fn push(&mut self, o: ObservationRef<'_>) {
        let optional = [o.tool, o.bot_id, o.thread_id, o.turn_id];
        let mut present = 0u8;
        for (bit, v) in optional.iter().enumerate() {
            if v.is_some() {
                present |= 1 << bit;
            }
        }
        let [tool, bot, thread, turn] = optional.map(Option::unwrap_or_default);
        for field in
            [o.kind, o.signature, o.title, tool, bot, thread, turn, o.occurrence, o.evidence_source, o.evidence_id]
        {
            self.text.push_str(field);
            self.ends.push(self.text.len());
        }
        self.fixed.push(Fixed {
            grouping_version: o.grouping_version,
            origin: o.origin,
            severity: o.severity,
            present,
            at: o.at,
            wasted_turns: o.wasted_turns,
        });
    }

    /// Observation `i`.
    pub fn get(&self, i: usize) -> Option<ObservationRef<'_>> {
        let fixed = self.fixed.get(i)?;
        let ends = &self.ends[i * TEXT_FIELDS..(i + 1) * TEXT_FIELDS];
        let mut start = if i == 0 { 0 } else { self.ends[i * TEXT_FIELDS - 1] };
        let mut f = [""; TEXT_FIELDS];
        for (slot, &end) in f.iter_mut().zip(ends) {
            *slot = &self.text[start..end];
            start = end;
        }
        let present = fixed.present;
        let opt = |bit: u8, v| (present & (1 << bit) != 0).then_some(v);
        Some(ObservationRef {
            detector: &self.detector,
            kind: f[0],
            signature: f[1],
            grouping_version: fixed.grouping_version,
            title: f[2],
            origin: fixed.origin,
            severity: fixed.severity,
            tool: opt(0, f[3]),
            bot_id: opt(1, f[4]),
            thread_id: opt(2, f[5]),
            turn_id: opt(3, f[6]),
            at: fixed.at,
            occurrence: f[7],
            evidence_source: f[8],
            evidence_id: f[9],
            wasted_turns: fixed.wasted_turns,
            probation: self.probation,
        })
    }

    /// Every observation, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ObservationRef<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i).expect("in range"))
    }

    /// Every observation, owned.
    pub fn to_vec(&self) -> Vec<Observation> {
        self.iter().map(|o| o.to_owned()).collect()
    }
}

/// A typed config value, mirroring the WIT `config-value`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ConfigValue {
    Boolean(bool),
    Integer(i64),
    Float(f64),
    Text(String),
    DurationMs(u64),
}

impl ConfigValue {
    pub fn type_name(&self) -> &'static str {
        match self {
            ConfigValue::Boolean(_) => "boolean",
            ConfigValue::Integer(_) => "integer",
            ConfigValue::Float(_) => "float",
            ConfigValue::Text(_) => "text",
            ConfigValue::DurationMs(_) => "duration",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigKey {
    pub name: String,
    pub doc: String,
    pub default: ConfigValue,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subscription {
    pub source: String,
    pub kind: String,
}

/// What a detector says about itself at load.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub name: String,
    pub version: String,
    pub emits: Vec<String>,
    pub subscriptions: Vec<Subscription>,
    pub config: Vec<ConfigKey>,
    pub cadence_seconds: Option<u32>,
}

#[cfg(test)]
impl Observation {
    /// Observation `i` of `tool_error` for the unit tests: one of three
    /// groups, a turn, an occurrence and an evidence row of its own.
    pub(crate) fn numbered(i: usize) -> Observation {
        Observation {
            detector: "tool_error".into(),
            kind: "tool_error".into(),
            signature: format!("group {}", i % 3),
            grouping_version: 1,
            title: "t".into(),
            origin: Origin::Harness,
            severity: Severity::High,
            tool: Some("Bash".into()),
            bot_id: None,
            thread_id: None,
            turn_id: Some(format!("turn-{i}")),
            at: 1_000 + i as i64,
            occurrence: format!("m{i}"),
            evidence_source: "messages".into(),
            evidence_id: format!("m{i}"),
            wasted_turns: 1,
            probation: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(i: u32, tool: Option<&str>, turn: Option<&str>) -> Observation {
        Observation {
            detector: "ignored".into(),
            kind: "tool_error".into(),
            signature: format!("sïg {i}"),
            grouping_version: i,
            title: "a title".into(),
            origin: Origin::Shell,
            severity: Severity::Medium,
            tool: tool.map(str::to_owned),
            bot_id: Some(String::new()),
            thread_id: None,
            turn_id: turn.map(str::to_owned),
            at: -5 + i64::from(i),
            occurrence: format!("occ-{i}"),
            evidence_source: "messages".into(),
            evidence_id: format!("m{i}"),
            wasted_turns: i,
            probation: false,
        }
    }

    #[test]
    fn pushing_what_was_reserved_grows_nothing() {
        let given: Vec<Observation> = (0..40).map(|i| obs(i, Some("bash"), Some("t"))).collect();
        let fields = |o: &Observation| {
            let optional = [&o.tool, &o.bot_id, &o.thread_id, &o.turn_id].map(|f| f.as_deref().map_or(0, str::len));
            [&o.kind, &o.signature, &o.title, &o.occurrence, &o.evidence_source, &o.evidence_id]
                .map(|f| f.len())
                .iter()
                .chain(&optional)
                .sum::<usize>()
        };
        let text: usize = given.iter().map(fields).sum();
        let mut list = Observations::new("tool_error");
        list.reserve(given.len(), text);
        let room = (list.text.capacity(), list.ends.capacity(), list.fixed.capacity());
        for o in &given {
            list.push(o.view());
        }
        assert_eq!((list.text.capacity(), list.ends.capacity(), list.fixed.capacity()), room);
        assert_eq!(list.text.len(), text);
    }

    #[test]
    fn packed_observations_read_back_as_pushed_with_the_lists_detector_and_probation() {
        let given = [obs(0, Some("bash"), None), obs(1, None, Some("t1")), obs(2, Some(""), Some(""))];
        let mut list = Observations::new("tool_error");
        for o in &given {
            list.push(o.view());
        }
        list.set_probation(true);
        assert_eq!(list.len(), 3);
        let back = list.to_vec();
        for (o, b) in given.iter().zip(&back) {
            let want = Observation { detector: "tool_error".into(), probation: true, ..o.clone() };
            assert_eq!(&want, b);
        }
        assert!(list.get(3).is_none());
        assert!(Observations::new("x").is_empty());
    }
}
