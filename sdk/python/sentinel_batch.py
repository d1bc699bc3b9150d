"""The host's packed batches, read in Python, and observations packed for the
host: the SDK side of the WIT `batch` and `observations` records
(wit/detector.wit, sentinel:detector@0.2.0) for detectors built with
componentize-py.

`cargo xtask build-detectors` builds this module into every Python detector
(it stages it beside the detector's own files), so a detector imports it:

    from sentinel_batch import BadInput, Batch, observation, pack

`push` and `finish` return `pack(observations)`: the host takes them packed.

It follows the Rust SDK's rules: a null or mistyped cell reads as None, an
int or boolean column also reads as a float, the layout is checked once.
"""

import math
from decimal import Decimal

from componentize_py_types import Err

from wit_world.imports import types as t

# --- reading the host's batches (see the `batch` record in wit/detector.wit) ---

TEXT, INT, FLOAT, BOOLEAN = t.ColumnType.TEXT, t.ColumnType.INT, t.ColumnType.FLOAT, t.ColumnType.BOOLEAN

# The version of the rules that build the signature (like the Rust SDK's
# `Observation::grouping_version`, 1 by default): bump it when the grouping changes.
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

    def time(self, name, row):
        """A time in ms: an int cell, or a finite float cell truncated to whole ms; None otherwise."""
        slot = self._slots.get(name)
        if slot is not None and slot[1] == INT:
            return self.int(name, row)
        v = self.float(name, row)
        if v is None or not math.isfinite(v) or not (-2.0**63 <= v < 2.0**63):
            return None
        return int(v)

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
    """One observation, as a tuple `pack` reads: texts in the WIT's packed field order."""
    return ((kind, signature, title, tool, bot, thread, turn, occurrence, evidence[0], evidence[1]),
            origin, severity, GROUPING_VERSION, at, wasted_turns)


# Bit of `present` for each optional text field (tool, bot, thread, turn: fields 3 to 6).
_OPTIONAL = (3, 4, 5, 6)


def pack(observations):
    """The WIT `observations` record: every text in one buffer with end offsets, the rest in columns."""
    text, ends, present = bytearray(), [], []
    origins, severities, versions, ats, wasted = [], [], [], [], []
    for fields, origin, severity, version, at, wasted_turns in observations:
        bits = 0
        for f, value in enumerate(fields):
            if value is not None:
                text += value.encode("utf-8")
                if f in _OPTIONAL:
                    bits |= 1 << (f - 3)
            ends.append(len(text))
        present.append(bits)
        origins.append(origin)
        severities.append(severity)
        versions.append(version)
        ats.append(at)
        wasted.append(wasted_turns)
    return t.Observations(len(present), bytes(text), ends, bytes(present), origins, severities, versions, ats, wasted)
