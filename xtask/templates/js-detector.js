// `{{name}}`: a turn that did not end ok (made by `cargo xtask new-detector`).
//
// Reads `events` / `turn-completed`. One issue per bot, origin `harness`,
// severity `low`; the event id is the occurrence. Replace the rule with
// yours, and the replay case in `cases/` with cases of your own.
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

const KIND = '{{name}}';

class Scan {
  constructor() {
    this.finished = false;
  }

  push(raw) {
    const batch = new Batch(raw);
    const out = [];
    if (!batch.is('events', 'turn-completed')) return out;
    for (let row = 0; row < batch.rows; row++) {
      const id = batch.text('id', row);
      if (id === undefined || batch.boolean('ok', row) !== false) continue;
      const bot = batch.text('bot_id', row);
      out.push(observation(KIND, bot ?? '-', 'a turn did not end ok', batch.int('created_at', row) ?? 0n, id, ['events', id], {
        origin: 'harness',
        severity: 'low',
        bot,
        thread: batch.text('thread_id', row),
        turn: batch.text('turn_id', row),
        wastedTurns: 1,
      }));
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
      name: KIND,
      version: '0.1.0',
      emits: [KIND],
      subscriptions: [{ source: 'events', kind: 'turn-completed' }],
      config: [],
      cadenceSeconds: undefined,
    };
  },

  start(_context) {
    return new Scan();
  },

  Scan,
};
