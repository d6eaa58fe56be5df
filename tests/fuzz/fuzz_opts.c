/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fuzz_opts.c - libFuzzer target: the plugin's option and argument
 * parsers (spank_plugin/opts.h, args.h, submit.h) and the lib/units.h,
 * lib/paths.h and lib/url.h parsers they use (URL=PATH and DIR=URL items)
 *
 * Input: two parameter bytes (flags and buffer sizes), then NUL-separated
 * pieces: the value under test, then user, job name and node name for
 * pattern expansion.  The raw input is also scanned as a batch script
 * and as sbatch's argv.  Output buffers are allocated at exactly the size
 * passed, so ASan sees any write past them.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/paths.h"
#include "lib/units.h"
#include "lib/url.h"
#include "spank_plugin/args.h"
#include "spank_plugin/opts.h"
#include "spank_plugin/submit.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, \
                     __LINE__, #cond); \
            abort (); \
        } \
    } while (0)

#define PIECES_MAX 16

static void check_error (const tier_error_t *e)
{
    size_t n = strnlen (e->text, sizeof (e->text));

    CHECK (n > 0 && n < sizeof (e->text));
}

static void value_checks (const char *s, const uint8_t *params,
                          const char *const *pieces, int npieces)
{
    tier_error_t error;
    enum tier_cache_mode mode;
    enum tier_keep keep;
    bool uses_array = false;
    size_t outsize = 1 + params[1];     /* callers never pass 0 */
    char *out = malloc (outsize);
    uint64_t u;
    int rc;

    CHECK (out);
    if (opts_cache_parse (s, &mode, &error) == 0)
        CHECK (!strcmp (opts_cache_name (mode), s));
    else
        check_error (&error);
    if (opts_keep_parse (s, &keep, &error) == 0)
        CHECK (!strcmp (opts_keep_name (keep), s));
    else
        check_error (&error);

    rc = opts_list_check ("--tier-fuzz", s, params[0] & 15, &uses_array,
                          &error);
    if (rc < 0) {
        check_error (&error);
        CHECK (!strncmp (error.text, "--tier-fuzz", 11));
    }
    if (opts_pattern_check (s, &uses_array, &error) < 0)
        check_error (&error);
    else {
        struct tier_pattern_ctx ctx = {
            .job_id = params[0] * 1000u + 7,
            .array_job_id = 4242,
            .array_task_id = params[1],
            .is_array = params[0] & 4,
            .user = npieces > 1 ? pieces[1] : "alice",
            .job_name = npieces > 2 ? pieces[2] : NULL,
            .node_name = npieces > 3 ? pieces[3] : "n1",
            .node_index = params[0] >> 4,
        };
        if (opts_pattern_expand (s, &ctx, out, outsize, &error) == 0)
            CHECK (strlen (out) < outsize);
        else
            check_error (&error);
    }

    /* URLs (lib/url.h): parsed, shown, and URL=PATH items split */
    {
        char url[PATH_MAX], path[PATH_MAX];
        struct tier_url *uu;

        if ((uu = tier_url_parse (s, &error))) {
            CHECK (!strcmp (uu->text, s) && !strchr (uu->display, '\n'));
            CHECK (uu->scheme == TIER_URL_S3 ? uu->bucket && uu->key
                                             : uu->host && uu->path);
            tier_url_destroy (uu);
        }
        else
            check_error (&error);
        if ((uu = tier_url_parse_input (s, &error))) {
            CHECK (!uu->query && !tier_url_is_prefix (uu));
            tier_url_destroy (uu);
        }
        else
            check_error (&error);
        tier_url_shown (s, out, outsize);
        CHECK (strlen (out) < outsize && !strchr (out, '\n'));
        if (tier_url_item_split (s, url, sizeof (url), path,
                                 sizeof (path)) == 0)
            CHECK (path[0] == '/' && *url
                   && strlen (url) + 1 + strlen (path) == strlen (s));
        if ((uu = tier_url_parse_output (s, &error))) {
            CHECK (!uu->query && tier_url_is_prefix (uu));
            tier_url_destroy (uu);
        }
        else
            check_error (&error);
        if (tier_url_out_item_split (s, path, sizeof (path), url,
                                     sizeof (url)) == 0)
            CHECK (*path && strstr (url, "://")
                   && strlen (url) + 1 + strlen (path) == strlen (s));
    }

    /* walking a list and splitting its DIR:SIZE items */
    {
        size_t itemsize = 1 + params[1] % 64, dirsize = 1 + params[0] % 32;
        char *item = malloc (itemsize), *dir = malloc (dirsize);
        const char *p = s;
        int n = 0;

        CHECK (item && dir);
        while ((p = opts_next_item (p, item, itemsize)) && n++ < 100) {
            CHECK (strlen (item) < itemsize);
            if (opts_split_size (item, dir, dirsize, &u, &error) == 0)
                CHECK (strlen (dir) < dirsize);
            else
                check_error (&error);
        }
        free (item);
        free (dir);
    }

    /* any name survives escaping into a scratch item and splitting it
     * back, with a size and a keep= after it */
    {
        size_t len = strlen (s), escsize = 1 + (params[1] % 2 ? 2 * len
                                                : params[0] % 64);
        char *esc = malloc (escsize), *item = malloc (2 * len + 40);
        char *dir = malloc (len + 1), keep[16];

        CHECK (esc && item && dir);
        if (tier_list_escape (s, esc, escsize) == 0) {
            CHECK (strlen (esc) < escsize);
            (void) snprintf (item, 2 * len + 40, "%s:7M:keep=always", esc);
            CHECK (tier_item_split (item, dir, len + 1, &u, keep,
                                    sizeof (keep)) == 0);
            CHECK (!strcmp (dir, s) && u == 7ULL << 20
                   && !strcmp (keep, "always"));
            CHECK (tier_list_next (esc, item, 2 * len + 40) != NULL
                   || !*esc);
            CHECK (!*esc || !strcmp (item, esc));
        }
        else
            CHECK (errno == ENAMETOOLONG);
        free (esc);
        free (item);
        free (dir);
    }

    /* the lib parsers behind them */
    (void) tier_size_parse (s, &u);
    (void) tier_duration_parse (s, &u);
    {
        char fmt[16];
        (void) tier_size_format (u, fmt, sizeof (fmt));
        CHECK (strlen (fmt) < sizeof (fmt));
    }
    if (tier_path_normalize (s, out, outsize) == 0) {
        CHECK (out[0] == '/' && strlen (out) < outsize);
        CHECK (!tier_path_has_dotdot (out));
    }
    (void) tier_path_absolute (s, "/cwd/x", out, outsize);
    (void) tier_path_under (s, npieces > 1 ? pieces[1] : "/gfs");
    (void) tier_path_strip (s, npieces > 1 ? pieces[1] : "/gfs");
    free (out);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    static struct tier_opts opts;
    static struct tier_args args;
    const char *pieces[PIECES_MAX];
    char *copy, *argv[PIECES_MAX + 2];
    tier_error_t error;
    uint8_t params[2] = { 0, 0 };
    int npieces = 0, script, wrap;

    /* the raw bytes as a batch script (no NUL at the end) */
    (void) submit_script_array ((const char *) data, size);

    if (size >= 2) {
        memcpy (params, data, 2);
        data += 2;
        size -= 2;
    }
    if (!(copy = malloc (size + 1)))
        return 0;
    memcpy (copy, data, size);
    copy[size] = '\0';
    for (char *p = copy; p <= copy + size && npieces < PIECES_MAX;
         p += strlen (p) + 1)
        pieces[npieces++] = p;

    value_checks (pieces[0], params, pieces, npieces);

    /* the pieces as sbatch's argv, and as plugstack arguments */
    argv[0] = (char *) "sbatch";
    for (int i = 0; i < npieces; i++)
        argv[i + 1] = (char *) pieces[i];
    argv[npieces + 1] = NULL;
    (void) submit_argv_array (npieces + 1, argv, &script, &wrap);
    CHECK (script >= 0 && script <= npieces);
    if (args_parse (npieces, argv + 1, &args, &error) < 0)
        check_error (&error);

    /* the whole option set, as the node checks it */
    memset (&opts, 0, sizeof (opts));
    opts.cache = params[0] % 4;
    opts.keep = (params[0] >> 2) % 4;
    {
        char *fields[] = { opts.batch, opts.scratch, opts.stage_in,
                           opts.stage_out };
        for (int i = 0; i < 4 && i < npieces; i++)
            snprintf (fields[i], TIER_OPT_VALUE_MAX, "%s", pieces[i]);
    }
    if (opts_check (&opts, (int) (params[1] % 3) - 1, &error) < 0)
        check_error (&error);
    (void) opts_any (&opts);
    free (copy);
    return 0;
}
