/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* wcache.h - the interposer's write path into the block cache
 * (wcache.c), as preload.c's open calls it */
#ifndef TIER_PRELOAD_WCACHE_H
#define TIER_PRELOAD_WCACHE_H

#include <stdbool.h>

#define HIDDEN __attribute__ ((visibility ("hidden")))

/* An open with these flags may be cached (writing, not appending, not
 * synchronous or direct) -- if it lies under a block cache directory. */
HIDDEN bool tier_wcache_wants (int flags);
/* The job's log holds records (an open under a window directory waits
 * for them: tier_wcache_before_open, with the open's normalised path). */
HIDDEN bool tier_wcache_pending (void);
HIDDEN void tier_wcache_before_open (const char *norm);
/* fd was just opened with flags tier_wcache_wants: register it if it is
 * under a block cache directory (errno is kept). */
HIDDEN void tier_wcache_opened (int fd);

#endif /* !TIER_PRELOAD_WCACHE_H */
