/* `cost_c`: the `cost` detector, written in C.
 *
 * A single turn that cost more than `cost` USD (5 by default, `--cost` on the
 * command line). Reads `events` / `turn-completed`. One issue per bot, origin
 * `harness`, severity `high` (the scanner spec ranks harness failures high);
 * the event id is the occurrence; a turn without a usable `created_at` is
 * skipped, a float one truncated to whole ms. It is an exact
 * port of the Rust `cost` detector (detectors/cost): on the same records it
 * returns the same observations, which the end-to-end suite checks.
 *
 * Built with clang (wasm32-wasi, reactor) against the C bindings wit-bindgen
 * generates from wit/detector.wit, made a component by wit-component with the
 * WASI preview 1 adapter: `cargo xtask build-detectors` does it, with the C
 * SDK (sdk/c/sentinel_batch.h) on the include path. */

#include "sentinel_batch.h"

#define KIND "cost"

struct exports_sentinel_detector_detector_scan_t {
    double threshold;
    bool finished;
    /* The same for every fire of a scan: formatted once. */
    char title[96];
};

void exports_sentinel_detector_detector_describe(sentinel_detector_types_descriptor_t *ret) {
    sb_describe(ret, "cost_c", "0.1.0", KIND, "events", "turn-completed");
    sb_config_float_key(ret, "cost", "USD above which a single turn is reported", 5.0);
}

bool exports_sentinel_detector_detector_start(sentinel_detector_types_scan_context_t *context,
                                              exports_sentinel_detector_detector_own_scan_t *ret, sb_error *err) {
    double threshold = 0.0;
    bool ok = sb_config_float(context, "cost", &threshold);
    sentinel_detector_types_scan_context_free(context);
    if (!ok) {
        sb_fail(err, SENTINEL_DETECTOR_TYPES_DETECTOR_ERROR_BAD_CONFIG, "`cost` must be a number");
        return false;
    }
    if (!isfinite(threshold) || threshold < 0.0) {
        char shown[64], message[128];
        sb_rust_display(threshold, shown, sizeof shown);
        snprintf(message, sizeof message, "`cost` must be a non-negative number, got %s", shown);
        sb_fail(err, SENTINEL_DETECTOR_TYPES_DETECTOR_ERROR_BAD_CONFIG, message);
        return false;
    }
    exports_sentinel_detector_detector_scan_t *scan = calloc(1, sizeof *scan);
    if (!scan) {
        sb_fail(err, SENTINEL_DETECTOR_TYPES_DETECTOR_ERROR_FAILED, "out of memory");
        return false;
    }
    scan->threshold = threshold;
    snprintf(scan->title, sizeof scan->title, "a turn cost more than $%.2f", threshold);
    *ret = exports_sentinel_detector_detector_scan_new(scan);
    return true;
}

/* One row: an observation when the turn cost more than the threshold. */
static bool observe(const exports_sentinel_detector_detector_scan_t *scan, sb_observations *out, sb_text id, double cost,
                    int64_t at, const sb_text *bot, const sb_text *thread, const sb_text *turn) {
    if (isnan(cost) || cost <= scan->threshold) return true;
    sb_observation o = {
        .kind = sb_cstr(KIND),
        .signature = bot ? *bot : sb_cstr("-"),
        .title = sb_cstr(scan->title),
        .bot = bot,
        .thread = thread,
        .turn = turn,
        .occurrence = id,
        .evidence_source = sb_cstr("events"),
        .evidence_id = id,
        .origin = SENTINEL_DETECTOR_TYPES_ORIGIN_HARNESS,
        .severity = SENTINEL_DETECTOR_TYPES_SEVERITY_HIGH,
        .grouping_version = SB_GROUPING_VERSION,
        .at = at,
    };
    return sb_observe(out, &o);
}

static bool push(exports_sentinel_detector_detector_scan_t *scan, const sb_raw_batch *b, sb_observations *out,
                 sb_error *err) {
    if (!sb_batch_check(b, err)) return false;
    if (scan->finished) {
        sb_fail(err, SENTINEL_DETECTOR_TYPES_DETECTOR_ERROR_FAILED, "push after finish");
        return false;
    }
    if (!sb_batch_is(b, "events", "turn-completed")) return true;
    /* Columns are looked up once per batch, not once per row. */
    sb_column id_c = sb_column_of(b, "id"), cost_c = sb_column_of(b, "cost"), at_c = sb_column_of(b, "created_at"),
              bot_c = sb_column_of(b, "bot_id"), thread_c = sb_column_of(b, "thread_id"),
              turn_c = sb_column_of(b, "turn_id");
    for (uint32_t row = 0; row < b->rows; row++) {
        sb_text id, bot, thread, turn;
        double cost;
        if (!sb_text_at(b, id_c, row, &id) || !sb_float_at(b, cost_c, row, &cost)) continue;
        /* A turn without a usable time is skipped, never stamped 1970. */
        int64_t at;
        if (!sb_time_at(b, at_c, row, &at)) continue;
        bool has_bot = sb_text_at(b, bot_c, row, &bot), has_thread = sb_text_at(b, thread_c, row, &thread),
             has_turn = sb_text_at(b, turn_c, row, &turn);
        if (!observe(scan, out, id, cost, at, has_bot ? &bot : NULL, has_thread ? &thread : NULL,
                     has_turn ? &turn : NULL)) {
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
    bool ok = push(scan, batch, &out, err);
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
