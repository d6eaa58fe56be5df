/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* log.c - leveled logging to stderr, a file or syslog */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "trust.h"
#include "log.h"

static struct {
    char ident[64];
    enum tier_log_dest dest;
    char path[4096];
    int fd;
    int level;
} logger = { .ident = "tier", .dest = TIER_LOG_STDERR, .fd = -1,
             .level = LOG_INFO };

static const char *level_names[] = {
    "emerg", "alert", "crit", "error", "warning", "notice", "info", "debug",
};

int tier_log_level_parse (const char *s)
{
    if (!s || !*s)
        return -1;
    if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
        return s[0] - '0';
    for (int i = 0; i < 8; i++)
        if (!strcasecmp (s, level_names[i]))
            return i;
    if (!strcasecmp (s, "err"))
        return LOG_ERR;
    if (!strcasecmp (s, "warn"))
        return LOG_WARNING;
    return -1;
}

const char *tier_log_level_name (int level)
{
    if (level < 0 || level > 7)
        return "unknown";
    return level_names[level];
}

/* Root's log file is one it relies on (lib/trust.h's ROOT_FILE: no
 * symlink, root's, in directories nobody else may change), made 0640 if
 * missing.  A refusal is said on the current destination. */
static int open_file (const char *path)
{
    const struct tier_trust rule = {
        .kind = TIER_TRUST_ROOT_FILE,
        .create = 0640,
        .flags = O_WRONLY | O_APPEND,
    };
    tier_error_t e;
    int fd;

    if (geteuid () != 0)
        return open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
                     0640);
    if ((fd = tier_trust_open (path, &rule, &e)) < 0) {
        int saved = errno;
        tier_log (LOG_ERR, "%s", e.text);
        errno = saved;
    }
    return fd;
}

int tier_log_init (const char *ident, enum tier_log_dest dest,
                   const char *path, int level)
{
    if (ident)
        (void) snprintf (logger.ident, sizeof (logger.ident), "%s", ident);
    if (level >= 0 && level <= 7)
        logger.level = level;
    if (dest == TIER_LOG_FILE) {
        int fd;
        if (!path || strlen (path) >= sizeof (logger.path)) {
            errno = EINVAL;
            return -1;
        }
        if ((fd = open_file (path)) < 0)
            return -1;
        if (logger.fd >= 0)
            close (logger.fd);
        logger.fd = fd;
        (void) snprintf (logger.path, sizeof (logger.path), "%s", path);
    }
    else if (dest == TIER_LOG_SYSLOG)
        openlog (logger.ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
    logger.dest = dest;
    return 0;
}

void tier_log_fini (void)
{
    if (logger.dest == TIER_LOG_SYSLOG)
        closelog ();
    if (logger.fd >= 0)
        close (logger.fd);
    logger.fd = -1;
    logger.dest = TIER_LOG_STDERR;
}

int tier_log_reopen (void)
{
    int fd;

    if (logger.dest != TIER_LOG_FILE)
        return 0;
    if ((fd = open_file (logger.path)) < 0)
        return -1;
    close (logger.fd);
    logger.fd = fd;
    return 0;
}

void tier_log_set_level (int level)
{
    if (level >= 0 && level <= 7)
        logger.level = level;
}

int tier_log_get_level (void)
{
    return logger.level;
}

static void vlog (int level, int errnum, const char *fmt, va_list ap)
{
    char raw[2048], msg[2048];
    size_t n;

    if (level > logger.level)
        return;
    (void) vsnprintf (raw, sizeof (raw), fmt, ap);
    n = strlen (raw);
    if (errnum && n < sizeof (raw))
        (void) snprintf (raw + n, sizeof (raw) - n, ": %s", strerror (errnum));
    /* one line, whatever a path in it holds */
    (void) tier_text_escape (raw, msg, sizeof (msg));

    if (logger.dest == TIER_LOG_SYSLOG) {
        syslog (level, "%s", msg);
        return;
    }
    if (logger.dest == TIER_LOG_FILE && logger.fd >= 0) {
        char line[2300];
        char stamp[32];
        struct timeval tv;
        struct tm tm;
        int len;

        gettimeofday (&tv, NULL);
        localtime_r (&tv.tv_sec, &tm);
        strftime (stamp, sizeof (stamp), "%Y-%m-%dT%H:%M:%S", &tm);
        len = snprintf (line, sizeof (line), "%s.%03ld %s[%ld]: %s: %s\n",
                        stamp, (long) tv.tv_usec / 1000, logger.ident,
                        (long) getpid (), tier_log_level_name (level), msg);
        if (len > (int) sizeof (line))
            len = sizeof (line);
        /* One write per line: O_APPEND keeps lines whole across processes. */
        if (write (logger.fd, line, len) < 0) {
            /* nowhere left to report it */
        }
        return;
    }
    if (level <= LOG_WARNING)
        fprintf (stderr, "%s: %s%s\n", logger.ident,
                 level <= LOG_ERR ? "" : "warning: ", msg);
    else
        fprintf (stderr, "%s: %s\n", logger.ident, msg);
}

void tier_log (int level, const char *fmt, ...)
{
    va_list ap;
    int saved = errno;

    va_start (ap, fmt);
    vlog (level, 0, fmt, ap);
    va_end (ap);
    errno = saved;
}

void tier_log_error (const char *fmt, ...)
{
    va_list ap;
    int saved = errno;

    va_start (ap, fmt);
    vlog (LOG_ERR, saved, fmt, ap);
    va_end (ap);
    errno = saved;
}

void tier_log_limited (struct tier_log_limit *rl, int level,
                       const char *fmt, ...)
{
    unsigned burst = rl->burst ? rl->burst : 5;
    unsigned interval = rl->interval ? rl->interval : 60;
    long long now;
    char msg[2048];
    va_list ap;
    int saved = errno;

    if (level > logger.level)
        return;
    now = (long long) (tier_now_ms () / 1000);
    if (!rl->started) {
        rl->started = 1;
        rl->tokens = burst;
        rl->last = now;
    }
    else if (now - rl->last >= (long long) interval) {
        long long earned = (now - rl->last) / interval;
        rl->tokens = earned >= burst - rl->tokens ? burst
                     : rl->tokens + (unsigned) earned;
        rl->last += earned * interval;
    }
    if (rl->tokens == 0) {
        rl->dropped++;
        errno = saved;
        return;
    }
    rl->tokens--;
    va_start (ap, fmt);
    (void) vsnprintf (msg, sizeof (msg), fmt, ap);
    va_end (ap);
    if (rl->dropped)
        tier_log (level, "%s (%lu more like it left out)", msg, rl->dropped);
    else
        tier_log (level, "%s", msg);
    rl->dropped = 0;
    errno = saved;
}

void tier_log_exit (const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    vlog (LOG_ERR, 0, fmt, ap);
    va_end (ap);
    exit (1);
}

void tier_log_errn_exit (int errnum, const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    vlog (LOG_ERR, errnum, fmt, ap);
    va_end (ap);
    exit (1);
}

int tier_log_child_fd (void)
{
    if (logger.dest == TIER_LOG_SYSLOG) {
        closelog (); /* the next message opens anew */
        return -1;
    }
    return logger.dest == TIER_LOG_FILE ? logger.fd : -1;
}
