/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* error.h - an error text that travels with a -1/NULL return (flux style) */
#ifndef TIER_ERROR_H
#define TIER_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#define TIER_ERROR_MAX 512

typedef struct {
    char text[TIER_ERROR_MAX];
} tier_error_t;

/* in with its control characters escaped (newline, carriage return and
 * tab as \\n, \\r, \\t; the others as \\xHH) into out (size bytes, cut
 * before an escape that does not fit): one line, nothing for a terminal
 * to act on.  Returns the length written.  An error's text and every log
 * line go through it: a path a user chose cannot forge a line of the
 * log, nor move a terminal's cursor. */
size_t tier_text_escape (const char *in, char *out, size_t size);

/* Format into error (NULL-safe); errno is preserved.  Returns -1 so that
 * callers can write `return tier_errprintf (error, ...);`.
 */
int tier_errprintf (tier_error_t *error, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

int tier_verrprintf (tier_error_t *error, const char *fmt, va_list ap)
    __attribute__ ((format (printf, 2, 0)));

#endif /* !TIER_ERROR_H */
