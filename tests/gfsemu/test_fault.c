/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_fault.c - the emulator's fault rules: parser, matcher, hangs */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

#include "failalloc.h"
#include "fault.h"

FAILALLOC_DEFINE

static char msg[512];

static struct fault_rules *parse (const char *text)
{
    struct fault_rules *r = fault_rules_parse (text, 7, msg, sizeof (msg));

    if (!r)
        fail_msg ("'%s': %s", text ? text : "(null)", msg);
    return r;
}

static void bad (const char *text, const char *why)
{
    errno = 0;
    assert_null (fault_rules_parse (text, 0, msg, sizeof (msg)));
    assert_int_equal (errno, EINVAL);
    if (!strstr (msg, why))
        fail_msg ("'%s': message '%s' lacks '%s'", text, msg, why);
}

static char *format (struct fault_rules *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&buf, &len);

    assert_non_null (f);
    assert_int_equal (fault_rules_format (r, f), 0);
    assert_int_equal (fclose (f), 0);
    return buf;
}

static enum fault_kind match (struct fault_rules *r, const char *path,
                              enum fault_op op, int *err)
{
    *err = 0;
    return fault_rules_match (r, path, op, err);
}

static void test_parse (void **state)
{
    struct fault_rules *r;

    r = parse (NULL);
    assert_int_equal (fault_rules_count (r), 0);
    assert_int_equal (fault_rules_seed (r), 7);
    fault_rules_destroy (r);
    r = parse ("  \n ; ;\n# only a comment\n");
    assert_int_equal (fault_rules_count (r), 0);
    fault_rules_destroy (r);

    r = parse ("out/*.dat:write:EIO:1\n"
               "*:create:ENOSPC ; a:open:eacces:2+\n"
               "  b:read:short:p12.5  # half of one in eight reads\n"
               "c:any:hang;d:fsync:EDQUOT:3;e:rename:EROFS\n"
               "seed=42\n"
               "f:any:short");
    assert_int_equal (fault_rules_count (r), 8);
    assert_int_equal (fault_rules_seed (r), 42);
    fault_rules_destroy (r);
    r = parse ("seed=0;x#y:read:EIO"); /* '#' inside a word is a name */
    assert_int_equal (fault_rules_seed (r), 0);
    assert_int_equal (fault_rules_count (r), 1);
    fault_rules_destroy (r);
}

static void test_parse_errors (void **state)
{
    bad ("x:read", "PATTERN:OP:ERROR");
    bad ("x", "PATTERN:OP:ERROR");
    bad ("x:read:EIO:1:2", "PATTERN:OP:ERROR");
    bad (":read:EIO", "empty pattern");
    bad ("x:reed:EIO", "unknown request 'reed'");
    bad ("x:READ:EIO", "unknown request 'READ'");
    bad ("x:read:EBADNESS", "unknown error 'EBADNESS'");
    bad ("x:read:", "unknown error ''");
    bad ("x:read:delay", "unknown error 'delay'");
    bad ("x:read:delay0", "unknown error 'delay0'");
    bad ("x:read:delay5s", "unknown error 'delay5s'");
    bad ("x:read:delay600001", "unknown error 'delay600001'");
    bad ("x:open:short", "short applies to read and write only");
    bad ("x:read:EIO:0", "bad WHEN '0'");
    bad ("x:read:EIO:-1", "bad WHEN");
    bad ("x:read:EIO:2x", "bad WHEN");
    bad ("x:read:EIO:+", "bad WHEN");
    bad ("x:read:EIO:p0", "bad WHEN");
    bad ("x:read:EIO:p101", "bad WHEN");
    bad ("x:read:EIO:p", "bad WHEN");
    bad ("x:read:EIO:px", "bad WHEN");
    bad ("x:read:EIO:", "bad WHEN");
    bad ("seed=x", "expected seed=N");
    bad ("seed=", "expected seed=N");
    /* The rule is named by its number and text. */
    bad ("a:read:EIO\nb:read:EIO;c:bad:EIO", "rule 3 'c:bad:EIO'");
}

static void test_delay (void **state)
{
    struct fault_rules *r = parse ("slow/*:open:delay1500;x:any:DELAY20:2");
    int err = 0;

    assert_int_equal (match (r, "slow/a", FAULT_OPEN, &err), FAULT_DELAY);
    assert_int_equal (err, 1500);
    assert_int_equal (match (r, "slow/a", FAULT_READ, &err), FAULT_NONE);
    assert_int_equal (match (r, "x", FAULT_READ, &err), FAULT_NONE);
    assert_int_equal (match (r, "x", FAULT_READ, &err), FAULT_DELAY);
    assert_int_equal (err, 20);
    fault_rules_destroy (r);
    (void) state;
}

static void test_match_when (void **state)
{
    struct fault_rules *r = parse ("out/*.dat:write:EIO:2\n"
                                   "log/*:write:ENOSPC:3+\n"
                                   "ro/*:any:EROFS\n");
    int err, i;

    /* Only the 2nd matching call; others and other ops do not count. */
    assert_int_equal (match (r, "out/a.dat", FAULT_WRITE, &err), FAULT_NONE);
    assert_int_equal (match (r, "out/a.txt", FAULT_WRITE, &err), FAULT_NONE);
    assert_int_equal (match (r, "out/a.dat", FAULT_READ, &err), FAULT_NONE);
    assert_int_equal (match (r, "out/b.dat", FAULT_WRITE, &err), FAULT_ERROR);
    assert_int_equal (err, EIO);
    for (i = 0; i < 5; i++)
        assert_int_equal (match (r, "out/a.dat", FAULT_WRITE, &err),
                          FAULT_NONE);
    /* N+: the 3rd and every later one. */
    assert_int_equal (match (r, "log/x", FAULT_WRITE, &err), FAULT_NONE);
    assert_int_equal (match (r, "log/x", FAULT_WRITE, &err), FAULT_NONE);
    for (i = 0; i < 5; i++) {
        assert_int_equal (match (r, "log/x", FAULT_WRITE, &err), FAULT_ERROR);
        assert_int_equal (err, ENOSPC);
    }
    /* Every call of any request; '*' crosses '/'. */
    assert_int_equal (match (r, "ro/d/e", FAULT_MKDIR, &err), FAULT_ERROR);
    assert_int_equal (err, EROFS);
    assert_int_equal (match (r, "ro/f", FAULT_LOOKUP, &err), FAULT_ERROR);
    assert_int_equal (match (r, "ro", FAULT_LOOKUP, &err), FAULT_NONE);
    assert_int_equal (fault_rules_hits (r), 1 + 5 + 2);
    assert_int_equal (match (r, "ro/f", FAULT_NOPS, &err), FAULT_NONE);
    fault_rules_destroy (r);
}

static void test_match_kinds (void **state)
{
    struct fault_rules *r = parse ("*:any:short;*:any:hang\n*:any:EIO");
    char *text;
    int err;

    /* short only applies to reads and writes; hang takes the rest. */
    assert_int_equal (match (r, "f", FAULT_READ, &err), FAULT_SHORT);
    assert_int_equal (match (r, "f", FAULT_WRITE, &err), FAULT_SHORT);
    assert_int_equal (match (r, "f", FAULT_GETATTR, &err), FAULT_HANG);
    /* The root is never faulted. */
    assert_int_equal (match (r, ".", FAULT_GETATTR, &err), FAULT_NONE);
    /* Every rule counts what it matches, hits only the one that fired. */
    text = format (r);
    assert_string_equal (text, "seed=7\n"
                               "*:any:short # hits 2 matched 2\n"
                               "*:any:hang # hits 1 matched 3\n"
                               "*:any:EIO # hits 0 matched 3\n");
    free (text);
    fault_rules_destroy (r);

    r = parse ("a:read:EIO:1;a:read:EACCES");
    assert_int_equal (match (r, "a", FAULT_READ, &err), FAULT_ERROR);
    assert_int_equal (err, EIO);
    assert_int_equal (match (r, "a", FAULT_READ, &err), FAULT_ERROR);
    assert_int_equal (err, EACCES);
    fault_rules_destroy (r);
}

/* The formatted rules parse back to the same rules. */
static void test_format_roundtrip (void **state)
{
    struct fault_rules *r = parse ("seed=9;a/*:open:EACCES:2+;b:read:EIO:p50");
    struct fault_rules *r2;
    char *text, *text2;
    int err;

    (void) match (r, "a/x", FAULT_OPEN, &err);
    text = format (r);
    assert_non_null (strstr (text, "a/*:open:EACCES:2+ # hits 0 matched 1\n"));
    r2 = parse (text);
    assert_int_equal (fault_rules_count (r2), 2);
    assert_int_equal (fault_rules_seed (r2), 9);
    (void) match (r2, "a/x", FAULT_OPEN, &err);
    text2 = format (r2);
    assert_string_equal (text, text2);
    free (text);
    free (text2);
    fault_rules_destroy (r);
    fault_rules_destroy (r2);
}

/* pP picks the same calls for a seed, whatever else happens, and about
 * P percent of them. */
static void test_chance (void **state)
{
    struct fault_rules *a = parse ("seed=1;f:read:EIO:p30");
    struct fault_rules *b = parse ("seed=1;f:read:EIO:p30");
    struct fault_rules *c = parse ("seed=2;f:read:EIO:p30");
    struct fault_rules *all = parse ("f:read:EIO:p100");
    int err, n, hits = 0, differ = 0;

    for (n = 1; n <= 10000; n++) {
        enum fault_kind ka = match (a, "f", FAULT_READ, &err);
        enum fault_kind kb = match (b, "f", FAULT_READ, &err);
        enum fault_kind kc = match (c, "f", FAULT_READ, &err);

        assert_int_equal (ka, kb);
        assert_int_equal (ka == FAULT_ERROR,
                          fault_chance (1, 0, (uint64_t) n, 300000));
        (void) match (b, "g", FAULT_READ, &err); /* not counted */
        hits += ka == FAULT_ERROR;
        differ += ka != kc;
        assert_int_equal (match (all, "f", FAULT_READ, &err), FAULT_ERROR);
    }
    assert_in_range (hits, 2800, 3200);
    assert_true (differ > 1000);
    assert_int_equal (fault_rules_hits (a), (uint64_t) hits);
    fault_rules_destroy (a);
    fault_rules_destroy (b);
    fault_rules_destroy (c);
    fault_rules_destroy (all);
}

static void test_failalloc (void **state)
{
    const char *text = "seed=3;a:read:EIO:1\nb:write:short;c:any:hang:p5\n"
                       "d:open:ENOSPC;e:open:ENOSPC;f:open:ENOSPC;g:open:EIO;"
                       "h:open:EIO;i:open:EIO";
    struct fault_rules *r;
    int n;

    for (n = 1;; n++) {
        failalloc_arm (n);
        r = fault_rules_parse (text, 0, msg, sizeof (msg));
        failalloc_arm (-1);
        if (r) {
            assert_int_equal (fault_rules_count (r), 9);
            fault_rules_destroy (r);
            break;
        }
        assert_int_equal (errno, ENOMEM);
        assert_string_equal (msg, "out of memory");
    }
    assert_true (n > 10);
}

struct hanger {
    struct fault_ctl *c;
    int rc;
    int stop;
};

static int stop_flag (void *arg)
{
    return __atomic_load_n ((int *) arg, __ATOMIC_RELAXED);
}

static void *hang_thread (void *arg)
{
    struct hanger *h = arg;

    h->rc = fault_ctl_hang (h->c, stop_flag, &h->stop);
    return NULL;
}

static void wait_hung (struct fault_ctl *c, uint64_t n)
{
    struct fault_ctl_stats st;

    for (;;) {
        fault_ctl_get (c, &st);
        if (st.hung == n)
            return;
        usleep (1000);
    }
}

static void test_ctl (void **state)
{
    struct fault_ctl *c = fault_ctl_create (NULL, 5, 2);
    struct hanger h[3] = { { c, -2, 0 }, { c, -2, 0 }, { c, -2, 0 } };
    struct fault_ctl_stats st;
    pthread_t t[2];
    int err = 0;

    assert_non_null (c);
    assert_int_equal (fault_ctl_check (c, "a", FAULT_READ, &err), FAULT_NONE);
    fault_ctl_get (c, &st);
    assert_int_equal (st.rules, 0);
    assert_int_equal (st.seed, 5);
    assert_int_equal (fault_ctl_set (c, "a:read:EIO;a:read:bad", msg,
                                     sizeof (msg)),
                      -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (fault_ctl_set (c, "a:read:hang;b:read:EIO", msg,
                                     sizeof (msg)),
                      0);
    assert_int_equal (fault_ctl_check (c, "a", FAULT_READ, &err), FAULT_HANG);
    assert_int_equal (fault_ctl_check (c, "b", FAULT_READ, &err), FAULT_ERROR);
    assert_int_equal (err, EIO);
    fault_ctl_get (c, &st);
    assert_int_equal (st.rules, 2);
    assert_int_equal (st.hits, 2);

    /* Two hang; a third is refused (hang_max); new rules release them. */
    assert_int_equal (pthread_create (&t[0], NULL, hang_thread, &h[0]), 0);
    assert_int_equal (pthread_create (&t[1], NULL, hang_thread, &h[1]), 0);
    wait_hung (c, 2);
    assert_int_equal (fault_ctl_hang (c, NULL, NULL), -1);
    assert_int_equal (fault_ctl_set (c, "", msg, sizeof (msg)), 0);
    assert_int_equal (pthread_join (t[0], NULL), 0);
    assert_int_equal (pthread_join (t[1], NULL), 0);
    assert_int_equal (h[0].rc, 0);
    assert_int_equal (h[1].rc, 0);
    fault_ctl_get (c, &st);
    assert_int_equal (st.hung, 0);
    assert_int_equal (st.rules, 0);
    assert_int_equal (st.hits, 0);

    /* A hang also ends when told to stop (the session ended). */
    assert_int_equal (pthread_create (&t[0], NULL, hang_thread, &h[2]), 0);
    wait_hung (c, 1);
    __atomic_store_n (&h[2].stop, 1, __ATOMIC_RELAXED);
    assert_int_equal (pthread_join (t[0], NULL), 0);
    assert_int_equal (h[2].rc, 1);
    fault_ctl_destroy (c);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_parse),
        cmocka_unit_test (test_parse_errors),
        cmocka_unit_test (test_delay),
        cmocka_unit_test (test_match_when),
        cmocka_unit_test (test_match_kinds),
        cmocka_unit_test (test_format_roundtrip),
        cmocka_unit_test (test_chance),
        cmocka_unit_test (test_failalloc),
        cmocka_unit_test (test_ctl),
    };

    return UNIT_RUN (tests);
}
