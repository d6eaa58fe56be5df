/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* units.c - parse and format sizes and durations */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "units.h"

/* Parse leading decimal digits into *v; returns the number of digits. */
static int parse_digits (const char *s, uint64_t *v)
{
    uint64_t n = 0;
    int i = 0;

    while (isdigit ((unsigned char) s[i])) {
        unsigned d = s[i] - '0';
        if (n > (UINT64_MAX - d) / 10)
            return -1;
        n = n * 10 + d;
        i++;
    }
    *v = n;
    return i;
}

int tier_size_parse (const char *s, uint64_t *bytes)
{
    uint64_t n, mult = 1;
    int len;

    if (!s || !bytes)
        goto inval;
    if ((len = parse_digits (s, &n)) < 0) {
        errno = ERANGE;
        return -1;
    }
    if (len == 0)
        goto inval;
    s += len;
    switch (toupper ((unsigned char) *s)) {
        case '\0':
            break;
        case 'K': mult = 1ULL << 10; s++; break;
        case 'M': mult = 1ULL << 20; s++; break;
        case 'G': mult = 1ULL << 30; s++; break;
        case 'T': mult = 1ULL << 40; s++; break;
        case 'P': mult = 1ULL << 50; s++; break;
        case 'B': break;
        default:
            goto inval;
    }
    if (mult > 1 && (*s == 'i' || *s == 'I'))
        s++;
    if (*s == 'B' || *s == 'b')
        s++;
    if (*s != '\0')
        goto inval;
    if (n > TIER_SIZE_MAX / mult) {
        errno = ERANGE;
        return -1;
    }
    *bytes = n * mult;
    return 0;
inval:
    errno = EINVAL;
    return -1;
}

uint64_t tier_size_add (uint64_t a, uint64_t b)
{
    if (a > TIER_SIZE_MAX || b > TIER_SIZE_MAX - a)
        return TIER_SIZE_MAX;
    return a + b;
}

int tier_duration_parse (const char *s, uint64_t *seconds)
{
    uint64_t total = 0;

    if (!s || !seconds || !*s)
        goto inval;
    while (*s) {
        uint64_t n, mult;
        int len;

        if ((len = parse_digits (s, &n)) < 0) {
            errno = ERANGE;
            return -1;
        }
        if (len == 0)
            goto inval;
        s += len;
        switch (*s) {
            case '\0': mult = 1; break;
            case 's': mult = 1; s++; break;
            case 'm': mult = 60; s++; break;
            case 'h': mult = 3600; s++; break;
            case 'd': mult = 86400; s++; break;
            case 'w': mult = 7 * 86400; s++; break;
            default:
                goto inval;
        }
        if (n > (UINT64_MAX - total) / mult) {
            errno = ERANGE;
            return -1;
        }
        total += n * mult;
    }
    *seconds = total;
    return 0;
inval:
    errno = EINVAL;
    return -1;
}

char *tier_size_format (uint64_t bytes, char *buf, size_t size)
{
    static const char *suffix[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double v = (double) bytes;
    int i = 0;

    while (v >= 1024.0 && i < 5) {
        v /= 1024.0;
        i++;
    }
    if (i == 0)
        (void) snprintf (buf, size, "%llu B", (unsigned long long) bytes);
    else
        (void) snprintf (buf, size, "%.1f %s", v, suffix[i]);
    return buf;
}
