// `{{name}}`: a turn that did not end ok (made by `cargo xtask new-detector`).
//
// Reads `events` / `turn-completed`. One issue per bot, origin `harness`,
// severity `low`; the event id is the occurrence. Replace the rule with
// yours, and the replay case in `cases/` with cases of your own.
//
{{build}}

{{sdk_note}}
import { Batch, DetectorError, observation, pack } from '{{batch_module}}';

// --- the detector ---

const KIND = '{{name}}';

class Scan {
  constructor() {
    this.finished = false;
  }

  push(raw) {
    const batch = new Batch(raw);
    const out = [];
    if (!batch.is('events', 'turn-completed')) return pack(out);
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
