/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_log.c - levels, destinations (a file, stderr, syslog)
 *
 * syslog is caught at link time (-Wl,--wrap=openlog,...): the test sees
 * the ident, options, facility and every message with its priority, and
 * nothing reaches the machine's syslog.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/error.h"
#include "lib/log.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

/* What the wrapped syslog functions saw. */
static struct {
    char ident[64];
    int option, facility;
    bool open;
    int n;
    int pri[8];
    char msg[8][256];
} sl;

void __wrap_openlog (const char *ident, int option, int facility);
void __wrap_closelog (void);
void __wrap_syslog (int pri, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
void __wrap___syslog_chk (int pri, int flag, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

void __wrap_openlog (const char *ident, int option, int facility)
{
    (void) snprintf (sl.ident, sizeof (sl.ident), "%s", ident);
    sl.option = option;
    sl.facility = facility;
    sl.open = true;
}

void __wrap_closelog (void)
{
    sl.open = false;
}

static void sl_add (int pri, const char *fmt, va_list ap)
{
    if (sl.n < 8) {
        sl.pri[sl.n] = pri;
        (void) vsnprintf (sl.msg[sl.n], sizeof (sl.msg[0]), fmt, ap);
        sl.n++;
    }
}

void __wrap_syslog (int pri, const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    sl_add (pri, fmt, ap);
    va_end (ap);
}

/* what syslog becomes with _FORTIFY_SOURCE */
void __wrap___syslog_chk (int pri, int flag, const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    sl_add (pri, fmt, ap);
    va_end (ap);
}

static void test_levels (void **state)
{
    assert_int_equal (tier_log_level_parse ("error"), LOG_ERR);
    assert_int_equal (tier_log_level_parse ("err"), LOG_ERR);
    assert_int_equal (tier_log_level_parse ("WARNING"), LOG_WARNING);
    assert_int_equal (tier_log_level_parse ("warn"), LOG_WARNING);
    assert_int_equal (tier_log_level_parse ("debug"), LOG_DEBUG);
    assert_int_equal (tier_log_level_parse ("7"), 7);
    assert_int_equal (tier_log_level_parse ("8"), -1);
    assert_int_equal (tier_log_level_parse ("chatty"), -1);
    assert_int_equal (tier_log_level_parse (""), -1);
    assert_int_equal (tier_log_level_parse (NULL), -1);
    assert_string_equal (tier_log_level_name (LOG_INFO), "info");
    assert_string_equal (tier_log_level_name (99), "unknown");
}

/* tier_text_escape, and the error text that goes through it */
static void test_escape (void **state)
{
    char out[32];
    tier_error_t e;

    (void) state;
    assert_int_equal (tier_text_escape ("a\tb\r\n\x01\x7f\xc3\xa9", out,
                                        sizeof (out)),
                      18);
    assert_string_equal (out, "a\\tb\\r\\n\\x01\\x7f\xc3\xa9");
    /* cut before an escape that does not fit, never inside one */
    assert_int_equal (tier_text_escape ("abcdefghijklm\n", out, 15), 13);
    assert_string_equal (out, "abcdefghijklm");
    /* never a UTF-8 character cut in two: the cut, or the input's end */
    assert_int_equal (tier_text_escape ("abcd\xc3\xa9", out, 6), 4);
    assert_string_equal (out, "abcd");
    assert_int_equal (tier_text_escape ("ab\xe2\x82", out, sizeof (out)), 2);
    assert_int_equal (tier_text_escape ("ab\xe2\x82\xac", out, sizeof (out)),
                      5);
    assert_int_equal (tier_text_escape ("\xf0\x9f\x98", out, sizeof (out)), 0);
    assert_int_equal (tier_text_escape ("abc", out, 1), 0);
    assert_string_equal (out, "");
    errno = EPERM;
    tier_errprintf (&e, "%s: %s", "/gfs/x\ny", "denied");
    assert_int_equal (errno, EPERM);
    assert_string_equal (e.text, "/gfs/x\\ny: denied");
    /* its own text as an argument */
    tier_errprintf (&e, "job 4: %s", e.text);
    assert_string_equal (e.text, "job 4: /gfs/x\\ny: denied");
}

static void test_file (void **state)
{
    char path[] = "/tmp/test_log.XXXXXX";
    char buf[4096];
    int fd = mkstemp (path);
    ssize_t n;

    assert_true (fd >= 0);
    close (fd);
    assert_int_equal (tier_log_init ("t", TIER_LOG_FILE, path, LOG_INFO), 0);
    tier_log (LOG_INFO, "hello %d", 42);
    tier_log (LOG_DEBUG, "not shown");
    errno = ENOENT;
    tier_log_error ("open %s", "x");
    assert_int_equal (errno, ENOENT);       /* logging keeps errno */
    tier_log_set_level (LOG_DEBUG);
    tier_log (LOG_DEBUG, "now shown");
    assert_int_equal (tier_log_get_level (), LOG_DEBUG);
    /* rotation: the file is reopened under its name */
    assert_int_equal (unlink (path), 0);
    assert_int_equal (tier_log_reopen (), 0);
    tier_log (LOG_NOTICE, "after rotation");
    /* a path a user chose cannot forge a line, nor reach a terminal */
    tier_log (LOG_NOTICE, "open %s",
              "/gfs/a\n2026-12-05 tierd[1]: err: forged\t\x1b[2J\x7f");
    tier_log_fini ();
    fd = open (path, O_RDONLY);
    assert_true (fd >= 0);
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    assert_true (n > 0);
    buf[n] = '\0';
    assert_non_null (strstr (buf, "t["));
    assert_null (strstr (buf, "hello 42"));     /* went to the old file */
    assert_non_null (strstr (buf, "notice: after rotation"));
    assert_non_null (strstr (buf, "notice: open /gfs/a\\n2026-12-05 tierd[1]: "
                                  "err: forged\\t\\x1b[2J\\x7f\n"));
    assert_null (strstr (buf, "\nerr: forged"));
    assert_null (strchr (buf, '\x1b'));
    unlink (path);
    assert_int_equal (tier_log_init ("t", TIER_LOG_FILE, NULL, LOG_INFO), -1);
}

/* Run fn with stderr on a pipe; return what it wrote (static buffer). */
static const char *capture_stderr (void (*fn) (void))
{
    static char buf[4096];
    int p[2], saved;
    ssize_t n;

    assert_int_equal (pipe (p), 0);
    fflush (stderr);
    assert_true ((saved = dup (2)) >= 0);
    assert_true (dup2 (p[1], 2) == 2);
    close (p[1]);
    fn ();
    fflush (stderr);
    assert_true (dup2 (saved, 2) == 2);        /* closes the write end */
    close (saved);
    n = read (p[0], buf, sizeof (buf) - 1);
    close (p[0]);
    assert_true (n >= 0);
    buf[n] = '\0';
    return buf;
}

static void log_some (void)
{
    tier_log (LOG_ERR, "bad %s", "thing");
    tier_log (LOG_WARNING, "careful");
    tier_log (LOG_NOTICE, "note %d", 1);
    tier_log (LOG_INFO, "info line");
    tier_log (LOG_DEBUG, "debug line");
    errno = EACCES;
    tier_log_error ("open %s", "/x");
}

static void test_stderr (void **state)
{
    const char *out;

    /* the default destination, before any init, is stderr */
    out = capture_stderr (log_some);
    assert_string_equal (out, "tier: bad thing\n"
                              "tier: warning: careful\n"
                              "tier: note 1\n"
                              "tier: info line\n"
                              "tier: open /x: Permission denied\n");
    assert_int_equal (tier_log_init ("tierctl", TIER_LOG_STDERR, NULL,
                                     LOG_WARNING), 0);
    out = capture_stderr (log_some);
    assert_string_equal (out, "tierctl: bad thing\n"
                              "tierctl: warning: careful\n"
                              "tierctl: open /x: Permission denied\n");
    tier_log_set_level (LOG_DEBUG);
    out = capture_stderr (log_some);
    assert_non_null (strstr (out, "tierctl: debug line\n"));
    /* a file logger that is finished falls back to stderr */
    {
        char path[] = "/tmp/test_log.XXXXXX";
        int fd = mkstemp (path);
        assert_true (fd >= 0);
        close (fd);
        assert_int_equal (tier_log_init ("f", TIER_LOG_FILE, path,
                                         LOG_INFO), 0);
        tier_log_fini ();
        unlink (path);
    }
    out = capture_stderr (log_some);
    assert_non_null (strstr (out, "f: bad thing\n"));
    tier_log_init ("tier", TIER_LOG_STDERR, NULL, LOG_INFO);
}

static void test_syslog (void **state)
{
    const char *out;

    memset (&sl, 0, sizeof (sl));
    assert_int_equal (tier_log_init ("tierd", TIER_LOG_SYSLOG, NULL,
                                     LOG_NOTICE), 0);
    assert_true (sl.open);
    assert_string_equal (sl.ident, "tierd");
    assert_int_equal (sl.facility, LOG_DAEMON);
    assert_true (sl.option & LOG_PID);
    /* nothing goes to stderr; messages keep their level */
    out = capture_stderr (log_some);
    assert_string_equal (out, "");
    assert_int_equal (sl.n, 4);                 /* info and debug dropped */
    assert_int_equal (sl.pri[0], LOG_ERR);
    assert_string_equal (sl.msg[0], "bad thing");
    assert_int_equal (sl.pri[1], LOG_WARNING);
    assert_string_equal (sl.msg[1], "careful");
    assert_int_equal (sl.pri[2], LOG_NOTICE);
    assert_string_equal (sl.msg[2], "note 1");
    assert_int_equal (sl.pri[3], LOG_ERR);
    assert_string_equal (sl.msg[3], "open /x: Permission denied");
    /* a message with a % in an argument is not a format */
    tier_log (LOG_ERR, "%s", "100% sure %s %n");
    assert_int_equal (sl.n, 5);
    assert_string_equal (sl.msg[4], "100% sure %s %n");
    assert_int_equal (tier_log_reopen (), 0);   /* nothing to reopen */
    tier_log_fini ();
    assert_false (sl.open);
    /* after fini, stderr again */
    out = capture_stderr (log_some);
    assert_non_null (strstr (out, "tierd: bad thing\n"));
    assert_int_equal (sl.n, 5);
    tier_log_init ("tier", TIER_LOG_STDERR, NULL, LOG_INFO);
}

/* Rate-limited lines: a burst, then one per interval, and the count of
 * what was left out on the next line (time moved by hand, not waited). */
static void test_limited (void **state)
{
    struct tier_log_limit rl = { .burst = 2, .interval = 60 };

    memset (&sl, 0, sizeof (sl));
    assert_int_equal (tier_log_init ("tierd", TIER_LOG_SYSLOG, NULL,
                                     LOG_INFO), 0);
    for (int i = 0; i < 4; i++)
        tier_log_limited (&rl, LOG_WARNING, "full %d", i);
    assert_int_equal (sl.n, 2);
    assert_string_equal (sl.msg[0], "full 0");
    assert_string_equal (sl.msg[1], "full 1");
    assert_int_equal (sl.pri[1], LOG_WARNING);
    tier_log_limited (&rl, LOG_DEBUG, "below the level: not even counted");
    rl.last -= 60;                      /* a minute later: one more line */
    tier_log_limited (&rl, LOG_WARNING, "full %d", 4);
    tier_log_limited (&rl, LOG_WARNING, "full %d", 5);
    assert_int_equal (sl.n, 3);
    assert_string_equal (sl.msg[2], "full 4 (2 more like it left out)");
    rl.last -= 3600;                    /* an hour: the burst, no more */
    for (int i = 6; i < 10; i++)
        tier_log_limited (&rl, LOG_WARNING, "full %d", i);
    assert_int_equal (sl.n, 5);
    assert_string_equal (sl.msg[3], "full 6 (1 more like it left out)");
    assert_string_equal (sl.msg[4], "full 7");
    tier_log_fini ();
    tier_log_init ("tier", TIER_LOG_STDERR, NULL, LOG_INFO);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_levels), cmocka_unit_test (test_stderr),
        cmocka_unit_test (test_syslog), cmocka_unit_test (test_file),
        cmocka_unit_test (test_escape), cmocka_unit_test (test_limited),
    };
    return UNIT_RUN (tests);
}
