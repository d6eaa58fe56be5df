/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* trim.h - the trimmed mean of the CEFT benchmark procedure */
#ifndef TIER_BENCH_TRIM_H
#define TIER_BENCH_TRIM_H

#include <stddef.h>

/* Mean of v[0..n) after dropping the `cut` highest and `cut` lowest
 * values (v is sorted in place).  Returns 0 and sets *mean, or -1 (EINVAL)
 * when fewer than 2*cut+1 values remain.
 */
int trimmed_mean (double *v, size_t n, size_t cut, double *mean);

/* Median of v[0..n) (sorted in place); -1 if n == 0. */
int median (double *v, size_t n, double *med);

#endif /* !TIER_BENCH_TRIM_H */
