/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* failalloc.h - fail the Nth allocation (link with -Wl,--wrap=malloc,...)
 *
 * Only calls from objects linked into the test binary are wrapped (our
 * own code in the convenience libraries), not libc's internal ones.
 */
#ifndef TIER_FAILALLOC_H
#define TIER_FAILALLOC_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

extern int failalloc_at;        /* fail the allocation with this number */
extern int failalloc_count;     /* allocations so far */
extern int failalloc_failed;    /* an allocation was failed */

static inline void failalloc_arm (int n)
{
    failalloc_at = n;
    failalloc_count = 0;
    failalloc_failed = 0;
}

#define FAILALLOC_DEFINE \
    int failalloc_at = -1, failalloc_count, failalloc_failed; \
    void *__real_malloc (size_t); \
    void *__real_calloc (size_t, size_t); \
    void *__real_realloc (void *, size_t); \
    char *__real_strdup (const char *); \
    char *__real_strndup (const char *, size_t); \
    void *__wrap_malloc (size_t n); \
    void *__wrap_calloc (size_t a, size_t b); \
    void *__wrap_realloc (void *p, size_t n); \
    char *__wrap_strdup (const char *s); \
    char *__wrap_strndup (const char *s, size_t n); \
    static int failalloc_now (void) \
    { \
        if (++failalloc_count == failalloc_at) { \
            failalloc_failed = 1; \
            errno = ENOMEM; \
            return 1; \
        } \
        return 0; \
    } \
    void *__wrap_malloc (size_t n) \
    { return failalloc_now () ? NULL : __real_malloc (n); } \
    void *__wrap_calloc (size_t a, size_t b) \
    { return failalloc_now () ? NULL : __real_calloc (a, b); } \
    void *__wrap_realloc (void *p, size_t n) \
    { return failalloc_now () ? NULL : __real_realloc (p, n); } \
    char *__wrap_strdup (const char *s) \
    { return failalloc_now () ? NULL : __real_strdup (s); } \
    char *__wrap_strndup (const char *s, size_t n) \
    { return failalloc_now () ? NULL : __real_strndup (s, n); }

#define FAILALLOC_LDFLAGS_NOTE \
    "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup"

#endif /* !TIER_FAILALLOC_H */
