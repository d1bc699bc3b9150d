// `queue_wait_js`: the `queue_wait` detector, written in JavaScript.
//
// Delegated work that waited longer than `queue_wait` (300 s by default,
// `--queue-wait` on the command line) before it started, or that is still
// waiting at the scan time. Reads `runtime` / `queue-wait`. One issue per bot
// and state (started late, still waiting), origin `harness`, severity `high`;
// the occurrence is the event that queued the work, so work seen still
// waiting and later seen starting is counted once. It is an exact port of the
// Rust `queue_wait` detector (detectors/queue-wait): on the same records it
// returns the same observations, which the end-to-end suite checks.
//
// Built with componentize-js against wit/detector.wit (world
// `detector-world`): `cargo xtask build-detectors` does it, with the SDK's
// batch reader (sdk/js/sentinel-batch.js) beside it. WIT `s64`/`u64` values
// are BigInts in JavaScript.

// Reading the host's packed batches: the SDK's module (sdk/js/sentinel-batch.js),
// which `cargo xtask build-detectors` builds into every JavaScript detector.
import { Batch, DetectorError, configValue, observation, pack } from './sentinel-batch.js';

// --- the detector ---

const KIND = 'queue_wait';
const I64_MAX = (1n << 63n) - 1n;

/// A threshold for a title: whole minutes, else seconds (90.5 s stays 90.5 s).
function human(ms) {
  if (ms % 60000n === 0n) return `${ms / 60000n} min`;
  if (ms % 1000n === 0n) return `${ms / 1000n} s`;
  return `${Number(ms) / 1000} s`;
}

class Scan {
  constructor(thresholdMs) {
    this.thresholdMs = thresholdMs;
    this.finished = false;
  }

  observe(w) {
    if (w.waitMs <= this.thresholdMs) return undefined;
    const state = w.waiting ? 'still waiting' : 'started late';
    const title = w.waiting
      ? `delegated work still waiting after more than ${human(this.thresholdMs)}`
      : `delegated work waited more than ${human(this.thresholdMs)} before starting`;
    const signature = `${w.botId ?? '-'}\n${state}`;
    return observation(KIND, signature, title, w.queuedAt, `queue:${w.queueEventId}`, ['runtime', w.assignmentId], {
      origin: 'harness',
      severity: 'high',
      bot: w.botId,
      thread: w.threadId,
    });
  }

  push(raw) {
    const batch = new Batch(raw);
    if (this.finished) throw new DetectorError('failed', 'push after finish');
    const out = [];
    if (!batch.is('runtime', 'queue-wait')) return pack(out);
    for (let row = 0; row < batch.rows; row++) {
      const queueEventId = batch.int('queue_event_id', row);
      const assignmentId = batch.text('assignment_id', row);
      const queuedAt = batch.int('queued_at', row);
      const waitMs = batch.int('wait_ms', row);
      if (queueEventId === undefined || assignmentId === undefined || queuedAt === undefined || waitMs === undefined) {
        continue;
      }
      // Work cannot have been queued before 1970: a negative time is a corrupt row.
      if (queuedAt < 0n) continue;
      const o = this.observe({
        queueEventId,
        assignmentId,
        threadId: batch.text('thread_id', row),
        botId: batch.text('bot_id', row),
        queuedAt,
        waitMs,
        waiting: batch.boolean('waiting', row) ?? false,
      });
      if (o !== undefined) out.push(o);
    }
    return pack(out);
  }

  finish() {
    if (this.finished) throw new DetectorError('failed', 'finish called twice');
    this.finished = true;
    return { observations: pack([]), state: undefined };
  }
}

export const detector = {
  describe() {
    return {
      name: 'queue_wait_js',
      version: '0.1.0',
      emits: [KIND],
      subscriptions: [{ source: 'runtime', kind: 'queue-wait' }],
      config: [
        {
          name: 'queue_wait',
          doc: 'how long delegated work may wait before it starts',
          default: { tag: 'duration-ms', val: 300000n },
        },
      ],
      cadenceSeconds: undefined,
    };
  },

  start(context) {
    const ms = BigInt(configValue(context, 'queue_wait', 'duration-ms', 'a duration'));
    return new Scan(ms > I64_MAX ? I64_MAX : ms);
  },

  Scan,
};
