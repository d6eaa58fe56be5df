/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_store.c - the agent's LMDB registry and counters */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/store.h"
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int setup (void **state)
{
    snprintf (dir, sizeof (dir), "/tmp/test_store.XXXXXX");
    if (!mkdtemp (dir))
        return -1;
    strcat (dir, "/reg");
    return 0;
}

static int teardown (void **state)
{
    char cmd[128];

    dir[strlen (dir) - 4] = '\0';
    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
    return system (cmd) == 0 ? 0 : -1;
}

static struct store_job mkjob (uint32_t id, uint32_t restart, uint32_t uid)
{
    struct store_job j;

    memset (&j, 0, sizeof (j));
    j.job_id = id;
    j.restart = restart;
    j.batch_id = 4242;
    j.array_task_id = id - 4242;
    j.uid = uid;
    j.gid = uid;
    snprintf (j.user, sizeof (j.user), "u%u", uid);
    snprintf (j.node, sizeof (j.node), "n1");
    j.state = STORE_JOB_RUNNING;
    j.registered = 1700000000 + id;
    j.steps = 1;
    snprintf (j.options, sizeof (j.options), "{\"cache\":\"auto\"}");
    return j;
}

static int count_cb (const struct store_job *j, void *arg)
{
    (*(int *) arg)++;
    return 0;
}

static void test_jobs (void **state)
{
    tier_error_t error;
    struct store *st = store_open (dir, 1 << 24, &error);
    struct store_job j, g;
    struct stat sb;
    int n = 0;

    assert_non_null (st);
    assert_int_equal (stat (dir, &sb), 0);
    assert_int_equal (sb.st_mode & 0777, 0700);
    j = mkjob (4243, 0, 1000);
    assert_int_equal (store_job_put (st, &j, &error), 0);
    j = mkjob (4243, 1, 1000);          /* requeued: same id, new restart */
    j.steps = 3;
    assert_int_equal (store_job_put (st, &j, &error), 0);
    j = mkjob (4244, 0, 1001);
    assert_int_equal (store_job_put (st, &j, &error), 0);

    assert_int_equal (store_job_get (st, 4243, 0, &g, &error), 0);
    assert_int_equal (g.steps, 1);
    assert_string_equal (g.user, "u1000");
    assert_string_equal (g.options, "{\"cache\":\"auto\"}");
    assert_int_equal (store_job_latest (st, 4243, &g, &error), 0);
    assert_int_equal (g.restart, 1);
    assert_int_equal (g.steps, 3);
    errno = 0;
    assert_int_equal (store_job_get (st, 9999, 0, &g, &error), -1);
    assert_int_equal (errno, ENOENT);
    assert_int_equal (store_job_latest (st, 4242, &g, &error), -1);
    assert_int_equal (store_job_latest (st, 4245, &g, &error), -1);
    assert_int_equal (store_job_foreach (st, count_cb, &n, &error), 0);
    assert_int_equal (n, 3);

    /* it is durable */
    store_close (st);
    assert_non_null (st = store_open (dir, 1 << 24, &error));
    assert_int_equal (store_job_latest (st, 4244, &g, &error), 0);
    assert_int_equal (g.uid, 1001);
    assert_int_equal (store_job_delete (st, 4244, 0, &error), 0);
    assert_int_equal (store_job_latest (st, 4244, &g, &error), -1);
    store_close (st);
}

static void test_counters (void **state)
{
    tier_error_t error;
    struct store *st = store_open (dir, 1 << 24, &error);
    struct store_delta d[3];
    struct tier_counters c;

    assert_non_null (st);
    memset (d, 0, sizeof (d));
    d[0].scope = TIER_SCOPE_JOB;
    d[0].id = store_job_key (4242, 0);
    tier_counters_add (&d[0].c, TIER_ROLE_BATCH, TIER_CTR_HITS, 11);
    tier_counters_add (&d[0].c, TIER_ROLE_BATCH, TIER_CTR_SCRATCH_PEAK, 5);
    d[1].scope = TIER_SCOPE_BATCH;
    d[1].id = 4242;                     /* same number, other scope */
    tier_counters_add (&d[1].c, TIER_ROLE_BATCH, TIER_CTR_MISSES, 1);
    d[2].scope = TIER_SCOPE_NODE;
    tier_counters_add (&d[2].c, TIER_ROLE_PIPELINE, TIER_CTR_OPS, 7);
    assert_int_equal (store_counters_add (st, d, 3, &error), 0);
    /* a second flush adds; a maximum stays a maximum */
    d[0].c.v[TIER_ROLE_BATCH][TIER_CTR_SCRATCH_PEAK] = 3;
    assert_int_equal (store_counters_add (st, d, 1, &error), 0);

    assert_int_equal (store_counters_get (st, TIER_SCOPE_JOB,
                                          store_job_key (4242, 0), &c,
                                          &error), 0);
    assert_true (c.v[TIER_ROLE_BATCH][TIER_CTR_HITS] == 22);
    assert_true (c.v[TIER_ROLE_BATCH][TIER_CTR_SCRATCH_PEAK] == 5);
    assert_true (c.v[TIER_ROLE_BATCH][TIER_CTR_MISSES] == 0);
    assert_int_equal (store_counters_get (st, TIER_SCOPE_BATCH, 4242, &c,
                                          &error), 0);
    assert_true (c.v[TIER_ROLE_BATCH][TIER_CTR_MISSES] == 1);
    assert_true (c.v[TIER_ROLE_BATCH][TIER_CTR_HITS] == 0);
    assert_int_equal (store_counters_get (st, TIER_SCOPE_NODE, 0, &c,
                                          &error), 0);
    assert_true (tier_counters_total (&c, TIER_CTR_OPS) == 7);
    assert_int_equal (store_counters_get (st, TIER_SCOPE_BATCH, 1, &c,
                                          &error), 0);
    assert_true (tier_counters_total (&c, TIER_CTR_OPS) == 0);
    assert_int_equal (store_counters_delete (st, TIER_SCOPE_BATCH, 4242,
                                             &error), 0);
    assert_int_equal (store_counters_get (st, TIER_SCOPE_BATCH, 4242, &c,
                                          &error), 0);
    assert_true (c.v[TIER_ROLE_BATCH][TIER_CTR_MISSES] == 0);
    store_close (st);
}

static void test_refuses_open_dir (void **state)
{
    tier_error_t error;

    assert_int_equal (mkdir (dir, 0755), 0);
    assert_null (store_open (dir, 1 << 24, &error));
    assert_non_null (strstr (error.text, "mode 0700"));
}

static void test_names (void **state)
{
    for (int k = 0; k < TIER_CTR_COUNT; k++) {
        assert_non_null (tier_ctr_name (k));
        assert_int_equal (tier_ctr_parse (tier_ctr_name (k)), k);
    }
    for (int r = 0; r < TIER_ROLE_COUNT; r++)
        assert_int_equal (tier_role_parse (tier_role_name (r)), r);
    assert_int_equal (tier_ctr_parse ("bogus"), -1);
    assert_int_equal (tier_role_parse (NULL), -1);
    assert_null (tier_ctr_name (TIER_CTR_COUNT));
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown (test_counters, setup, teardown),
        cmocka_unit_test_setup_teardown (test_refuses_open_dir, setup,
                                         teardown),
        cmocka_unit_test (test_names),
    };
    return UNIT_RUN (tests);
}
