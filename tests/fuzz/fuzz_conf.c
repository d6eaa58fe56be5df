/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fuzz_conf.c - libFuzzer target: tier.conf text into tier_conf_parse
 *
 * The input is the file's text (cut at its first NUL, as a C string).
 * A parse that succeeds must leave only normalised absolute paths (or
 * "" where a feature may be off); one that fails must say why in one
 * NUL-terminated line.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/conf.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, \
                     __LINE__, #cond); \
            abort (); \
        } \
    } while (0)

static void check_path (const char *p, bool may_be_empty)
{
    CHECK (p);
    if (may_be_empty && !*p)
        return;
    CHECK (p[0] == '/');
    CHECK (!strstr (p, "//"));
    CHECK (!strstr (p, "/../") && !strstr (p, "/./"));
    CHECK (strlen (p) == 1 || p[strlen (p) - 1] != '/');
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    struct tier_conf *conf;
    tier_error_t error;
    char *text, out[PATH_MAX];

    if (!(text = malloc (size + 1)))
        return 0;
    memcpy (text, data, size);
    text[size] = '\0';
    /* with and without a NodeName for %n */
    if (!(conf = tier_conf_create (size && (data[0] & 1) ? NULL : "n1"))) {
        free (text);
        return 0;
    }
    memset (error.text, 'x', sizeof (error.text));
    if (tier_conf_parse (conf, text, "fuzz.conf", &error) == 0) {
        check_path (conf->socket_dir, false);
        check_path (conf->state_dir, false);
        check_path (conf->tierd_path, false);
        check_path (conf->shared_state_dir, true);
        check_path (conf->log_file, true);
        CHECK (conf->allowed_roots_count >= 0);
        for (int i = 0; i < conf->allowed_roots_count; i++) {
            check_path (conf->allowed_roots[i], false);
            CHECK (strcmp (conf->allowed_roots[i], "/") != 0);
        }
        CHECK (conf->log_level >= 0 && conf->log_level <= 7);
        CHECK (conf->slurm_user && *conf->slurm_user);
        (void) tier_conf_socket_path (conf, out, sizeof (out));
        (void) tier_conf_socket_path (conf, out, 8);
        (void) tier_conf_expand_user (conf->bb_dir, "alice", out,
                                      sizeof (out));
        (void) tier_conf_expand_user (conf->nvdimm_dir, "bob", out, 4);
    }
    else {
        size_t n = strnlen (error.text, sizeof (error.text));
        CHECK (n > 0 && n < sizeof (error.text));
        CHECK (!strncmp (error.text, "fuzz.conf", 9));
    }
    tier_conf_destroy (conf);
    free (text);
    return 0;
}
