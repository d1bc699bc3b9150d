/* `{{name}}`: a turn that did not end ok (made by `cargo xtask new-detector`).
 *
 * Reads `events` / `turn-completed`. One issue per bot, origin `harness`,
 * severity `low`; the event id is the occurrence. Replace the rule with
 * yours, and the replay case in `cases/` with cases of your own.
 *
 * Built with clang (wasm32-wasi) against the C bindings wit-bindgen generates
 * from wit/detector.wit, made a component by wit-component: `cargo xtask
 * build-detectors` does it, with the C SDK (sdk/c/sentinel_batch.h) on the
 * include path. Strings handed to the host are heap copies (sb_dup): the
 * bindings free them once the host has read them. */

#include "sentinel_batch.h"

#define KIND "{{name}}"

struct exports_sentinel_detector_detector_scan_t {
    bool finished;
};

void exports_sentinel_detector_detector_describe(sentinel_detector_types_descriptor_t *ret) {
    sb_describe(ret, "{{name}}", "0.1.0", KIND, "events", "turn-completed");
}

bool exports_sentinel_detector_detector_start(sentinel_detector_types_scan_context_t *context,
                                              exports_sentinel_detector_detector_own_scan_t *ret, sb_error *err) {
    sentinel_detector_types_scan_context_free(context);
    exports_sentinel_detector_detector_scan_t *scan = calloc(1, sizeof *scan);
    if (!scan) {
        sb_fail(err, SENTINEL_DETECTOR_TYPES_DETECTOR_ERROR_FAILED, "out of memory");
        return false;
    }
    *ret = exports_sentinel_detector_detector_scan_new(scan);
    return true;
}

static bool push(const sb_raw_batch *b, sb_observations *out, sb_error *err) {
    if (!sb_batch_check(b, err)) return false;
    if (!sb_batch_is(b, "events", "turn-completed")) return true;
    sb_column id_c = sb_column_of(b, "id"), ok_c = sb_column_of(b, "ok"), at_c = sb_column_of(b, "created_at"),
              bot_c = sb_column_of(b, "bot_id"), thread_c = sb_column_of(b, "thread_id"),
              turn_c = sb_column_of(b, "turn_id");
    for (uint32_t row = 0; row < b->rows; row++) {
        sb_text id, bot, thread, turn;
        bool ok;
        if (!sb_text_at(b, id_c, row, &id) || !sb_bool_at(b, ok_c, row, &ok) || ok) continue;
        int64_t at = 0;
        if (!sb_int_at(b, at_c, row, &at)) at = 0;
        bool has_bot = sb_text_at(b, bot_c, row, &bot), has_thread = sb_text_at(b, thread_c, row, &thread),
             has_turn = sb_text_at(b, turn_c, row, &turn);
        sb_observation o = {
            .kind = sb_cstr(KIND),
            .signature = has_bot ? bot : sb_cstr("-"),
            .title = sb_cstr("a turn did not end ok"),
            .bot = has_bot ? &bot : NULL,
            .thread = has_thread ? &thread : NULL,
            .turn = has_turn ? &turn : NULL,
            .occurrence = id,
            .evidence_source = sb_cstr("events"),
            .evidence_id = id,
            .origin = SENTINEL_DETECTOR_TYPES_ORIGIN_HARNESS,
            .severity = SENTINEL_DETECTOR_TYPES_SEVERITY_LOW,
            .grouping_version = SB_GROUPING_VERSION,
            .at = at,
            .wasted_turns = 1,
        };
        if (!sb_observe(out, &o)) {
            sb_fail(err, SENTINEL_DETECTOR_TYPES_DETECTOR_ERROR_FAILED, "out of memory");
            return false;
        }
    }
    return true;
}

bool exports_sentinel_detector_detector_method_scan_push(exports_sentinel_detector_detector_borrow_scan_t scan,
                                                         sb_raw_batch *batch,
                                                         exports_sentinel_detector_detector_observations_t *ret,
                                                         sb_error *err) {
    sb_observations out = {0};
    bool ok = !scan->finished && push(batch, &out, err);
    if (scan->finished) sb_fail(err, SENTINEL_DETECTOR_TYPES_DETECTOR_ERROR_FAILED, "push after finish");
    sentinel_detector_types_batch_free(batch);
    if (!ok) {
        sb_discard(&out);
        return false;
    }
    sb_return(&out, ret);
    return true;
}

bool exports_sentinel_detector_detector_method_scan_finish(exports_sentinel_detector_detector_borrow_scan_t scan,
                                                           sentinel_detector_types_scan_output_t *ret, sb_error *err) {
    if (scan->finished) {
        sb_fail(err, SENTINEL_DETECTOR_TYPES_DETECTOR_ERROR_FAILED, "finish called twice");
        return false;
    }
    scan->finished = true;
    memset(ret, 0, sizeof *ret);
    return true;
}

void exports_sentinel_detector_detector_scan_destructor(exports_sentinel_detector_detector_scan_t *scan) {
    free(scan);
}
