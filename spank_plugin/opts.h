/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* opts.h - the --tier-* options: parse, validate, expand (libc only).
 *
 * The same checks run at submit (sbatch, salloc, srun: a bad value
 * refuses the submission) and again on the node (users can inject option
 * values through the environment and skip the local check).
 */
#ifndef TIER_SPANK_OPTS_H
#define TIER_SPANK_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "lib/error.h"

enum tier_cache_mode {
    TIER_CACHE_UNSET = 0,
    TIER_CACHE_OFF,
    TIER_CACHE_AUTO,
    TIER_CACHE_REQUIRED,
};

enum tier_keep {
    TIER_KEEP_UNSET = 0,
    TIER_KEEP_NEVER,
    TIER_KEEP_ON_FAILURE,
    TIER_KEEP_ALWAYS,
};

/* What an option's items may contain. */
enum {
    TIER_ITEM_PATTERNS = 1,     /* sbatch filename patterns (%a, %j, ...) */
    TIER_ITEM_SIZE = 2,         /* DIR:SIZE */
    TIER_ITEM_URL = 4,          /* URL=PATH (s3://, https://, http://) */
    TIER_ITEM_URL_OUT = 8,      /* DIR=URL, the URL a prefix ending '/' */
};

#define TIER_OPT_VALUE_MAX 16384
#define TIER_OPT_ITEMS_MAX 64

/* The options' values as given (validated, not yet expanded). */
struct tier_opts {
    enum tier_cache_mode cache;
    enum tier_keep keep;
    char batch[TIER_OPT_VALUE_MAX];
    char scratch[TIER_OPT_VALUE_MAX];
    char stage_in[TIER_OPT_VALUE_MAX];
    char stage_out[TIER_OPT_VALUE_MAX];
};

int opts_cache_parse (const char *value, enum tier_cache_mode *mode,
                      tier_error_t *error);
const char *opts_cache_name (enum tier_cache_mode mode);
int opts_keep_parse (const char *value, enum tier_keep *keep,
                     tier_error_t *error);
const char *opts_keep_name (enum tier_keep keep);

/* Check a comma-separated list of absolute paths (option name for
 * messages).  flags: TIER_ITEM_*.  With TIER_ITEM_URL an item may be
 * URL=PATH (tier_url_item_split): PATH is checked as any path, the URL's
 * patterns are checked, and the URL with its patterns expanded for a
 * sample job must be an input URL (tier_url_parse_input: one object, no
 * query, no user:password@).  With TIER_ITEM_URL_OUT an item may be
 * DIR=URL (tier_url_out_item_split): DIR as any path, the URL checked in
 * the same way but as an output prefix (tier_url_parse_output: it ends in
 * '/').  *uses_array is set when an item uses %a
 * (may be NULL).  Returns 0, or -1 with one line in error naming the
 * option, the item and the problem (a URL shown without secrets).
 */
int opts_list_check (const char *option, const char *value, int flags,
                     bool *uses_array, tier_error_t *error);

/* Check one sbatch filename pattern: %A %a %j %u %x %N %n %%, with an
 * optional zero-padding width (%3a).  A value with a backslash is taken
 * literally, as sbatch does.  Sets *uses_array if %a appears.
 */
int opts_pattern_check (const char *s, bool *uses_array, tier_error_t *error);

/* What the patterns expand to. */
struct tier_pattern_ctx {
    uint32_t job_id;            /* %j */
    uint32_t array_job_id;      /* %A (the job id when not an array) */
    uint32_t array_task_id;     /* %a */
    bool is_array;
    const char *user;           /* %u */
    const char *job_name;       /* %x */
    const char *node_name;      /* %N: the NodeName, as slurmstepd does */
    uint32_t node_index;        /* %n: the node's index in the job */
};

/* Expand s into out.  Returns 0, or -1 with errno EINVAL (a bad pattern,
 * %a outside an array) or ENAMETOOLONG.
 */
int opts_pattern_expand (const char *s, const struct tier_pattern_ctx *ctx,
                         char *out, size_t size, tier_error_t *error);

/* Split DIR[:SIZE][:keep=WHEN] (tier_item_split, lib/paths.h): copies
 * DIR, its '\' escapes undone, into dir and sets *size (0 if none) and
 * *keep (TIER_KEEP_UNSET if none; keep may be NULL).  The size is the
 * text after the last unescaped ':' when it parses as a size.
 */
int opts_split_item (const char *item, char *dir, size_t dirsize,
                     uint64_t *size, enum tier_keep *keep, tier_error_t *error);
int opts_split_size (const char *item, char *dir, size_t dirsize,
                     uint64_t *size, tier_error_t *error);

/* Iterate over a comma-separated list (a '\' escapes the next
 * character, so "\," is part of an item): copies the next item, escapes
 * kept, into item and returns a pointer past it, or NULL at the end.
 */
const char *opts_next_item (const char *list, char *item, size_t size);

/* Whole-option-set checks made once all options are known (submit side
 * and node side): contradictions (--tier-cache=off with other options),
 * %a without an array when is_array says so (is_array < 0: unknown).
 */
int opts_check (const struct tier_opts *opts, int is_array,
                tier_error_t *error);

/* True if any option asks for a tier. */
bool opts_any (const struct tier_opts *opts);

#endif /* !TIER_SPANK_OPTS_H */
