/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_units.c - sizes and durations */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/units.h"
#include "unit.h"

#include <errno.h>
#include <string.h>

static void test_size (void **state)
{
    static const struct { const char *s; uint64_t v; } ok[] = {
        { "0", 0 }, { "1", 1 }, { "512", 512 }, { "1K", 1024 },
        { "16M", 16ULL << 20 }, { "16m", 16ULL << 20 },
        { "16MB", 16ULL << 20 }, { "16MiB", 16ULL << 20 },
        { "2G", 2ULL << 30 }, { "3T", 3ULL << 40 }, { "1P", 1ULL << 50 },
        { "100B", 100 },
    };
    static const char *bad[] = {
        "", "M", "-1", "1.5G", "16X", "16 M", "16MM", "G16", " 1",
        "1KiBx", "0x10",
    };
    uint64_t v;

    for (size_t i = 0; i < sizeof (ok) / sizeof (ok[0]); i++) {
        assert_int_equal (tier_size_parse (ok[i].s, &v), 0);
        assert_true (v == ok[i].v);
    }
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        errno = 0;
        assert_int_equal (tier_size_parse (bad[i], &v), -1);
        assert_int_equal (errno, EINVAL);
    }
    errno = 0;
    assert_int_equal (tier_size_parse ("99999999999999999999", &v), -1);
    assert_int_equal (errno, ERANGE);
    assert_int_equal (tier_size_parse ("17000000P", &v), -1);
    assert_int_equal (errno, ERANGE);
    /* 8 EiB would not fit a JSON integer: the most is 8 EiB - 1 */
    errno = 0;
    assert_int_equal (tier_size_parse ("8192P", &v), -1);
    assert_int_equal (errno, ERANGE);
    assert_int_equal (tier_size_parse ("9223372036854775807", &v), 0);
    assert_true (v == TIER_SIZE_MAX);
    assert_int_equal (tier_size_parse ("9223372036854775808", &v), -1);
    assert_int_equal (tier_size_parse (NULL, &v), -1);
}

/* Sums of sizes saturate, never wrap (4096P + 4096P used to be 2^63, a
 * negative JSON integer; 8192P + 8192P wrapped to 0, an unlimited
 * scratch reserving nothing). */
static void test_size_add (void **state)
{
    (void) state;
    assert_true (tier_size_add (1, 2) == 3);
    assert_true (tier_size_add (4096ULL << 50, 4096ULL << 50) == TIER_SIZE_MAX);
    assert_true (tier_size_add (TIER_SIZE_MAX, 1) == TIER_SIZE_MAX);
    assert_true (tier_size_add (UINT64_MAX, 0) == TIER_SIZE_MAX);
    assert_true (tier_size_add (0, UINT64_MAX) == TIER_SIZE_MAX);
    assert_true (tier_size_add (TIER_SIZE_MAX - 1, 1) == TIER_SIZE_MAX);
}

static void test_duration (void **state)
{
    static const struct { const char *s; uint64_t v; } ok[] = {
        { "0", 0 }, { "30", 30 }, { "30s", 30 }, { "10m", 600 },
        { "2h", 7200 }, { "7d", 604800 }, { "1w", 604800 },
        { "1h30m", 5400 }, { "1d2h3m4s", 93784 },
    };
    static const char *bad[] = { "", "s", "-5s", "5x", "1.5h", "5 s",
                                 "5S", "m5" };
    uint64_t v;

    for (size_t i = 0; i < sizeof (ok) / sizeof (ok[0]); i++) {
        assert_int_equal (tier_duration_parse (ok[i].s, &v), 0);
        assert_true (v == ok[i].v);
    }
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        errno = 0;
        assert_int_equal (tier_duration_parse (bad[i], &v), -1);
        assert_int_equal (errno, EINVAL);
    }
    assert_int_equal (tier_duration_parse ("99999999999999999999d", &v), -1);
    assert_int_equal (errno, ERANGE);
    assert_int_equal (tier_duration_parse ("9999999999999999999w", &v), -1);
    assert_int_equal (errno, ERANGE);
}

static void test_size_format (void **state)
{
    char buf[32];

    assert_string_equal (tier_size_format (0, buf, sizeof (buf)), "0 B");
    assert_string_equal (tier_size_format (1023, buf, sizeof (buf)),
                         "1023 B");
    assert_string_equal (tier_size_format (1536, buf, sizeof (buf)),
                         "1.5 KiB");
    assert_string_equal (tier_size_format (3ULL << 30, buf, sizeof (buf)),
                         "3.0 GiB");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_size),
        cmocka_unit_test (test_size_add),
        cmocka_unit_test (test_duration),
        cmocka_unit_test (test_size_format),
    };
    return UNIT_RUN (tests);
}
