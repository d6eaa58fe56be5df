/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* opts.c - the --tier-* options: parse, validate, expand (libc only) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/paths.h"
#include "lib/units.h"
#include "lib/url.h"
#include "opts.h"

#define PAD_MAX 10      /* sbatch caps the zero-padding width at 10 */

static const char *cache_names[] = {
    [TIER_CACHE_UNSET] = "unset",
    [TIER_CACHE_OFF] = "off",
    [TIER_CACHE_AUTO] = "auto",
    [TIER_CACHE_REQUIRED] = "required",
};

static const char *keep_names[] = {
    [TIER_KEEP_UNSET] = "unset",
    [TIER_KEEP_NEVER] = "never",
    [TIER_KEEP_ON_FAILURE] = "on-failure",
    [TIER_KEEP_ALWAYS] = "always",
};

const char *opts_cache_name (enum tier_cache_mode mode)
{
    return mode <= TIER_CACHE_REQUIRED ? cache_names[mode] : "?";
}

const char *opts_keep_name (enum tier_keep keep)
{
    return keep <= TIER_KEEP_ALWAYS ? keep_names[keep] : "?";
}

/* Print at most 80 characters of a user value, with control characters
 * replaced, so that an error line stays one readable line.
 */
static const char *clip (const char *s, char *buf, size_t size)
{
    size_t i;

    for (i = 0; s[i] && i + 4 < size && i < 80; i++)
        buf[i] = (s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i] && i + 4 < size) {
        memcpy (buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

int opts_cache_parse (const char *value, enum tier_cache_mode *mode,
                      tier_error_t *error)
{
    char b[96];

    for (int m = TIER_CACHE_OFF; m <= TIER_CACHE_REQUIRED; m++) {
        if (value && !strcmp (value, cache_names[m])) {
            *mode = m;
            return 0;
        }
    }
    errno = EINVAL;
    return tier_errprintf (error, "--tier-cache: '%s' is not one of auto, "
                           "required, off", clip (value ? value : "", b,
                                                  sizeof (b)));
}

int opts_keep_parse (const char *value, enum tier_keep *keep,
                     tier_error_t *error)
{
    char b[96];

    for (int k = TIER_KEEP_NEVER; k <= TIER_KEEP_ALWAYS; k++) {
        if (value && !strcmp (value, keep_names[k])) {
            *keep = k;
            return 0;
        }
    }
    errno = EINVAL;
    return tier_errprintf (error, "--tier-keep: '%s' is not one of never, "
                           "on-failure, always", clip (value ? value : "", b,
                                                       sizeof (b)));
}

/* Parse "%[width]X" at p (p[0] == '%').  Returns the length consumed and
 * sets *conv and *width, or -1 if malformed.
 */
static int parse_conv (const char *p, char *conv, int *width)
{
    int i = 1, w = 0;

    while (isdigit ((unsigned char) p[i])) {
        if (w < 1000)
            w = w * 10 + (p[i] - '0');
        i++;
    }
    if (!strchr ("AajuxNn%", p[i]) || p[i] == '\0')
        return -1;
    if (p[i] == '%' && i > 1)
        return -1;                      /* "%3%" */
    *conv = p[i];
    *width = w > PAD_MAX ? PAD_MAX : w;
    return i + 1;
}

int opts_pattern_check (const char *s, bool *uses_array, tier_error_t *error)
{
    if (strchr (s, '\\'))
        return 0;                       /* taken literally, like sbatch */
    for (const char *p = s; *p; p++) {
        char conv;
        int width, n;

        if (*p != '%')
            continue;
        if ((n = parse_conv (p, &conv, &width)) < 0) {
            char b[96];
            errno = EINVAL;
            return tier_errprintf (error, "'%s': unknown pattern at '%.4s' "
                                   "(known: %%A %%a %%j %%u %%x %%N %%n %%%%)",
                                   clip (s, b, sizeof (b)), p);
        }
        if (conv == 'a' && uses_array)
            *uses_array = true;
        p += n - 1;
    }
    return 0;
}

int opts_pattern_expand (const char *s, const struct tier_pattern_ctx *ctx,
                         char *out, size_t size, tier_error_t *error)
{
    size_t o = 0;
    bool literal = strchr (s, '\\') != NULL;

    if (size == 0) {
        errno = ENAMETOOLONG;
        return tier_errprintf (error, "expanded path too long");
    }
    for (const char *p = s; *p; p++) {
        char buf[64];
        const char *add = buf;
        size_t len;

        if (*p != '%' || literal) {
            buf[0] = *p;
            buf[1] = '\0';
        }
        else {
            char conv;
            int width, n;
            unsigned long num = 0;
            bool numeric = true;

            if ((n = parse_conv (p, &conv, &width)) < 0) {
                errno = EINVAL;
                return tier_errprintf (error, "unknown pattern at '%.4s'", p);
            }
            p += n - 1;
            switch (conv) {
                case 'A':
                    num = ctx->is_array ? ctx->array_job_id : ctx->job_id;
                    break;
                case 'a':
                    if (!ctx->is_array) {
                        errno = EINVAL;
                        return tier_errprintf (error, "%%a is used but the "
                                               "job is not an array job");
                    }
                    num = ctx->array_task_id;
                    break;
                case 'j': num = ctx->job_id; break;
                case 'n': num = ctx->node_index; break;
                case 'u': add = ctx->user; numeric = false; break;
                case 'x': add = ctx->job_name; numeric = false; break;
                case 'N': add = ctx->node_name; numeric = false; break;
                case '%': add = "%"; numeric = false; break;
            }
            if (numeric)
                (void) snprintf (buf, sizeof (buf), "%0*lu", width, num);
            else if (!add || (conv != '%' && (strchr (add, '/') || !*add
                                               || !strcmp (add, "..")
                                               || !strcmp (add, ".")))) {
                /* a name must not add or climb path components */
                errno = EINVAL;
                return tier_errprintf (error, "%%%c expands to an unusable "
                                       "path component", conv);
            }
        }
        len = strlen (add);
        if (o + len >= size) {
            errno = ENAMETOOLONG;
            return tier_errprintf (error, "expanded path too long");
        }
        memcpy (out + o, add, len);
        o += len;
    }
    out[o] = '\0';
    return 0;
}

const char *opts_next_item (const char *list, char *item, size_t size)
{
    return tier_list_next (list, item, size);
}

int opts_split_item (const char *item, char *dir, size_t dirsize,
                     uint64_t *size, enum tier_keep *keep, tier_error_t *error)
{
    char when[16], b[96];

    if (tier_item_split (item, dir, dirsize, size, when, sizeof (when)) < 0) {
        if (errno == ERANGE) {
            errno = EINVAL;
            return tier_errprintf (error, "size must be more than 0");
        }
        if (errno == EOVERFLOW) {
            errno = EINVAL;
            return tier_errprintf (error,
                                   "'%s': the size is larger than "
                                   "8 EiB",
                                   clip (item, b, sizeof (b)));
        }
        if (errno == EINVAL)
            return tier_errprintf (error, "'%s': keep= is not one of never, "
                                   "on-failure, always",
                                   clip (item, b, sizeof (b)));
        return tier_errprintf (error, "path too long");
    }
    if (keep && (!when[0] || opts_keep_parse (when, keep, error) < 0))
        *keep = TIER_KEEP_UNSET;
    return 0;
}

int opts_split_size (const char *item, char *dir, size_t dirsize,
                     uint64_t *size, tier_error_t *error)
{
    return opts_split_item (item, dir, dirsize, size, NULL, error);
}

static int check_path (const char *option, const char *path, int flags,
                       bool *uses_array, tier_error_t *error)
{
    char b[96];
    tier_error_t perr;

    if (path[0] != '/') {
        errno = EINVAL;
        return tier_errprintf (error, "%s: '%s' is not an absolute path",
                               option, clip (path, b, sizeof (b)));
    }
    if (tier_path_has_dotdot (path)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: '%s' has a '..' component",
                               option, clip (path, b, sizeof (b)));
    }
    if (strlen (path) >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return tier_errprintf (error, "%s: a path is longer than %d bytes",
                               option, PATH_MAX - 1);
    }
    if (!strcmp (path, "/") || path[strspn (path, "/")] == '\0') {
        errno = EINVAL;
        return tier_errprintf (error, "%s: '/' itself cannot be tiered",
                               option);
    }
    if (flags & TIER_ITEM_PATTERNS) {
        if (opts_pattern_check (path, uses_array, &perr) < 0)
            return tier_errprintf (error, "%s: %s", option, perr.text);
    }
    else if (strchr (path, '%')) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: '%s': patterns are not allowed "
                               "here", option, clip (path, b, sizeof (b)));
    }
    return 0;
}

/* A URL of an item, its patterns expanded for a sample job (the node
 * checks the real expansion again), as an input or an output prefix.
 */
static int check_url (const char *option, const char *url, bool output,
                      bool *uses_array, tier_error_t *error)
{
    static const struct tier_pattern_ctx sample = {
        .job_id = 1, .array_job_id = 1, .array_task_id = 1,
        .is_array = true, .user = "user", .job_name = "job",
        .node_name = "node", .node_index = 0,
    };
    char exp[PATH_MAX], shown[256];
    struct tier_url *u;
    tier_error_t e;

    tier_url_shown (url, shown, sizeof (shown));
    if (opts_pattern_check (url, uses_array, &e) < 0) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: %s: unknown pattern (known: %%A "
                               "%%a %%j %%u %%x %%N %%n; write %%%% for a "
                               "'%%' of the URL, as in %%%%20)", option,
                               shown);
    }
    if (opts_pattern_expand (url, &sample, exp, sizeof (exp), &e) < 0)
        return tier_errprintf (error, "%s: %s: %s", option, shown, e.text);
    u = output ? tier_url_parse_output (exp, &e)
               : tier_url_parse_input (exp, &e);
    if (!u)
        return tier_errprintf (error, "%s: %s", option, e.text);
    tier_url_destroy (u);
    return 0;
}

/* DIR=URL of stage-out: the directory as any path, the URL an output
 * prefix.
 */
static int check_url_out_item (const char *option, const char *item,
                               int flags, bool *uses_array,
                               tier_error_t *error)
{
    char url[PATH_MAX], path[PATH_MAX], shown[256];

    if (strlen (item) >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return tier_errprintf (error, "%s: a DIR=URL item is longer than "
                               "%d bytes", option, PATH_MAX - 1);
    }
    if (tier_url_out_item_split (item, path, sizeof (path), url,
                                 sizeof (url)) < 0) {
        tier_url_shown (item, shown, sizeof (shown));
        errno = EINVAL;
        return tier_errprintf (error, "%s: '%s': an output URL needs the "
                               "directory the job writes: /DIR=URL", option,
                               shown);
    }
    if (check_path (option, path, flags, uses_array, error) < 0)
        return -1;
    return check_url (option, url, true, uses_array, error);
}

/* URL=PATH: the path as any other, the URL an input. */
static int check_url_item (const char *option, const char *item, int flags,
                           bool *uses_array, tier_error_t *error)
{
    char url[PATH_MAX], path[PATH_MAX], shown[256];

    tier_url_shown (item, shown, sizeof (shown));
    if (strlen (item) >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return tier_errprintf (error, "%s: a URL=PATH item is longer than "
                               "%d bytes", option, PATH_MAX - 1);
    }
    if (tier_url_item_split (item, url, sizeof (url), path,
                             sizeof (path)) < 0) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: '%s': a URL needs the path to "
                               "show it at: URL=/PATH", option, shown);
    }
    if (check_path (option, path, flags, uses_array, error) < 0)
        return -1;
    return check_url (option, url, false, uses_array, error);
}

int opts_list_check (const char *option, const char *value, int flags,
                     bool *uses_array, tier_error_t *error)
{
    const char *p = value;
    int count = 0;

    if (!value || !*value) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: needs a value", option);
    }
    if (strlen (value) >= TIER_OPT_VALUE_MAX) {
        errno = E2BIG;
        return tier_errprintf (error, "%s: value longer than %d bytes",
                               option, TIER_OPT_VALUE_MAX - 1);
    }
    for (const char *c = value; *c; c++) {
        if ((unsigned char) *c < 0x20 || *c == 0x7f) {
            errno = EINVAL;
            return tier_errprintf (error, "%s: control character in value",
                                   option);
        }
    }
    while (*p) {
        char item[PATH_MAX + 64];
        const char *end = p;
        size_t len;

        while (*end && *end != ',')     /* '\' escapes (tier_list_next) */
            end += (end[0] == '\\' && end[1]) ? 2 : 1;
        len = (size_t) (end - p);
        if (!*end)
            end = NULL;
        if (len == 0) {
            errno = EINVAL;
            return tier_errprintf (error, "%s: empty item in list", option);
        }
        if (len >= sizeof (item)) {
            errno = ENAMETOOLONG;
            return tier_errprintf (error, "%s: a path is longer than %d "
                                   "bytes", option, PATH_MAX - 1);
        }
        if (++count > TIER_OPT_ITEMS_MAX) {
            errno = E2BIG;
            return tier_errprintf (error, "%s: more than %d items", option,
                                   TIER_OPT_ITEMS_MAX);
        }
        memcpy (item, p, len);
        item[len] = '\0';
        if (flags & TIER_ITEM_SIZE) {
            char dir[PATH_MAX + 64];
            uint64_t size;
            tier_error_t serr;
            if (opts_split_size (item, dir, sizeof (dir), &size, &serr) < 0)
                return tier_errprintf (error, "%s: %s", option, serr.text);
            if (check_path (option, dir, flags, uses_array, error) < 0)
                return -1;
        }
        else if ((flags & TIER_ITEM_URL) && tier_url_item_is_url (item)) {
            if (check_url_item (option, item, flags, uses_array, error) < 0)
                return -1;
        }
        else if ((flags & TIER_ITEM_URL_OUT)
                 && tier_url_out_item_is_url (item)) {
            if (check_url_out_item (option, item, flags, uses_array,
                                    error) < 0)
                return -1;
        }
        else if (check_path (option, item, flags, uses_array, error) < 0)
            return -1;
        if (!end)
            break;
        p = end + 1;
        if (!*p) {
            errno = EINVAL;
            return tier_errprintf (error, "%s: empty item in list", option);
        }
    }
    return 0;
}

bool opts_any (const struct tier_opts *opts)
{
    return opts->batch[0] || opts->scratch[0] || opts->stage_in[0]
           || opts->stage_out[0] || opts->keep != TIER_KEEP_UNSET;
}

int opts_check (const struct tier_opts *opts, int is_array, tier_error_t *error)
{
    static const struct {
        const char *name;
        size_t offset;
        int flags;
    } lists[] = {
        { "--tier-batch", offsetof (struct tier_opts, batch), 0 },
        { "--tier-scratch", offsetof (struct tier_opts, scratch),
          TIER_ITEM_SIZE },
        { "--tier-stage-in", offsetof (struct tier_opts, stage_in),
          TIER_ITEM_PATTERNS | TIER_ITEM_URL },
        { "--tier-stage-out", offsetof (struct tier_opts, stage_out),
          TIER_ITEM_PATTERNS | TIER_ITEM_URL_OUT },
    };
    bool uses_array = false;

    for (size_t i = 0; i < sizeof (lists) / sizeof (lists[0]); i++) {
        const char *v = (const char *) opts + lists[i].offset;
        bool a = false;
        if (!*v)
            continue;
        if (opts_list_check (lists[i].name, v, lists[i].flags, &a, error) < 0)
            return -1;
        if (a && is_array == 0) {
            errno = EINVAL;
            return tier_errprintf (error, "%s: %%a is used but the job is "
                                   "not an array job (add --array)",
                                   lists[i].name);
        }
        uses_array |= a;
    }
    if (opts->cache == TIER_CACHE_OFF && opts_any (opts)) {
        errno = EINVAL;
        return tier_errprintf (error, "--tier-cache=off contradicts the "
                               "other --tier options given");
    }
    return 0;
}
