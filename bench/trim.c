/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* trim.c - trimmed means and medians */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "trim.h"

static int cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}

int trimmed_mean (double *v, size_t n, size_t cut, double *mean)
{
    double s = 0;

    if (!v || n < 2 * cut + 1) {
        errno = EINVAL;
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite (v[i])) {
            errno = EINVAL;
            return -1;
        }
    qsort (v, n, sizeof (*v), cmp);
    for (size_t i = cut; i < n - cut; i++)
        s += v[i];
    *mean = s / (double) (n - 2 * cut);
    return 0;
}

int median (double *v, size_t n, double *med)
{
    if (!v || n == 0) {
        errno = EINVAL;
        return -1;
    }
    qsort (v, n, sizeof (*v), cmp);
    *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return 0;
}
