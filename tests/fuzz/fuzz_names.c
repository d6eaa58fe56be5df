/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fuzz_names.c - libFuzzer target: names and titles root code takes from
 * hostile sources
 *
 * peer_parse_title (agent/peer.c) reads the title of a process a user may
 * have named themselves, to find the job of a client; tier_state_name_valid
 * (lib/state.c) guards a user name used as a path component; the role,
 * counter and log-level names come from requests and tier.conf.  Input:
 * one byte for the step buffer's size, then the text (cut at a NUL).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/peer.h"
#include "lib/counters.h"
#include "lib/log.h"
#include "lib/state.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, \
                     __LINE__, #cond); \
            abort (); \
        } \
    } while (0)

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    size_t stepsize;
    char *text, *step;
    uint32_t job = 0;
    int v;

    if (size < 1)
        return 0;
    stepsize = 1 + data[0] % 40;
    if (!(text = malloc (size)) || !(step = malloc (stepsize))) {
        free (text);
        return 0;
    }
    memcpy (text, data + 1, size - 1);
    text[size - 1] = '\0';

    if (peer_parse_title (text, &job, step, stepsize) == 0) {
        size_t n = strnlen (step, stepsize);
        CHECK (n > 0 && n < stepsize);
        CHECK (job > 0);
        CHECK (!strncmp (text, "slurmstepd: [", 13));
        for (size_t i = 0; i < n; i++)
            CHECK (isalnum ((unsigned char) step[i]) || step[i] == '_'
                   || step[i] == '+');
    }
    if (tier_state_name_valid (text)) {
        CHECK (*text && !strchr (text, '/'));
        CHECK (strcmp (text, ".") && strcmp (text, ".."));
        CHECK (text[0] != '-');
    }
    if ((v = tier_role_parse (text)) >= 0)
        CHECK (!strcmp (tier_role_name (v), text));
    if ((v = tier_ctr_parse (text)) >= 0)
        CHECK (!strcmp (tier_ctr_name (v), text));
    v = tier_log_level_parse (text);
    CHECK (v >= -1 && v <= 7);
    free (step);
    free (text);
    return 0;
}
