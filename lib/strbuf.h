/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* strbuf.h - a growing string (libc only): URLs, XML, canonical requests
 *
 * Errors are sticky: after a failed allocation every call does nothing
 * and tier_strbuf_finish reports ENOMEM.  A zeroed struct is empty.
 */
#ifndef TIER_STRBUF_H
#define TIER_STRBUF_H

#include <stddef.h>

struct tier_strbuf {
    char *s;
    size_t len;
    size_t size;
    int failed;
};

void tier_strbuf_add (struct tier_strbuf *b, const char *s, size_t n);
void tier_strbuf_puts (struct tier_strbuf *b, const char *s);
void tier_strbuf_putc (struct tier_strbuf *b, char c);
void tier_strbuf_printf (struct tier_strbuf *b, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
/* The string ("" if empty), or NULL with errno ENOMEM (buffer freed). */
char *tier_strbuf_finish (struct tier_strbuf *b);
void tier_strbuf_free (struct tier_strbuf *b);

#endif /* !TIER_STRBUF_H */
