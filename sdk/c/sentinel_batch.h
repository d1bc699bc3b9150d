/* sentinel_batch.h: the host's packed batches, read in C, and the values a
 * detector returns, built in C. The SDK side of the WIT `batch` record
 * (wit/detector.wit) for detectors built with clang and wit-component;
 * `cargo xtask build-detectors` compiles every C detector with this folder
 * on its include path, beside the bindings wit-bindgen generates.
 *
 * It follows the Rust SDK's rules: a null or mistyped cell reads as absent,
 * an int or boolean column also reads as a float, the layout is checked once
 * (sb_batch_check). Observations are packed as they are added (sb_observe:
 * one text buffer with end offsets, the WIT `observations` record of
 * sentinel:detector@0.2.0); the bindings free what a detector returns once
 * the host has read it.
 *
 * Header only: include it in one .c file. */
#ifndef SENTINEL_BATCH_H
#define SENTINEL_BATCH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detector_world.h"

/* The version of the rules that build the signature (the Rust SDK's
 * `normalize::VERSION`): bump it when the grouping changes. */
#define SB_GROUPING_VERSION 1

typedef sentinel_detector_types_batch_t sb_raw_batch;
typedef sentinel_detector_types_detector_error_t sb_error;
typedef detector_world_string_t sb_string;

/* A text cell: bytes into the batch's text, not NUL-terminated. */
typedef struct {
    const char *ptr;
    size_t len;
} sb_text;

/* A column of one batch: where its cells are, or absent (index < 0). */
typedef struct {
    int index;  /* in batch->columns */
    int group;  /* TEXT, INT (int and boolean) or FLOAT */
    size_t slot;  /* its rank among the columns of its group */
} sb_column;

static inline bool sb_str_eq(const sb_string *s, const char *c) {
    size_t n = strlen(c);
    return s->len == n && memcmp(s->ptr, c, n) == 0;
}

static inline sb_string sb_dup(const char *s) {
    sb_string out;
    detector_world_string_dup(&out, s);
    return out;
}

static inline sb_string sb_dup_text(sb_text t) {
    sb_string out;
    detector_world_string_dup_n(&out, t.ptr, t.len);
    return out;
}

/* An error for the host: bad-config, bad-input or failed, with a message. */
static inline void sb_fail(sb_error *err, uint8_t tag, const char *message) {
    err->tag = tag;
    detector_world_string_dup(&err->val.bad_config, message);
}

static inline int sb_group(sentinel_detector_types_column_type_t ty) {
    return ty == SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_BOOLEAN ? SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_INT : ty;
}

static inline bool sb_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || i + len > n) return false;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

/* Checks the layout of a batch once: cell arrays match columns x rows, the
 * null bitmap is long enough, text offsets are in order and in range, the
 * text is UTF-8. On failure writes a bad-input error and returns false. */
static inline bool sb_batch_check(const sb_raw_batch *b, sb_error *err) {
    size_t counts[3] = {0, 0, 0};
    for (size_t c = 0; c < b->columns.len; c++) counts[sb_group(b->columns.ptr[c].ty)]++;
    size_t rows = b->rows;
    const char *what = NULL;
    if (b->text_ends.len != counts[SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_TEXT] * rows ||
        b->ints.len != counts[SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_INT] * rows ||
        b->floats.len != counts[SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_FLOAT] * rows) {
        what = "cell arrays do not match columns x rows";
    } else if (b->nulls.len < (b->columns.len * rows + 7) / 8) {
        what = "null bitmap too short";
    } else {
        for (size_t i = 0; i < b->text_ends.len && !what; i++) {
            if ((i > 0 && b->text_ends.ptr[i - 1] > b->text_ends.ptr[i]) || b->text_ends.ptr[i] > b->text.len)
                what = "text offsets out of order or out of range";
        }
        if (!what && !sb_utf8_valid(b->text.ptr, b->text.len)) what = "text is not UTF-8";
    }
    if (!what) return true;
    char message[512];
    snprintf(message, sizeof message, "batch %.*s/%.*s: %s", (int)b->source.len, (const char *)b->source.ptr,
             (int)b->kind.len, (const char *)b->kind.ptr, what);
    sb_fail(err, SENTINEL_DETECTOR_TYPES_DETECTOR_ERROR_BAD_INPUT, message);
    return false;
}

static inline bool sb_batch_is(const sb_raw_batch *b, const char *source, const char *kind) {
    return sb_str_eq(&b->source, source) && sb_str_eq(&b->kind, kind);
}

/* The column `name` (the first of that name), looked up once per batch. */
static inline sb_column sb_column_of(const sb_raw_batch *b, const char *name) {
    sb_column col = {-1, 0, 0};
    size_t counts[3] = {0, 0, 0};
    for (size_t c = 0; c < b->columns.len; c++) {
        int group = sb_group(b->columns.ptr[c].ty);
        if (sb_str_eq(&b->columns.ptr[c].name, name)) {
            col.index = (int)c;
            col.group = group;
            col.slot = counts[group];
            return col;
        }
        counts[group]++;
    }
    return col;
}

/* The index of a cell in its group's array, or -1 when absent or null. */
static inline long sb_cell(const sb_raw_batch *b, sb_column col, int group, uint32_t row) {
    if (col.index < 0 || col.group != group || row >= b->rows) return -1;
    size_t bit = (size_t)col.index * b->rows + row;
    if (bit / 8 >= b->nulls.len || (b->nulls.ptr[bit / 8] & (1u << (bit % 8))) != 0) return -1;
    return (long)(col.slot * b->rows + row);
}

static inline bool sb_is_boundary(const sb_raw_batch *b, size_t at) {
    return at == b->text.len || (b->text.ptr[at] & 0xC0) != 0x80;
}

/* A text cell; false when absent, null, or not cut on character boundaries. */
static inline bool sb_text_at(const sb_raw_batch *b, sb_column col, uint32_t row, sb_text *out) {
    long i = sb_cell(b, col, SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_TEXT, row);
    if (i < 0) return false;
    size_t start = i > 0 ? b->text_ends.ptr[i - 1] : 0, end = b->text_ends.ptr[i];
    if (!sb_is_boundary(b, start) || !sb_is_boundary(b, end)) return false;
    out->ptr = (const char *)b->text.ptr + start;
    out->len = end - start;
    return true;
}

static inline bool sb_int_at(const sb_raw_batch *b, sb_column col, uint32_t row, int64_t *out) {
    long i = sb_cell(b, col, SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_INT, row);
    if (i < 0) return false;
    *out = b->ints.ptr[i];
    return true;
}

/* A float cell; an int or boolean column is widened. */
static inline bool sb_float_at(const sb_raw_batch *b, sb_column col, uint32_t row, double *out) {
    if (col.group == SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_INT) {
        int64_t v;
        if (!sb_int_at(b, col, row, &v)) return false;
        *out = (double)v;
        return true;
    }
    long i = sb_cell(b, col, SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_FLOAT, row);
    if (i < 0) return false;
    *out = b->floats.ptr[i];
    return true;
}

/* A time in ms (the Rust SDK's `time`): an int cell as it is, a float cell
 * truncated to whole ms when finite and in range; false otherwise. */
static inline bool sb_time_at(const sb_raw_batch *b, sb_column col, uint32_t row, int64_t *out) {
    if (col.group == SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_INT) return sb_int_at(b, col, row, out);
    long i = sb_cell(b, col, SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_FLOAT, row);
    if (i < 0) return false;
    double f = b->floats.ptr[i];
    /* (double)INT64_MAX rounds up to 2^63, itself out of range. */
    if (!isfinite(f) || f < (double)INT64_MIN || f >= (double)INT64_MAX) return false;
    *out = (int64_t)f;
    return true;
}

/* A boolean cell: only a boolean column has one. */
static inline bool sb_bool_at(const sb_raw_batch *b, sb_column col, uint32_t row, bool *out) {
    if (col.index < 0 || b->columns.ptr[col.index].ty != SENTINEL_DETECTOR_TYPES_COLUMN_TYPE_BOOLEAN) return false;
    int64_t v;
    if (!sb_int_at(b, col, row, &v)) return false;
    *out = v != 0;
    return true;
}

/* A descriptor that emits `kind` and subscribes to `source`/`record_kind`,
 * with no config keys (add them with sb_config_float_key) and no cadence. */
static inline void sb_describe(sentinel_detector_types_descriptor_t *ret, const char *name, const char *version,
                        const char *kind, const char *source, const char *record_kind) {
    memset(ret, 0, sizeof *ret);
    ret->name = sb_dup(name);
    ret->version = sb_dup(version);
    ret->emits.ptr = malloc(sizeof(sb_string));
    if (ret->emits.ptr) {
        ret->emits.len = 1;
        ret->emits.ptr[0] = sb_dup(kind);
    }
    ret->subscriptions.ptr = malloc(sizeof(sentinel_detector_types_subscription_t));
    if (ret->subscriptions.ptr) {
        ret->subscriptions.len = 1;
        ret->subscriptions.ptr[0].source = sb_dup(source);
        ret->subscriptions.ptr[0].kind = sb_dup(record_kind);
    }
}

/* Adds a number config key with its default to a descriptor. */
static inline void sb_config_float_key(sentinel_detector_types_descriptor_t *d, const char *name, const char *doc,
                                double default_) {
    sentinel_detector_types_config_key_t *keys = realloc(d->config.ptr, (d->config.len + 1) * sizeof *keys);
    if (!keys) return;
    d->config.ptr = keys;
    sentinel_detector_types_config_key_t *k = &keys[d->config.len++];
    k->name = sb_dup(name);
    k->doc = sb_dup(doc);
    k->default_.tag = SENTINEL_DETECTOR_TYPES_CONFIG_VALUE_FLOAT;
    k->default_.val.float_ = default_;
}

/* A number from the scan context (an integer is widened); false when the key
 * is missing or not a number. */
static inline bool sb_config_float(const sentinel_detector_types_scan_context_t *ctx, const char *key, double *out) {
    for (size_t i = 0; i < ctx->config.len; i++) {
        const sentinel_detector_types_tuple2_string_config_value_t *kv = &ctx->config.ptr[i];
        if (!sb_str_eq(&kv->f0, key)) continue;
        if (kv->f1.tag == SENTINEL_DETECTOR_TYPES_CONFIG_VALUE_FLOAT) {
            *out = kv->f1.val.float_;
            return true;
        }
        if (kv->f1.tag == SENTINEL_DETECTOR_TYPES_CONFIG_VALUE_INTEGER) {
            *out = (double)kv->f1.val.integer;
            return true;
        }
        return false;
    }
    return false;
}

/* A float as Rust's `{}` prints it: the shortest digits that read back the
 * same, never an exponent. */
static inline void sb_rust_display(double x, char *buf, size_t size) {
    if (isnan(x)) { snprintf(buf, size, "NaN"); return; }
    if (isinf(x)) { snprintf(buf, size, x > 0 ? "inf" : "-inf"); return; }
    for (int p = 0; p <= 17; p++) {
        char e[40];
        snprintf(e, sizeof e, "%.*e", p, x);
        if (strtod(e, NULL) != x) continue;
        /* Spell the digits of `e` out without the exponent. */
        int exp = atoi(strchr(e, 'e') + 1);
        char digits[24];
        size_t n = 0;
        for (const char *c = e; *c != 'e'; c++)
            if (*c >= '0' && *c <= '9') digits[n++] = *c;
        size_t at = 0;
        if (x < 0 && at + 1 < size) buf[at++] = '-';
        long point = (long)exp + 1; /* digits before the decimal point */
        if (point <= 0) {
            at += (size_t)snprintf(buf + at, size - at, "0.");
            for (long z = point; z < 0 && at + 1 < size; z++) buf[at++] = '0';
            for (size_t k = 0; k < n && at + 1 < size; k++) buf[at++] = digits[k];
        } else {
            for (long k = 0; k < (long)n || k < point; k++) {
                if (k == point && at + 1 < size) buf[at++] = '.';
                if (at + 1 < size) buf[at++] = k < (long)n ? digits[k] : '0';
            }
        }
        buf[at < size ? at : size - 1] = '\0';
        return;
    }
}

/* A text from a NUL-terminated string. */
static inline sb_text sb_cstr(const char *s) {
    sb_text t = {s, strlen(s)};
    return t;
}

/* One observation to report (the fields of the WIT `observations` record,
 * for one observation). Texts are read, not kept: sb_observe copies them.
 * An optional field is NULL when absent. */
typedef struct {
    sb_text kind, signature, title;
    const sb_text *tool, *bot, *thread, *turn;
    sb_text occurrence, evidence_source, evidence_id;
    sentinel_detector_types_origin_t origin;
    sentinel_detector_types_severity_t severity;
    uint32_t grouping_version; /* SB_GROUPING_VERSION unless the rules are your own */
    int64_t at;
    uint32_t wasted_turns;
} sb_observation;

/* The text fields of one packed observation. */
#define SB_FIELDS 10

/* The observations of one call, packed as they cross to the host: every
 * text in one buffer with end offsets, the other fields in columns. Start
 * it zeroed (`sb_observations out = {0};`), add with sb_observe, hand it
 * over with sb_return (or free it with sb_discard). */
typedef struct {
    sentinel_detector_types_observations_t packed;
    size_t cap, text_cap;
} sb_observations;

static inline bool sb_observations_grow(sb_observations *l, size_t text_more) {
    sentinel_detector_types_observations_t *p = &l->packed;
    if (p->text.len + text_more > l->text_cap) {
        size_t c = l->text_cap ? l->text_cap : 256;
        while (c < p->text.len + text_more) c *= 2;
        uint8_t *q = realloc(p->text.ptr, c);
        if (!q) return false;
        p->text.ptr = q;
        l->text_cap = c;
    }
    if (p->count < l->cap) return true;
    size_t c = l->cap ? l->cap * 2 : 8;
#define SB_GROW(field, n)                                            \
    do {                                                             \
        void *q = realloc(p->field.ptr, (n) * sizeof *p->field.ptr); \
        if (!q) return false;                                        \
        p->field.ptr = q;                                            \
    } while (0)
    SB_GROW(text_ends, c * SB_FIELDS);
    SB_GROW(present, c);
    SB_GROW(origins, c);
    SB_GROW(severities, c);
    SB_GROW(grouping_versions, c);
    SB_GROW(at, c);
    SB_GROW(wasted_turns, c);
#undef SB_GROW
    l->cap = c;
    return true;
}

/* Packs one observation (false when out of memory). */
static inline bool sb_observe(sb_observations *out, const sb_observation *o) {
    const sb_text none = {"", 0};
    const sb_text *fields[SB_FIELDS] = {&o->kind,       &o->signature,   &o->title,
                                        o->tool ? o->tool : &none, o->bot ? o->bot : &none,
                                        o->thread ? o->thread : &none, o->turn ? o->turn : &none,
                                        &o->occurrence, &o->evidence_source, &o->evidence_id};
    size_t more = 0;
    for (int f = 0; f < SB_FIELDS; f++) more += fields[f]->len;
    if (!sb_observations_grow(out, more)) return false;
    sentinel_detector_types_observations_t *p = &out->packed;
    size_t i = p->count;
    for (int f = 0; f < SB_FIELDS; f++) {
        if (fields[f]->len) memcpy(p->text.ptr + p->text.len, fields[f]->ptr, fields[f]->len);
        p->text.len += fields[f]->len;
        p->text_ends.ptr[i * SB_FIELDS + f] = (uint32_t)p->text.len;
    }
    p->present.ptr[i] = (uint8_t)((o->tool ? 1 : 0) | (o->bot ? 2 : 0) | (o->thread ? 4 : 0) | (o->turn ? 8 : 0));
    p->origins.ptr[i] = o->origin;
    p->severities.ptr[i] = o->severity;
    p->grouping_versions.ptr[i] = o->grouping_version;
    p->at.ptr[i] = o->at;
    p->wasted_turns.ptr[i] = o->wasted_turns;
    p->count++;
    p->text_ends.len = p->count * SB_FIELDS;
    p->present.len = p->origins.len = p->severities.len = p->count;
    p->grouping_versions.len = p->at.len = p->wasted_turns.len = p->count;
    return true;
}

/* Hands `list` to the host as a call's result (the bindings free it once
 * the host has read it). */
static inline void sb_return(sb_observations *list, sentinel_detector_types_observations_t *ret) {
    *ret = list->packed;
}

/* Frees what a failed push had made. */
static inline void sb_discard(sb_observations *list) {
    sentinel_detector_types_observations_free(&list->packed);
}

#endif
