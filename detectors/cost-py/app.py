"""`cost_py`: the `cost` detector, written in Python.

A single turn that cost more than `cost` USD (5 by default, `--cost` on the
command line). Reads `events` / `turn-completed`. One issue per bot, origin
`harness`, severity `medium`; the event id is the occurrence. It is an exact
port of the Rust `cost` detector (detectors/cost): on the same records it
returns the same observations, which the end-to-end suite checks.

Built with componentize-py against wit/detector.wit (world `detector-world`):
`cargo xtask build-detectors` does it. The module is self-contained: the
first half reads the host's packed batches, the second half is the detector.
"""

import math
from decimal import Decimal

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import detector
from wit_world.imports import types as t

# --- reading the host's batches (see the `batch` record in wit/detector.wit) ---

TEXT, INT, FLOAT, BOOLEAN = t.ColumnType.TEXT, t.ColumnType.INT, t.ColumnType.FLOAT, t.ColumnType.BOOLEAN

# The version of the rules that build the signature (like the Rust SDK's
# `normalize::VERSION`): bump it when the grouping changes.
GROUPING_VERSION = 1


class BadInput(Exception):
    pass


class Batch:
    """Typed, checked access to one packed, columnar batch.

    A cell reads as None when it is null or when the column has another type;
    an int or boolean column also reads as a float, as in the Rust SDK.
    """

    def __init__(self, raw):
        self.source, self.kind, self.rows = raw.source, raw.kind, raw.rows
        self._raw = raw
        self._slots = {}
        self._types = {}
        counts = {TEXT: 0, INT: 0, FLOAT: 0}
        for c, col in enumerate(raw.columns):
            group = INT if col.ty in (INT, BOOLEAN) else col.ty
            self._slots.setdefault(col.name, (c, group, counts[group]))
            self._types.setdefault(col.name, col.ty)
            counts[group] += 1
        rows = raw.rows
        bad = f"batch {raw.source}/{raw.kind}: "
        if (len(raw.text_ends) != counts[TEXT] * rows or len(raw.ints) != counts[INT] * rows
                or len(raw.floats) != counts[FLOAT] * rows):
            raise BadInput(bad + "cell arrays do not match columns x rows")
        if len(raw.nulls) < (len(raw.columns) * rows + 7) // 8:
            raise BadInput(bad + "null bitmap too short")
        ends = raw.text_ends
        if any(ends[i] > ends[i + 1] for i in range(len(ends) - 1)) or (ends and ends[-1] > len(raw.text)):
            raise BadInput(bad + "text offsets out of order or out of range")
        try:
            raw.text.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput(bad + "text is not UTF-8") from None

    def is_(self, source, kind):
        return self.source == source and self.kind == kind

    def _null(self, c, row):
        bit = c * self.rows + row
        nulls = self._raw.nulls
        return bit // 8 >= len(nulls) or nulls[bit // 8] & (1 << (bit % 8)) != 0

    def _cell(self, name, row, group):
        slot = self._slots.get(name)
        if slot is None or slot[1] != group or row >= self.rows or self._null(slot[0], row):
            return None
        return slot[2] * self.rows + row

    def text(self, name, row):
        i = self._cell(name, row, TEXT)
        if i is None:
            return None
        ends = self._raw.text_ends
        start = ends[i - 1] if i > 0 else 0
        try:
            return self._raw.text[start:ends[i]].decode("utf-8")
        except UnicodeDecodeError:  # not on a character boundary
            return None

    def int(self, name, row):
        i = self._cell(name, row, INT)
        return None if i is None else self._raw.ints[i]

    def float(self, name, row):
        slot = self._slots.get(name)
        if slot is not None and slot[1] == INT:
            v = self.int(name, row)
            return None if v is None else float(v)
        i = self._cell(name, row, FLOAT)
        return None if i is None else self._raw.floats[i]

    def boolean(self, name, row):
        if self._types.get(name) != BOOLEAN:
            return None
        v = self.int(name, row)
        return None if v is None else v != 0


def config_float(context, key):
    """A number from the scan context (an integer is widened), else bad-config."""
    for name, value in context.config:
        if name == key:
            if isinstance(value, t.ConfigValue_Float):
                return value.value
            if isinstance(value, t.ConfigValue_Integer):
                return float(value.value)
            break
    raise Err(t.DetectorError_BadConfig(f"`{key}` must be a number"))


def rust_display(x):
    """A float as Rust's `{}` prints it (shortest digits, never an exponent)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    s = format(Decimal(repr(x)), "f")
    return s[:-2] if s.endswith(".0") else s


def observation(kind, signature, title, at, occurrence, evidence, *, origin=t.Origin.HARNESS,
                severity=t.Severity.MEDIUM, tool=None, bot=None, thread=None, turn=None, wasted_turns=0):
    return t.Observation(kind, signature, GROUPING_VERSION, title, origin, severity, tool, bot, thread, turn,
                         at, occurrence, t.EvidenceRef(evidence[0], evidence[1]), wasted_turns)


# --- the detector ---

KIND = "cost"


class Scan(detector.Scan):
    def __init__(self, threshold):
        self.threshold = threshold
        self.finished = False

    def observe(self, id, cost, at, bot, thread, turn):
        if math.isnan(cost) or cost <= self.threshold:
            return None
        title = f"a turn cost more than ${self.threshold:.2f}"
        return observation(KIND, bot if bot is not None else "-", title, at, id, ("events", id),
                           origin=t.Origin.HARNESS, severity=t.Severity.MEDIUM, bot=bot, thread=thread, turn=turn)

    def push(self, raw):
        try:
            batch = Batch(raw)
        except BadInput as e:
            raise Err(t.DetectorError_BadInput(str(e))) from None
        if self.finished:
            raise Err(t.DetectorError_Failed("push after finish"))
        out = []
        if not batch.is_("events", "turn-completed"):
            return out
        for row in range(batch.rows):
            id, cost = batch.text("id", row), batch.float("cost", row)
            if id is None or cost is None:
                continue
            at = batch.int("created_at", row)
            o = self.observe(id, cost, 0 if at is None else at, batch.text("bot_id", row),
                             batch.text("thread_id", row), batch.text("turn_id", row))
            if o is not None:
                out.append(o)
        return out

    def finish(self):
        if self.finished:
            raise Err(t.DetectorError_Failed("finish called twice"))
        self.finished = True
        return t.ScanOutput([], None)


class Detector(exports.Detector):
    def describe(self):
        return t.Descriptor(
            name="cost_py",
            version="0.1.0",
            emits=[KIND],
            subscriptions=[t.Subscription("events", "turn-completed")],
            config=[t.ConfigKey("cost", "USD above which a single turn is reported", t.ConfigValue_Float(5.0))],
            cadence_seconds=None,
        )

    def start(self, context):
        threshold = config_float(context, "cost")
        if not math.isfinite(threshold) or threshold < 0.0:
            raise Err(t.DetectorError_BadConfig(
                f"`cost` must be a non-negative number, got {rust_display(threshold)}"))
        return Scan(threshold)
