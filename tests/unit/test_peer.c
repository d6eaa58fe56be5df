/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_peer.c - finding a client's job from its process ancestry */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/peer.h"
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char proc[64];

/* A fake /proc/PID with a title, a parent and uids. */
static void fake (int pid, int ppid, const char *title, const char *uids)
{
    char path[256];
    FILE *f;

    snprintf (path, sizeof (path), "%s/%d", proc, pid);
    mkdir (path, 0755);
    snprintf (path, sizeof (path), "%s/%d/cmdline", proc, pid);
    f = fopen (path, "w");
    fwrite (title, 1, strlen (title) + 1, f);
    fclose (f);
    snprintf (path, sizeof (path), "%s/%d/stat", proc, pid);
    f = fopen (path, "w");
    fprintf (f, "%d (a (weird) name) S %d 1 1 0\n", pid, ppid);
    fclose (f);
    snprintf (path, sizeof (path), "%s/%d/status", proc, pid);
    f = fopen (path, "w");
    fprintf (f, "Name:\tx\nUid:\t%s\nGid:\t0 0 0 0\n", uids);
    fclose (f);
}

static int setup (void **state)
{
    snprintf (proc, sizeof (proc), "/tmp/test_peer.XXXXXX");
    if (!mkdtemp (proc))
        return -1;
    fake (100, 1, "slurmstepd: [42.batch]    ", "0\t0\t0\t0");
    fake (101, 100, "/bin/bash", "1000\t1000\t1000\t1000");
    fake (102, 101, "python3", "1000\t1000\t1000\t1000");
    /* a user's own process named like slurmstepd is not one */
    fake (200, 1, "slurmstepd: [43.0]", "1000\t1000\t1000\t1000");
    fake (201, 200, "cat", "1000\t1000\t1000\t1000");
    /* a root process whose saved uid is a user's is not trusted */
    fake (300, 1, "slurmstepd: [44.0]", "0\t0\t1000\t0");
    fake (301, 300, "cat", "1000\t1000\t1000\t1000");
    /* escaped: reparented to init */
    fake (400, 1, "daemon", "1000\t1000\t1000\t1000");
    return 0;
}

static int teardown (void **state)
{
    char cmd[128];

    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", proc);
    return system (cmd) == 0 ? 0 : -1;
}

static void test_title (void **state)
{
    uint32_t id;
    char step[32];

    assert_int_equal (peer_parse_title ("slurmstepd: [12.batch]", &id, step,
                                        sizeof (step)), 0);
    assert_int_equal (id, 12);
    assert_string_equal (step, "batch");
    assert_int_equal (peer_parse_title ("slurmstepd: [7.0]    ", &id, step,
                                        sizeof (step)), 0);
    assert_string_equal (step, "0");
    assert_int_equal (peer_parse_title ("slurmstepd: [9.extern]", &id, step,
                                        sizeof (step)), 0);
    assert_int_equal (peer_parse_title ("slurmstepd: [x.0]", &id, step,
                                        sizeof (step)), -1);
    assert_int_equal (peer_parse_title ("slurmstepd: [12]", &id, step,
                                        sizeof (step)), -1);
    assert_int_equal (peer_parse_title ("slurmstepd: [12.]", &id, step,
                                        sizeof (step)), -1);
    assert_int_equal (peer_parse_title ("slurmstepd: [0.0]", &id, step,
                                        sizeof (step)), -1);
    assert_int_equal (peer_parse_title ("slurmstepd: [99999999999.0]", &id,
                                        step, sizeof (step)), -1);
    assert_int_equal (peer_parse_title ("slurmd", &id, step, sizeof (step)),
                      -1);
    assert_int_equal (peer_parse_title ("slurmstepd: [1.a/b]", &id, step,
                                        sizeof (step)), -1);
}

static void test_ancestry (void **state)
{
    struct peer_job pj;
    tier_error_t error;

    assert_int_equal (peer_job_of (proc, 102, &pj, &error), 0);
    assert_int_equal (pj.job_id, 42);
    assert_string_equal (pj.step, "batch");
    assert_int_equal (pj.stepd, 100);
    errno = 0;
    assert_int_equal (peer_job_of (proc, 201, &pj, &error), -1);
    assert_int_equal (errno, ENOENT);
    assert_int_equal (peer_job_of (proc, 301, &pj, &error), -1);
    assert_int_equal (peer_job_of (proc, 400, &pj, &error), -1);
    assert_non_null (strstr (error.text, "not inside a Slurm job step"));
    errno = 0;
    assert_int_equal (peer_job_of (proc, 999, &pj, &error), -1);
    assert_int_equal (errno, ESRCH);
}

static void test_real_proc (void **state)
{
    struct peer_job pj;
    tier_error_t error;

    /* this test is not inside a Slurm step (unless run by one) */
    if (getenv ("SLURM_JOB_ID"))
        return;
    assert_int_equal (peer_job_of (NULL, getpid (), &pj, &error), -1);
    assert_int_equal (errno, ENOENT);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_title),
        cmocka_unit_test_setup_teardown (test_ancestry, setup, teardown),
        cmocka_unit_test (test_real_proc),
    };
    return UNIT_RUN (tests);
}
