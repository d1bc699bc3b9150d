"""`{{name}}`: a turn that did not end ok (made by `cargo xtask new-detector`).

Reads `events` / `turn-completed`. One issue per bot, origin `harness`,
severity `low`; the event id is the occurrence. Replace the rule with yours,
and the replay case in `cases/` with cases of your own.

{{build}}
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import detector
from wit_world.imports import types as t

{{sdk_note}}
from sentinel_batch import BadInput, Batch, observation, pack

# --- the detector ---

KIND = "{{name}}"


class Scan(detector.Scan):
    def __init__(self):
        self.finished = False

    def push(self, raw):
        try:
            batch = Batch(raw)
        except BadInput as e:
            raise Err(t.DetectorError_BadInput(str(e))) from None
        out = []
        if not batch.is_("events", "turn-completed"):
            return pack(out)
        for row in range(batch.rows):
            id = batch.text("id", row)
            if id is None or batch.boolean("ok", row) is not False:
                continue
            bot = batch.text("bot_id", row)
            at = batch.int("created_at", row)
            out.append(observation(KIND, bot if bot is not None else "-", "a turn did not end ok",
                                   0 if at is None else at, id, ("events", id), origin=t.Origin.HARNESS,
                                   severity=t.Severity.LOW, bot=bot, thread=batch.text("thread_id", row),
                                   turn=batch.text("turn_id", row), wasted_turns=1))
        return pack(out)

    def finish(self):
        if self.finished:
            raise Err(t.DetectorError_Failed("finish called twice"))
        self.finished = True
        return t.ScanOutput(pack([]), None)


class Detector(exports.Detector):
    def describe(self):
        return t.Descriptor(
            name=KIND,
            version="0.1.0",
            emits=[KIND],
            subscriptions=[t.Subscription("events", "turn-completed")],
            config=[],
            cadence_seconds=None,
        )

    def start(self, context):
        return Scan()
