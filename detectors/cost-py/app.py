"""`cost_py`: the `cost` detector, written in Python.

A single turn that cost more than `cost` USD (5 by default, `--cost` on the
command line). Reads `events` / `turn-completed`. One issue per bot, origin
`harness`, severity `high` (the scanner spec ranks harness failures high);
the event id is the occurrence; a turn without a usable `created_at` is
skipped, a float one truncated to whole ms. It is an exact
port of the Rust `cost` detector (detectors/cost): on the same records it
returns the same observations, which the end-to-end suite checks.

Built with componentize-py against wit/detector.wit (world `detector-world`):
`cargo xtask build-detectors` does it, with the SDK's batch reader
(sdk/python/sentinel_batch.py) beside it.
"""

import math

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import detector
from wit_world.imports import types as t

# Reading the host's packed batches: the SDK's module (sdk/python/sentinel_batch.py),
# which `cargo xtask build-detectors` builds into every Python detector.
from sentinel_batch import BadInput, Batch, config_float, observation, pack, rust_display

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
                           origin=t.Origin.HARNESS, severity=t.Severity.HIGH, bot=bot, thread=thread, turn=turn)

    def push(self, raw):
        try:
            batch = Batch(raw)
        except BadInput as e:
            raise Err(t.DetectorError_BadInput(str(e))) from None
        if self.finished:
            raise Err(t.DetectorError_Failed("push after finish"))
        out = []
        if not batch.is_("events", "turn-completed"):
            return pack(out)
        for row in range(batch.rows):
            id, cost = batch.text("id", row), batch.float("cost", row)
            if id is None or cost is None:
                continue
            # A turn without a usable time is skipped, never stamped 1970.
            at = batch.time("created_at", row)
            if at is None:
                continue
            o = self.observe(id, cost, at, batch.text("bot_id", row),
                             batch.text("thread_id", row), batch.text("turn_id", row))
            if o is not None:
                out.append(o)
        return pack(out)

    def finish(self):
        if self.finished:
            raise Err(t.DetectorError_Failed("finish called twice"))
        self.finished = True
        return t.ScanOutput(pack([]), None)


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
