/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* units.h - sizes (16M) and durations (30s, 10m, 7d) as users write them */
#ifndef TIER_UNITS_H
#define TIER_UNITS_H

#include <stdint.h>
#include <stddef.h>

/* The largest size tier handles (8 EiB - 1): every size fits a JSON
 * integer, and a sum of sizes saturates here (tier_size_add). */
#define TIER_SIZE_MAX ((uint64_t) INT64_MAX)

/* Parse a size: digits with an optional K, M, G, T or P suffix (powers of
 * 1024; an optional trailing "B" or "iB" is accepted: 16M, 16MB, 16MiB).
 * Returns 0, or -1 with errno EINVAL (malformed) or ERANGE (more than
 * TIER_SIZE_MAX).
 */
int tier_size_parse (const char *s, uint64_t *bytes);

/* a + b, or TIER_SIZE_MAX if that is more: sums of sizes users give
 * (reservations) never wrap. */
uint64_t tier_size_add (uint64_t a, uint64_t b);

/* Parse a duration: digits with an optional unit s, m, h, d, w (plain
 * digits are seconds); several may be combined as in 1h30m.
 * Returns 0, or -1 with errno EINVAL or ERANGE.
 */
int tier_duration_parse (const char *s, uint64_t *seconds);

/* Format bytes as a short human string ("1.5 GiB") into buf. */
char *tier_size_format (uint64_t bytes, char *buf, size_t size);

#endif /* !TIER_UNITS_H */
