/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* log.h - leveled logging to stderr, a file or syslog (daemon and CLI only;
 * the plugin logs through slurm_error) */
#ifndef TIER_LOG_H
#define TIER_LOG_H

#include <syslog.h>

enum tier_log_dest {
    TIER_LOG_STDERR = 0,
    TIER_LOG_SYSLOG,
    TIER_LOG_FILE,
};

/* Set up logging.  ident prefixes every line; level is a syslog level
 * (LOG_ERR .. LOG_DEBUG): messages above it are dropped.  For
 * TIER_LOG_FILE, path is opened for appending (O_CLOEXEC); as root under
 * lib/trust.h's ROOT_FILE rule (a refusal is logged where logging went
 * so far).  Returns 0, or -1 with errno set.
 */
int tier_log_init (const char *ident, enum tier_log_dest dest,
                   const char *path, int level);
void tier_log_fini (void);

/* Reopen the log file (after rotation; SIGHUP). */
int tier_log_reopen (void);

void tier_log_set_level (int level);
int tier_log_get_level (void);

/* Parse "error", "warning", "notice", "info", "debug" (or 0..7).
 * Returns the level or -1.
 */
int tier_log_level_parse (const char *s);
const char *tier_log_level_name (int level);

void tier_log (int level, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* Like tier_log (LOG_ERR, ...) with ": strerror (errno)" appended. */
void tier_log_error (const char *fmt, ...)
    __attribute__ ((format (printf, 1, 2)));

/* Rate limiting for lines that clients can make an event repeat (munge's
 * job_accept): a limiter lets burst lines through at once, then one line
 * per interval seconds; the first line let through after some were left
 * out says how many.  Zero fields take the defaults (5 lines, 60 s).
 * Initialise with { .burst = B, .interval = S } or all zeros.  Not
 * thread-safe: one limiter per thread (the agent's loop).
 */
struct tier_log_limit {
    unsigned burst;
    unsigned interval;
    unsigned tokens;
    long long last;             /* monotonic seconds of the last refill */
    unsigned long dropped;
    int started;
};

void tier_log_limited (struct tier_log_limit *rl, int level,
                       const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Log at LOG_ERR and exit (1); only for main () and ctl/. */
void tier_log_exit (const char *fmt, ...)
    __attribute__ ((format (printf, 1, 2), noreturn));
void tier_log_errn_exit (int errnum, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3), noreturn));

/* In a new child about to close its descriptors (agent/child.c): the
 * log file's descriptor, to keep open, or -1.  The syslog socket is
 * closed instead (the child's next message opens its own): a kept number
 * that the child later reuses must never receive log lines.
 */
int tier_log_child_fd (void);

#endif /* !TIER_LOG_H */
