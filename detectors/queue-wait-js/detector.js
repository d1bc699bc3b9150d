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
// `detector-world`): `cargo xtask build-detectors` does it. The file is
// self-contained: the first half reads the host's packed batches, the second
// half is the detector. WIT `s64`/`u64` values are BigInts in JavaScript.

// --- reading the host's batches (see the `batch` record in wit/detector.wit) ---

// The version of the rules that build the signature (like the Rust SDK's
// `normalize::VERSION`): bump it when the grouping changes.
const GROUPING_VERSION = 1;

/// An error returned to the host as a `detector-error` (tag: bad-config, bad-input, failed).
class DetectorError extends Error {
  constructor(tag, message) {
    super(message);
    this.payload = { tag, val: message };
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/// Typed, checked access to one packed, columnar batch. A cell reads as
/// undefined when it is null or when the column has another type; an int or
/// boolean column also reads as a float, as in the Rust SDK.
class Batch {
  constructor(raw) {
    this.source = raw.source;
    this.kind = raw.kind;
    this.rows = raw.rows;
    this.raw = raw;
    this.slots = new Map();
    const counts = { text: 0, int: 0, float: 0 };
    raw.columns.forEach((col, c) => {
      const group = col.ty === 'boolean' ? 'int' : col.ty;
      if (!this.slots.has(col.name)) this.slots.set(col.name, { c, ty: col.ty, group, index: counts[group] });
      counts[group] += 1;
    });
    const rows = raw.rows;
    const bad = (what) => new DetectorError('bad-input', `batch ${raw.source}/${raw.kind}: ${what}`);
    if (raw.textEnds.length !== counts.text * rows || raw.ints.length !== counts.int * rows
        || raw.floats.length !== counts.float * rows) {
      throw bad('cell arrays do not match columns x rows');
    }
    if (raw.nulls.length < Math.ceil((raw.columns.length * rows) / 8)) throw bad('null bitmap too short');
    const ends = raw.textEnds;
    for (let i = 0; i + 1 < ends.length; i++) if (ends[i] > ends[i + 1]) throw bad('text offsets out of order or out of range');
    if (ends.length > 0 && ends[ends.length - 1] > raw.text.length) throw bad('text offsets out of order or out of range');
    try {
      UTF8.decode(raw.text);
    } catch {
      throw bad('text is not UTF-8');
    }
  }

  is(source, kind) {
    return this.source === source && this.kind === kind;
  }

  cell(name, row, group) {
    const slot = this.slots.get(name);
    if (slot === undefined || slot.group !== group || row >= this.rows) return undefined;
    const bit = slot.c * this.rows + row;
    const byte = this.raw.nulls[bit >> 3];
    if (byte === undefined || (byte & (1 << (bit & 7))) !== 0) return undefined;
    return slot.index * this.rows + row;
  }

  text(name, row) {
    const i = this.cell(name, row, 'text');
    if (i === undefined) return undefined;
    const ends = this.raw.textEnds;
    try {
      return UTF8.decode(this.raw.text.subarray(i > 0 ? ends[i - 1] : 0, ends[i]));
    } catch {
      return undefined; // not on a character boundary
    }
  }

  /// A BigInt.
  int(name, row) {
    const i = this.cell(name, row, 'int');
    return i === undefined ? undefined : BigInt(this.raw.ints[i]);
  }

  float(name, row) {
    const slot = this.slots.get(name);
    if (slot !== undefined && slot.group === 'int') {
      const v = this.int(name, row);
      return v === undefined ? undefined : Number(v);
    }
    const i = this.cell(name, row, 'float');
    return i === undefined ? undefined : this.raw.floats[i];
  }

  boolean(name, row) {
    const slot = this.slots.get(name);
    if (slot === undefined || slot.ty !== 'boolean') return undefined;
    const v = this.int(name, row);
    return v === undefined ? undefined : v !== 0n;
  }
}

function configValue(context, key, tag, want) {
  const found = context.config.find(([name]) => name === key);
  if (found === undefined || found[1].tag !== tag) throw new DetectorError('bad-config', `\`${key}\` must be ${want}`);
  return found[1].val;
}

function observation(kind, signature, title, at, occurrence, evidence, more = {}) {
  return {
    kind,
    signature,
    groupingVersion: GROUPING_VERSION,
    title,
    origin: more.origin ?? 'harness',
    severity: more.severity ?? 'medium',
    tool: more.tool,
    botId: more.bot,
    threadId: more.thread,
    turnId: more.turn,
    at: BigInt(at),
    occurrence,
    evidence: { source: evidence[0], id: evidence[1] },
    wastedTurns: more.wastedTurns ?? 0,
  };
}

// --- the detector ---

const KIND = 'queue_wait';
const I64_MAX = (1n << 63n) - 1n;

/// A threshold for a title: whole minutes, else whole seconds (truncated).
function human(ms) {
  return ms % 60000n === 0n ? `${ms / 60000n} min` : `${ms / 1000n} s`;
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
    if (!batch.is('runtime', 'queue-wait')) return out;
    for (let row = 0; row < batch.rows; row++) {
      const queueEventId = batch.int('queue_event_id', row);
      const assignmentId = batch.text('assignment_id', row);
      const queuedAt = batch.int('queued_at', row);
      const waitMs = batch.int('wait_ms', row);
      if (queueEventId === undefined || assignmentId === undefined || queuedAt === undefined || waitMs === undefined) {
        continue;
      }
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
    return out;
  }

  finish() {
    if (this.finished) throw new DetectorError('failed', 'finish called twice');
    this.finished = true;
    return { observations: [], state: undefined };
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
