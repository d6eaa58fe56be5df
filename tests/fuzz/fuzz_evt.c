/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fuzz_evt.c - libFuzzer target: the completion-times CSV of tierctl
 * predict (tier_evt_times_read in lib/evt_csv.c), read from memory
 *
 * What it accepts must be consistent (rows counted, times finite and not
 * negative); what it refuses must be named "file:line: problem".
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/evt.h"

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
    struct tier_evt_times *t;
    tier_error_t error;
    FILE *f;

    if (size == 0 || !(f = fmemopen ((void *) data, size, "r")))
        return 0;
    memset (error.text, 0, sizeof (error.text));
    if ((t = tier_evt_times_read (f, "t.csv", &error))) {
        size_t rows = 0;

        CHECK (t->rows > 0 && t->nruns > 0);
        for (size_t r = 0; r < t->nruns; r++) {
            CHECK (t->runs[r].name && *t->runs[r].name);
            CHECK (t->runs[r].count > 0);
            for (size_t k = 0; k < t->runs[r].count; k++)
                CHECK (isfinite (t->runs[r].seconds[k])
                       && t->runs[r].seconds[k] >= 0);
            rows += t->runs[r].count;
        }
        CHECK (rows == t->rows);
        tier_evt_times_destroy (t);
    }
    else {
        CHECK (!strncmp (error.text, "t.csv", 5));
        CHECK (strnlen (error.text, sizeof (error.text))
               < sizeof (error.text));
    }
    fclose (f);
    return 0;
}
