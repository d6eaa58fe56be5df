/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_store.c - the agent's LMDB registry and counters */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/store.h"
#include "unit.h"

#include <errno.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
    j.ngroups = -1;
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
    j.reserved = 48u << 20;
    j.write_cache = (uint64_t) 5 << 40; /* a write cache's reservation */
    assert_int_equal (store_job_put (st, &j, &error), 0);

    assert_int_equal (store_job_get (st, 4243, 0, &g, &error), 0);
    assert_int_equal (g.steps, 1);
    assert_true (g.write_cache == 0);
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
    assert_true (g.reserved == 48u << 20);
    assert_true (g.write_cache == (uint64_t) 5 << 40);
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

/* A process with the environment open: "c" on its command pipe writes
 * back how many reader slots are in use, "q" ends it.  While it holds the
 * environment open, the lock file (and its reader table) is never reset,
 * so stale slots stay until someone runs mdb_reader_check.
 */
static int count_reader (const char *msg, void *ctx)
{
    int pid;

    if (sscanf (msg, "%d", &pid) == 1 && pid > 0)
        (*(int *) ctx)++;
    return 0;
}

static void holder (int cmd, int reply)
{
    MDB_env *env;
    char c;

    if (mdb_env_create (&env) || mdb_env_set_maxdbs (env, 8)
        || mdb_env_open (env, dir, MDB_NOTLS, 0600))
        _exit (2);
    while (read (cmd, &c, 1) == 1 && c == 'c') {
        int n = 0;
        (void) mdb_reader_list (env, count_reader, &n);
        if (write (reply, &n, sizeof (n)) != sizeof (n))
            _exit (2);
    }
    mdb_env_close (env);
    _exit (0);
}

/* A reader that takes a read transaction, says so, and waits to die. */
static void reader (int ready)
{
    MDB_env *env;
    MDB_txn *txn;

    if (mdb_env_create (&env) || mdb_env_set_maxdbs (env, 8)
        || mdb_env_open (env, dir, MDB_NOTLS, 0600)
        || mdb_txn_begin (env, NULL, MDB_RDONLY, &txn))
        _exit (2);
    if (write (ready, "r", 1) != 1)
        _exit (2);
    for (;;)
        pause ();
}

static int readers_in_use (int cmd, int reply)
{
    int n = -1;

    assert_int_equal (write (cmd, "c", 1), 1);
    assert_int_equal (read (reply, &n, sizeof (n)), sizeof (n));
    return n;
}

static void test_stale_readers (void **state)
{
    int cmd[2], reply[2], ready[2], status;
    struct store_job j = mkjob (4243, 0, 1000), got;
    tier_error_t error;
    struct store *st;
    pid_t h, r;
    char c;

    assert_non_null (st = store_open (dir, 1 << 24, &error));
    assert_int_equal (store_job_put (st, &j, &error), 0);
    store_close (st);

    assert_int_equal (pipe (cmd), 0);
    assert_int_equal (pipe (reply), 0);
    assert_int_equal (pipe (ready), 0);
    assert_true ((h = fork ()) >= 0);
    if (h == 0) {
        close (cmd[1]);
        close (reply[0]);
        holder (cmd[0], reply[1]);
    }
    close (cmd[0]);
    close (reply[1]);
    assert_int_equal (readers_in_use (cmd[1], reply[0]), 0);

    /* a reader dies by SIGKILL inside its read transaction */
    assert_true ((r = fork ()) >= 0);
    if (r == 0)
        reader (ready[1]);
    close (ready[1]);
    assert_int_equal (read (ready[0], &c, 1), 1);
    close (ready[0]);
    assert_int_equal (readers_in_use (cmd[1], reply[0]), 1);
    assert_int_equal (kill (r, SIGKILL), 0);
    assert_int_equal (waitpid (r, &status, 0), r);
    assert_true (WIFSIGNALED (status));
    assert_int_equal (readers_in_use (cmd[1], reply[0]), 1);  /* stale */

    /* the agent's reopen clears it, and the registry is intact */
    assert_non_null (st = store_open (dir, 1 << 24, &error));
    assert_int_equal (readers_in_use (cmd[1], reply[0]), 0);
    assert_int_equal (store_job_get (st, 4243, 0, &got, &error), 0);
    assert_int_equal (got.uid, 1000);
    store_close (st);

    assert_int_equal (write (cmd[1], "q", 1), 1);
    close (cmd[1]);
    close (reply[0]);
    assert_int_equal (waitpid (h, &status, 0), h);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}

struct keys_ctx {
    char seen[512];
};

static int keys_cb (const char *key, const void *val, size_t len, void *arg)
{
    struct keys_ctx *kc = arg;

    snprintf (kc->seen + strlen (kc->seen), sizeof (kc->seen)
              - strlen (kc->seen), "[%s=%.*s]", key, (int) len,
              (const char *) val);
    return 0;
}

static void test_uploads (void **state)
{
    struct store *st;
    tier_error_t error;
    struct keys_ctx kc = { "" };
    const struct store_kv kv[] = {
        { "7.0/0/a p00002", "\"e2\"" }, { "7.0/0/a u", "{}" },
        { "7.0/0/a p00001", "\"e1\"" }, { "7.0/0/a/b u", "{}" },
        { "7.0/1/a u", "{}" }, { "70.0/0/a u", "{}" }, { "7.1/0/a u", "{}" },
    };

    assert_non_null (st = store_open (dir, STORE_MAPSIZE_DEFAULT, &error));
    assert_int_equal (store_upload_apply (st, kv, 7, &error), 0);
    /* the parts and the header of one file, in key order */
    assert_int_equal (store_upload_foreach (st, "7.0/0/a ", keys_cb, &kc,
                                            &error), 0);
    assert_string_equal (kc.seen, "[7.0/0/a p00001=\"e1\"]"
                                  "[7.0/0/a p00002=\"e2\"][7.0/0/a u={}]");
    /* a job's uploads */
    kc.seen[0] = '\0';
    assert_int_equal (store_upload_foreach (st, "7.0/", keys_cb, &kc,
                                            &error), 0);
    assert_non_null (strstr (kc.seen, "[7.0/1/a u={}]"));
    assert_non_null (strstr (kc.seen, "[7.0/0/a/b u={}]"));
    assert_null (strstr (kc.seen, "70.0"));
    assert_null (strstr (kc.seen, "7.1/"));
    /* one file's go, nothing else */
    assert_int_equal (store_upload_delete (st, "7.0/0/a ", &error), 0);
    kc.seen[0] = '\0';
    assert_int_equal (store_upload_foreach (st, "7.0/0/", keys_cb, &kc,
                                            &error), 0);
    assert_string_equal (kc.seen, "[7.0/0/a/b u={}]");
    assert_int_equal (store_upload_delete (st, "nothing/", &error), 0);
    kc.seen[0] = '\0';
    assert_int_equal (store_upload_foreach (st, "", keys_cb, &kc, &error),
                      0);
    assert_non_null (strstr (kc.seen, "[70.0/0/a u={}]"));
    assert_non_null (strstr (kc.seen, "[7.1/0/a u={}]"));
    store_close (st);
}

/* store_clear empties every database and the store takes records again */
static void test_clear (void **state)
{
    tier_error_t error;
    struct store *st = store_open (dir, 1 << 24, &error);
    struct store_job j = mkjob (4243, 0, 1000), g;
    struct store_delta d;
    struct tier_counters c;
    struct keys_ctx kc = { "" };
    const struct store_kv kv = { "7.0/0/a u", "{}" };
    int n = 0;

    assert_non_null (st);
    memset (&d, 0, sizeof (d));
    d.scope = TIER_SCOPE_NODE;
    tier_counters_add (&d.c, TIER_ROLE_PIPELINE, TIER_CTR_OPS, 7);
    assert_int_equal (store_job_put (st, &j, &error), 0);
    assert_int_equal (store_counters_add (st, &d, 1, &error), 0);
    assert_int_equal (store_replica_apply (st, &kv, 1, &error), 0);
    assert_int_equal (store_output_apply (st, &kv, 1, &error), 0);
    assert_int_equal (store_upload_apply (st, &kv, 1, &error), 0);

    assert_int_equal (store_clear (st, &error), 0);
    assert_int_equal (store_job_foreach (st, count_cb, &n, &error), 0);
    assert_int_equal (n, 0);
    assert_int_equal (store_counters_get (st, TIER_SCOPE_NODE, 0, &c, &error),
                      0);
    assert_true (tier_counters_total (&c, TIER_CTR_OPS) == 0);
    assert_int_equal (store_replica_foreach (st, keys_cb, &kc, &error), 0);
    assert_int_equal (store_output_foreach (st, keys_cb, &kc, &error), 0);
    assert_int_equal (store_upload_foreach (st, "", keys_cb, &kc, &error), 0);
    assert_string_equal (kc.seen, "");

    assert_int_equal (store_job_put (st, &j, &error), 0);
    assert_int_equal (store_job_latest (st, 4243, &g, &error), 0);
    assert_int_equal (g.uid, 1000);
    store_close (st);
}

/* The job's group list: kept as given, "not known" kept apart from
 * "none". */
static void test_groups (void **state)
{
    tier_error_t error;
    struct store *st = store_open (dir, 1 << 24, &error);
    struct store_job j, g;

    assert_non_null (st);
    j = mkjob (4243, 0, 1000);
    j.ngroups = 3;
    j.groups[0] = 1000;
    j.groups[1] = 0;
    j.groups[2] = 4294967294u; /* the largest gid */
    assert_int_equal (store_job_put (st, &j, &error), 0);
    j = mkjob (4244, 0, 1001); /* not known */
    assert_int_equal (store_job_put (st, &j, &error), 0);
    j = mkjob (4245, 0, 1002);
    j.ngroups = 0; /* known: none */
    assert_int_equal (store_job_put (st, &j, &error), 0);
    j = mkjob (4246, 0, 1003);
    j.ngroups = TIER_CRED_GROUPS_MAX;
    for (int i = 0; i < TIER_CRED_GROUPS_MAX; i++)
        j.groups[i] = 5000 + (uint32_t) i;
    assert_int_equal (store_job_put (st, &j, &error), 0);
    store_close (st);

    assert_non_null (st = store_open (dir, 1 << 24, &error));
    assert_int_equal (store_job_get (st, 4243, 0, &g, &error), 0);
    assert_int_equal (g.ngroups, 3);
    assert_int_equal (g.groups[0], 1000);
    assert_int_equal (g.groups[1], 0);
    assert_true (g.groups[2] == 4294967294u);
    assert_string_equal (g.user, "u1000");
    assert_int_equal (store_job_get (st, 4244, 0, &g, &error), 0);
    assert_int_equal (g.ngroups, -1);
    assert_int_equal (store_job_get (st, 4245, 0, &g, &error), 0);
    assert_int_equal (g.ngroups, 0);
    assert_int_equal (store_job_get (st, 4246, 0, &g, &error), 0);
    assert_int_equal (g.ngroups, TIER_CRED_GROUPS_MAX);
    assert_int_equal (g.groups[TIER_CRED_GROUPS_MAX - 1],
                      5000 + TIER_CRED_GROUPS_MAX - 1);
    store_close (st);
}

/* Put a raw job record, as an older agent (or a damaged one) wrote it. */
static void put_raw (uint32_t job_id, const char *json)
{
    unsigned char k[8] = { 0 };
    MDB_val key = { sizeof (k), k }, val = { strlen (json), (void *) json };
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;

    for (int i = 0; i < 4; i++)
        k[i] = (job_id >> (24 - 8 * i)) & 0xff; /* restart 0 */
    assert_int_equal (mdb_env_create (&env), 0);
    assert_int_equal (mdb_env_set_maxdbs (env, 8), 0);
    assert_int_equal (mdb_env_open (env, dir, MDB_NOTLS, 0600), 0);
    assert_int_equal (mdb_txn_begin (env, NULL, 0, &txn), 0);
    assert_int_equal (mdb_dbi_open (txn, "jobs", 0, &dbi), 0);
    assert_int_equal (mdb_put (txn, dbi, &key, &val, 0), 0);
    assert_int_equal (mdb_txn_commit (txn), 0);
    mdb_env_close (env);
}

static void test_groups_old_records (void **state)
{
    tier_error_t error;
    struct store *st = store_open (dir, 1 << 24, &error);
    struct store_job g;

    assert_non_null (st);
    store_close (st);
    /* before the agent stored groups */
    put_raw (4243,
             "{\"job_id\":4243,\"restart\":0,\"batch_id\":4242,"
             "\"uid\":1000,\"gid\":1000,\"user\":\"u1000\",\"node\":\"n1\","
             "\"state\":\"running\",\"steps\":2,\"options\":\"{}\"}");
    /* groups no agent writes: taken as not known, the rest kept */
    put_raw (4244, "{\"job_id\":4244,\"restart\":0,\"uid\":1001,"
                   "\"gid\":1001,\"user\":\"u1001\",\"groups\":[1001,-1]}");
    put_raw (4245, "{\"job_id\":4245,\"restart\":0,\"uid\":1002,"
                   "\"gid\":1002,\"user\":\"u1002\",\"groups\":\"1002\"}");
    assert_non_null (st = store_open (dir, 1 << 24, &error));
    assert_int_equal (store_job_get (st, 4243, 0, &g, &error), 0);
    assert_int_equal (g.ngroups, -1);
    assert_int_equal (g.steps, 2);
    assert_int_equal (g.uid, 1000);
    assert_string_equal (g.user, "u1000");
    assert_int_equal (store_job_get (st, 4244, 0, &g, &error), 0);
    assert_int_equal (g.ngroups, -1);
    assert_int_equal (g.uid, 1001);
    assert_int_equal (store_job_get (st, 4245, 0, &g, &error), 0);
    assert_int_equal (g.ngroups, -1);
    /* a later registration's list fills it in */
    g.ngroups = 1;
    g.groups[0] = 1002;
    assert_int_equal (store_job_put (st, &g, &error), 0);
    assert_int_equal (store_job_get (st, 4245, 0, &g, &error), 0);
    assert_int_equal (g.ngroups, 1);
    assert_int_equal (g.groups[0], 1002);
    store_close (st);
}

/* What a registration's "groups" may be (store_job_set_groups is the
 * register handler's check). */
static void test_groups_valid (void **state)
{
    static const struct {
        const char *json;
        int err;
    } bad[] = {
        { "\"1000\"", EINVAL },
        { "{\"g\":1000}", EINVAL },
        { "null", EINVAL },
        { "1000", EINVAL },
        { "[-1]", EINVAL },
        { "[4294967295]", EINVAL }, /* (gid_t) -1: no group */
        { "[4294967296]", EINVAL },
        { "[1000,1.5]", EINVAL },
        { "[\"1000\"]", EINVAL },
        { "[true]", EINVAL },
        { "[null]", EINVAL },
        { "[[1000]]", EINVAL },
        { "[9223372036854775807]", EINVAL },
    };
    struct store_job j;
    tier_error_t error;
    json_error_t jerr;
    json_t *a;

    memset (&j, 0, sizeof (j));
    j.ngroups = 1;
    j.groups[0] = 77;
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        assert_non_null (a = json_loads (bad[i].json, JSON_DECODE_ANY, &jerr));
        errno = 0;
        error.text[0] = '\0';
        assert_int_equal (store_job_set_groups (&j, a, &error), -1);
        assert_int_equal (errno, bad[i].err);
        assert_non_null (strstr (error.text, "'groups'"));
        /* unchanged */
        assert_int_equal (j.ngroups, 1);
        assert_int_equal (j.groups[0], 77);
        json_decref (a);
    }
    /* at most TIER_CRED_GROUPS_MAX */
    assert_non_null (a = json_array ());
    for (int i = 0; i < TIER_CRED_GROUPS_MAX; i++)
        assert_int_equal (json_array_append_new (a, json_integer (i)), 0);
    assert_int_equal (store_job_set_groups (&j, a, &error), 0);
    assert_int_equal (j.ngroups, TIER_CRED_GROUPS_MAX);
    assert_int_equal (j.groups[TIER_CRED_GROUPS_MAX - 1],
                      TIER_CRED_GROUPS_MAX - 1);
    assert_int_equal (json_array_append_new (a, json_integer (1)), 0);
    errno = 0;
    assert_int_equal (store_job_set_groups (&j, a, &error), -1);
    assert_int_equal (errno, E2BIG);
    assert_int_equal (j.ngroups, TIER_CRED_GROUPS_MAX);
    json_decref (a);
    /* none, and the extremes */
    assert_non_null (a = json_loads ("[]", 0, &jerr));
    assert_int_equal (store_job_set_groups (&j, a, &error), 0);
    assert_int_equal (j.ngroups, 0);
    json_decref (a);
    assert_non_null (a = json_loads ("[0,4294967294,0]", 0, &jerr));
    assert_int_equal (store_job_set_groups (&j, a, &error), 0);
    assert_int_equal (j.ngroups, 3);
    assert_int_equal (j.groups[0], 0);
    assert_true (j.groups[1] == 4294967294u);
    json_decref (a);
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
        cmocka_unit_test_setup_teardown (test_stale_readers, setup, teardown),
        cmocka_unit_test_setup_teardown (test_uploads, setup, teardown),
        cmocka_unit_test_setup_teardown (test_clear, setup, teardown),
        cmocka_unit_test_setup_teardown (test_groups, setup, teardown),
        cmocka_unit_test_setup_teardown (test_groups_old_records, setup,
                                         teardown),
        cmocka_unit_test (test_groups_valid),
        cmocka_unit_test (test_names),
    };
    return UNIT_RUN (tests);
}
