/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_stats.c - the emulator's counters, their text form, root squash */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "creds.h"
#include "stats.h"

static char *format (struct stats *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&buf, &len);

    assert_non_null (f);
    assert_int_equal (stats_format (s, f), 0);
    assert_int_equal (fclose (f), 0);
    return buf;
}

static void test_entries (void **state)
{
    struct stats *s = stats_create ();
    struct stats_entry *a, *b;
    char path[64];
    int i;

    assert_non_null (s);
    a = stats_get (s, "data/in.bin");
    b = stats_get (s, "data/in.bin");
    assert_ptr_equal (a, b);
    assert_ptr_not_equal (a, stats_get (s, "data/in.bi"));
    stats_add (s, a, STATS_READ_BYTES, 10);
    stats_add (s, NULL, STATS_READ_BYTES, 5);   /* totals only */
    assert_int_equal (a->c[STATS_READ_BYTES], 10);
    assert_int_equal (stats_total (s, STATS_READ_BYTES), 15);
    /* Growth keeps every entry (and its address). */
    for (i = 0; i < 10000; i++) {
        snprintf (path, sizeof (path), "d/%d", i);
        stats_add (s, stats_get (s, path), STATS_LOOKUP, (uint64_t)i);
    }
    assert_ptr_equal (stats_get (s, "data/in.bin"), a);
    for (i = 0; i < 10000; i += 999) {
        snprintf (path, sizeof (path), "d/%d", i);
        assert_int_equal (stats_get (s, path)->c[STATS_LOOKUP], i);
    }
    stats_reset (s);
    assert_int_equal (a->c[STATS_READ_BYTES], 0);
    assert_int_equal (stats_total (s, STATS_LOOKUP), 0);
    stats_destroy (s);
}

static void test_format (void **state)
{
    struct stats *s = stats_create ();
    char *text, *p;
    int f;

    stats_add (s, stats_get (s, "b"), STATS_GETATTR, 3);
    stats_add (s, stats_get (s, "a dir/x\ny\\z"), STATS_READ_BYTES, 7);
    (void)stats_get (s, "untouched");
    text = format (s);
    /* Every total, in field order, then the files in byte order. */
    p = text;
    for (f = 0; f < STATS_NFIELDS; f++) {
        char line[64];
        int n = snprintf (line, sizeof (line), "total.%s %d\n",
                          stats_field_name (f),
                          f == STATS_GETATTR ? 3
                          : f == STATS_READ_BYTES ? 7 : 0);
        assert_memory_equal (p, line, (size_t)n);
        p += n;
    }
    assert_string_equal (p, "file.read_bytes 7 a dir/x\\ny\\\\z\n"
                            "file.getattr 3 b\n");
    free (text);
    assert_null (stats_field_name (STATS_NFIELDS));
    assert_string_equal (stats_field_name (STATS_ERRORS), "errors");
    stats_destroy (s);
}

static void test_squash (void **state)
{
    struct creds_map off = { 0, 65534, 65534 };
    struct creds_map on = { 1, 65534, 65533 };
    gid_t groups[3] = { 0, 10, 20 };
    uid_t uid;
    gid_t gid;

    uid = 0, gid = 0;
    assert_int_equal (creds_squash (&off, &uid, &gid, groups, 3), 3);
    assert_int_equal (uid, 0);
    assert_int_equal (gid, 0);

    assert_int_equal (creds_squash (&on, &uid, &gid, groups, 3), 0);
    assert_int_equal (uid, 65534);
    assert_int_equal (gid, 65533);

    uid = 1001, gid = 0;
    assert_int_equal (creds_squash (&on, &uid, &gid, groups, 3), 3);
    assert_int_equal (uid, 1001);
    assert_int_equal (gid, 65533);
    assert_int_equal (groups[0], 65533);
    assert_int_equal (groups[1], 10);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_entries),
        cmocka_unit_test (test_format),
        cmocka_unit_test (test_squash),
    };

    return UNIT_RUN (tests);
}
