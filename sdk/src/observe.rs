//! Building observations, and packing them the way they cross the boundary.
//!
//! An [`Observation`] keeps its strings in one buffer (one allocation, not
//! ten), and [`pack`] copies a call's observations into the WIT's packed
//! `observations` record: one text buffer with end offsets and fixed-width
//! columns, which the host reads in a handful of copies whatever their number.

use std::fmt;

use crate::__bindings::sentinel::detector::types;
use crate::{Origin, Severity};

/// The text fields, in the WIT's packed order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
enum Field {
    Kind = 0,
    Signature,
    Title,
    Tool,
    Bot,
    Thread,
    Turn,
    Occurrence,
    EvidenceSource,
    EvidenceId,
}

const FIELDS: usize = 10;
/// `present` bit of an optional field: `tool` is bit 0, `turn` bit 3.
const fn bit(f: Field) -> u8 {
    1 << (f as usize - Field::Tool as usize)
}

/// One fact to report. Start with [`Observation::new`], add what applies.
#[derive(Clone)]
pub struct Observation {
    /// Every text field, in the order they were set.
    buf: String,
    /// `(start, end)` of each field in `buf`, by [`Field`].
    spans: [(u32, u32); FIELDS],
    present: u8,
    grouping_version: u32,
    origin: Origin,
    severity: Severity,
    at: i64,
    wasted_turns: u32,
}

impl Observation {
    /// `signature` groups observations into one issue (the host stores only a
    /// hash of it); `occurrence` is counted once however often it is seen;
    /// `evidence` is a `(source, id)` reference, never content. The grouping
    /// version starts at 1: set it with [`Observation::grouping_version`]
    /// (`normalize::VERSION` when the signature comes from the normalizer).
    pub fn new(kind: &str, signature: &str, title: &str, at: i64, occurrence: &str, evidence: (&str, &str)) -> Self {
        let fixed = kind.len() + signature.len() + title.len() + occurrence.len() + evidence.0.len() + evidence.1.len();
        // Room for the optional identifiers most detectors add.
        let mut o = Observation {
            buf: String::with_capacity(fixed + 64),
            spans: [(0, 0); FIELDS],
            present: 0,
            grouping_version: 1,
            origin: Origin::Harness,
            severity: Severity::Medium,
            at,
            wasted_turns: 0,
        };
        o.set(Field::Kind, kind);
        o.set(Field::Signature, signature);
        o.set(Field::Title, title);
        o.set(Field::Occurrence, occurrence);
        o.set(Field::EvidenceSource, evidence.0);
        o.set(Field::EvidenceId, evidence.1);
        o
    }

    fn set(&mut self, f: Field, value: &str) {
        let start = self.buf.len();
        self.buf.push_str(value);
        self.spans[f as usize] = (start as u32, self.buf.len() as u32);
    }

    fn set_optional(&mut self, f: Field, value: Option<&str>) {
        match value {
            Some(v) => {
                self.set(f, v);
                self.present |= bit(f);
            }
            None => {
                self.spans[f as usize] = (0, 0);
                self.present &= !bit(f);
            }
        }
    }

    fn get(&self, f: Field) -> &str {
        let (start, end) = self.spans[f as usize];
        &self.buf[start as usize..end as usize]
    }

    fn get_optional(&self, f: Field) -> Option<&str> {
        (self.present & bit(f) != 0).then(|| self.get(f))
    }

    /// Sets the version of the rules that built the signature: bump it when
    /// they change; `normalize::VERSION` for a signature the SDK normalizer
    /// built (`failure::classify`), which changes with it.
    pub fn grouping_version(mut self, version: u32) -> Self {
        self.grouping_version = version;
        self
    }
    pub fn origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }
    pub fn severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }
    pub fn tool(mut self, tool: Option<&str>) -> Self {
        self.set_optional(Field::Tool, tool);
        self
    }
    pub fn bot(mut self, bot_id: Option<&str>) -> Self {
        self.set_optional(Field::Bot, bot_id);
        self
    }
    pub fn thread(mut self, thread_id: Option<&str>) -> Self {
        self.set_optional(Field::Thread, thread_id);
        self
    }
    pub fn turn(mut self, turn_id: Option<&str>) -> Self {
        self.set_optional(Field::Turn, turn_id);
        self
    }
    pub fn wasted_turns(mut self, n: u32) -> Self {
        self.wasted_turns = n;
        self
    }

    pub fn kind(&self) -> &str {
        self.get(Field::Kind)
    }
    pub fn signature(&self) -> &str {
        self.get(Field::Signature)
    }
    pub fn title(&self) -> &str {
        self.get(Field::Title)
    }
    pub fn get_origin(&self) -> Origin {
        self.origin
    }
    pub fn get_severity(&self) -> Severity {
        self.severity
    }
    pub fn get_tool(&self) -> Option<&str> {
        self.get_optional(Field::Tool)
    }
    pub fn occurrence(&self) -> &str {
        self.get(Field::Occurrence)
    }
    pub fn at(&self) -> i64 {
        self.at
    }
    /// The `(source, id)` evidence reference.
    pub fn evidence(&self) -> (&str, &str) {
        (self.get(Field::EvidenceSource), self.get(Field::EvidenceId))
    }
    pub fn get_bot(&self) -> Option<&str> {
        self.get_optional(Field::Bot)
    }
    pub fn get_thread(&self) -> Option<&str> {
        self.get_optional(Field::Thread)
    }
    pub fn get_turn(&self) -> Option<&str> {
        self.get_optional(Field::Turn)
    }
    pub fn get_grouping_version(&self) -> u32 {
        self.grouping_version
    }
    pub fn get_wasted_turns(&self) -> u32 {
        self.wasted_turns
    }
}

impl fmt::Debug for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observation")
            .field("kind", &self.kind())
            .field("signature", &self.signature())
            .field("grouping_version", &self.grouping_version)
            .field("title", &self.title())
            .field("origin", &self.origin)
            .field("severity", &self.severity)
            .field("tool", &self.get_tool())
            .field("bot_id", &self.get_bot())
            .field("thread_id", &self.get_thread())
            .field("turn_id", &self.get_turn())
            .field("at", &self.at)
            .field("occurrence", &self.occurrence())
            .field("evidence", &self.evidence())
            .field("wasted_turns", &self.wasted_turns)
            .finish()
    }
}

/// Appends `o`'s fields to `text` in the WIT's order, each run of fields
/// that lie back to back in its buffer (those set one after the other) in
/// one copy.
fn copy_fields(o: &Observation, text: &mut Vec<u8>) {
    let buf = o.buf.as_bytes();
    let mut f = 0;
    while f < FIELDS {
        let (start, mut end) = o.spans[f];
        f += 1;
        while f < FIELDS && o.spans[f].0 == end {
            end = o.spans[f].1;
            f += 1;
        }
        text.extend_from_slice(&buf[start as usize..end as usize]);
    }
}

/// Packs a call's observations into the WIT's `observations` record.
pub(crate) fn pack(obs: &[Observation]) -> types::Observations {
    let n = obs.len();
    let text_len: usize = obs.iter().map(|o| o.spans.iter().map(|(s, e)| (e - s) as usize).sum::<usize>()).sum();
    let mut p = types::Observations {
        count: n as u32,
        text: Vec::with_capacity(text_len),
        text_ends: Vec::with_capacity(n * FIELDS),
        present: Vec::with_capacity(n),
        origins: Vec::with_capacity(n),
        severities: Vec::with_capacity(n),
        grouping_versions: Vec::with_capacity(n),
        at: Vec::with_capacity(n),
        wasted_turns: Vec::with_capacity(n),
    };
    for o in obs {
        let mut end = p.text.len() as u32;
        p.text_ends.extend(o.spans.iter().map(|&(s, e)| {
            end += e - s;
            end
        }));
        copy_fields(o, &mut p.text);
        p.present.push(o.present);
        p.origins.push(o.origin);
        p.severities.push(o.severity);
        p.grouping_versions.push(o.grouping_version);
        p.at.push(o.at);
        p.wasted_turns.push(o.wasted_turns);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_back_whatever_order_they_were_set_in() {
        let o = Observation::new("cost", "bot-1", "a turn cost more", 7, "e1", ("events", "e1"))
            .turn(Some("t1"))
            .bot(Some("bot-1"))
            .tool(Some("bash"))
            .tool(None)
            .thread(Some("th"))
            .grouping_version(3);
        assert_eq!((o.kind(), o.signature(), o.title()), ("cost", "bot-1", "a turn cost more"));
        assert_eq!(
            (o.get_bot(), o.get_thread(), o.get_turn(), o.get_tool()),
            (Some("bot-1"), Some("th"), Some("t1"), None)
        );
        assert_eq!((o.occurrence(), o.evidence(), o.at(), o.get_grouping_version()), ("e1", ("events", "e1"), 7, 3));
    }

    #[test]
    fn fields_are_copied_as_one_copy_each_would_copy_them() {
        let observations = [
            Observation::new("k", "s", "t", 1, "o", ("src", "id")),
            Observation::new("", "", "", 1, "", ("", "")).turn(Some("t")).tool(Some("x")).tool(None),
            Observation::new("k", "sig", "t", 1, "o", ("m", "1")).tool(Some("a")).tool(Some("bash")).thread(Some("")),
            Observation::new("k", "s", "é", 1, "o", ("m", "1")).turn(Some("t")).thread(Some("th")).bot(Some("b")),
        ];
        for o in &observations {
            let mut text = Vec::new();
            copy_fields(o, &mut text);
            let each: Vec<u8> =
                o.spans.iter().flat_map(|&(s, e)| o.buf.as_bytes()[s as usize..e as usize].to_vec()).collect();
            assert_eq!(text, each, "{o:?}");
        }
    }

    #[test]
    fn packing_lays_fields_out_in_the_wit_order() {
        let a = Observation::new("k", "s", "t", 1, "o", ("src", "id")).bot(Some("b")).wasted_turns(1);
        let b = Observation::new("k2", "", "é", 2, "o2", ("src", "id2")).tool(Some("bash"));
        let p = pack(&[a, b]);
        assert_eq!(p.count, 2);
        let text = String::from_utf8(p.text).unwrap();
        let mut start = 0;
        let fields: Vec<&str> = p
            .text_ends
            .iter()
            .map(|&end| {
                let f = &text[start..end as usize];
                start = end as usize;
                f
            })
            .collect();
        assert_eq!(fields[..FIELDS], ["k", "s", "t", "", "b", "", "", "o", "src", "id"]);
        assert_eq!(fields[FIELDS..], ["k2", "", "é", "bash", "", "", "", "o2", "src", "id2"]);
        assert_eq!(p.present, [0b0010, 0b0001]);
        assert_eq!((p.at, p.wasted_turns, p.grouping_versions), (vec![1, 2], vec![1, 0], vec![1, 1]));
    }
}
