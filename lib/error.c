/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* error.c - tier_errprintf */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>

#include "error.h"

int tier_verrprintf (tier_error_t *error, const char *fmt, va_list ap)
{
    int saved = errno;

    if (error)
        (void) vsnprintf (error->text, sizeof (error->text), fmt, ap);
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
