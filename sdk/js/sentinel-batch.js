// The host's packed batches, read in JavaScript, and observations packed for
// the host: the SDK side of the WIT `batch` and `observations` records
// (wit/detector.wit, sentinel:detector@0.2.0) for detectors built with
// componentize-js.
//
// `cargo xtask build-detectors` builds this module into every JavaScript
// detector (it stages it beside the detector's own files), so a detector
// imports it:
//
//   import { Batch, DetectorError, configValue, observation, pack } from './sentinel-batch.js';
//
// `push` and `finish` return `pack(observations)`: the host takes them packed.
// It follows the Rust SDK's rules: a null or mistyped cell reads as null, an
// int or boolean column also reads as a float, the layout is checked once.
// WIT `s64`/`u64` values are BigInts in JavaScript.

// --- reading the host's batches (see the `batch` record in wit/detector.wit) ---

// The version of the rules that build the signature (like the Rust SDK's
// `Observation::grouping_version`, 1 by default): bump it when the grouping changes.
export const GROUPING_VERSION = 1;

/// An error returned to the host as a `detector-error` (tag: bad-config, bad-input, failed).
export class DetectorError extends Error {
  constructor(tag, message) {
    super(message);
    this.payload = { tag, val: message };
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/// Typed, checked access to one packed, columnar batch. A cell reads as
/// undefined when it is null or when the column has another type; an int or
/// boolean column also reads as a float, as in the Rust SDK.
export class Batch {
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

export function configValue(context, key, tag, want) {
  const found = context.config.find(([name]) => name === key);
  if (found === undefined || found[1].tag !== tag) throw new DetectorError('bad-config', `\`${key}\` must be ${want}`);
  return found[1].val;
}

export function observation(kind, signature, title, at, occurrence, evidence, more = {}) {
  return {
    // The texts in the WIT's packed field order; tool, bot, thread and turn are optional.
    texts: [kind, signature, title, more.tool, more.bot, more.thread, more.turn, occurrence, evidence[0], evidence[1]],
    origin: more.origin ?? 'harness',
    severity: more.severity ?? 'medium',
    groupingVersion: GROUPING_VERSION,
    at: BigInt(at),
    wastedTurns: more.wastedTurns ?? 0,
  };
}

const FIELDS = 10;
const ENCODER = new TextEncoder();

/// The WIT `observations` record: every text in one buffer with end offsets, the rest in columns.
export function pack(observations) {
  const n = observations.length;
  const parts = [];
  let total = 0;
  const textEnds = new Uint32Array(n * FIELDS);
  const present = new Uint8Array(n);
  const groupingVersions = new Uint32Array(n);
  const at = new BigInt64Array(n);
  const wastedTurns = new Uint32Array(n);
  const origins = [];
  const severities = [];
  observations.forEach((o, i) => {
    o.texts.forEach((value, f) => {
      if (value !== undefined && value !== null) {
        const bytes = ENCODER.encode(value);
        parts.push(bytes);
        total += bytes.length;
        if (f >= 3 && f <= 6) present[i] |= 1 << (f - 3);
      }
      textEnds[i * FIELDS + f] = total;
    });
    origins.push(o.origin);
    severities.push(o.severity);
    groupingVersions[i] = o.groupingVersion;
    at[i] = o.at;
    wastedTurns[i] = o.wastedTurns;
  });
  const text = new Uint8Array(total);
  let offset = 0;
  for (const p of parts) {
    text.set(p, offset);
    offset += p.length;
  }
  return { count: n, text, textEnds, present, origins, severities, groupingVersions, at, wastedTurns };
}
