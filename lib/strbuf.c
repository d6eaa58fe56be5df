/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* strbuf.c - a growing string */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

void tier_strbuf_add (struct tier_strbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->size) {
        size_t size = b->size ? b->size : 256;
        char *p;

        while (size < b->len + n + 1)
            size *= 2;
        if (!(p = realloc (b->s, size))) {
            b->failed = 1;
            return;
        }
        b->s = p;
        b->size = size;
    }
    memcpy (b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void tier_strbuf_puts (struct tier_strbuf *b, const char *s)
{
    tier_strbuf_add (b, s, strlen (s));
}

void tier_strbuf_printf (struct tier_strbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    int n;

    va_start (ap, fmt);
    n = vsnprintf (small, sizeof (small), fmt, ap);
    va_end (ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t) n < sizeof (small)) {
        tier_strbuf_add (b, small, (size_t) n);
        return;
    }
    {
        char *big = malloc ((size_t) n + 1);

        if (!big) {
            b->failed = 1;
            return;
        }
        va_start (ap, fmt);
        vsnprintf (big, (size_t) n + 1, fmt, ap);
        va_end (ap);
        tier_strbuf_add (b, big, (size_t) n);
        free (big);
    }
}

char *tier_strbuf_finish (struct tier_strbuf *b)
{
    if (!b->failed && !b->s)
        tier_strbuf_add (b, "", 0);
    if (b->failed) {
        free (b->s);
        memset (b, 0, sizeof (*b));
        errno = ENOMEM;
        return NULL;
    }
    return b->s;
}

void tier_strbuf_free (struct tier_strbuf *b)
{
    free (b->s);
    memset (b, 0, sizeof (*b));
}

void tier_strbuf_putc (struct tier_strbuf *b, char c)
{
    tier_strbuf_add (b, &c, 1);
}
