/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* error.c - tier_errprintf */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

/* The length of s[0..n) without a UTF-8 sequence cut short at its end (a
 * text cut to fit, here or by vsnprintf): JSON, which carries these
 * texts, takes only whole characters. */
static size_t utf8_whole (const char *s, size_t n)
{
    size_t i = n, need;

    while (i > 0 && n - i < 4 && ((unsigned char) s[i - 1] & 0xc0) == 0x80)
        i--;
    if (i == 0 || (unsigned char) s[i - 1] < 0xc0)
        return n; /* ASCII last, or no lead byte: nothing to trim */
    i--;          /* the lead byte */
    need = (unsigned char) s[i] >= 0xf0   ? 4
           : (unsigned char) s[i] >= 0xe0 ? 3
                                          : 2;
    return n - i < need ? i : n;
}

size_t tier_text_escape (const char *in, char *out, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

    if (size == 0)
        return 0;
    for (; *in; in++) {
        unsigned char c = (unsigned char) *in;
        char e[5];
        size_t len = 1;

        e[0] = (char) c;
        if (c == '\n' || c == '\r' || c == '\t') {
            e[0] = '\\';
            e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            len = 2;
        }
        else if (c < 0x20 || c == 0x7f) {
            e[0] = '\\';
            e[1] = 'x';
            e[2] = hex[c >> 4];
            e[3] = hex[c & 15];
            len = 4;
        }
        if (n + len >= size)
            break; /* cut before a whole escape, never inside one */
        memcpy (out + n, e, len);
        n += len;
    }
    n = utf8_whole (out, n);
    out[n] = '\0';
    return n;
}

int tier_verrprintf (tier_error_t *error, const char *fmt, va_list ap)
{
    int saved = errno;

    if (error) {
        /* formatted apart: the arguments may include error->text */
        char text[sizeof (error->text)];

        (void) vsnprintf (text, sizeof (text), fmt, ap);
        (void) tier_text_escape (text, error->text, sizeof (error->text));
    }
    errno = saved;
    return -1;
}

int tier_errprintf (tier_error_t *error, const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    tier_verrprintf (error, fmt, ap);
    va_end (ap);
    return -1;
}
