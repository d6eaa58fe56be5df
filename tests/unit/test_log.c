/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_log.c - levels, destinations */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/log.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    unlink (path);
    assert_int_equal (tier_log_init ("t", TIER_LOG_FILE, NULL, LOG_INFO), -1);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_levels),
        cmocka_unit_test (test_file),
    };
    return UNIT_RUN (tests);
}
