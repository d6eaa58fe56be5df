/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* store.c - job registry and counters in LMDB; only the agent opens it
 *
 * Keys are big-endian so that cursors walk jobs in id order.  Job records
 * are JSON (Jansson) so that fields can be added without a migration;
 * counter records carry their schema's dimensions so that a newer agent
 * reads an older record (missing counters are zero).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/trust.h"
#include "store.h"

struct store {
    MDB_env *env;
    MDB_dbi jobs;
    MDB_dbi counters;
    MDB_dbi replicas;
    MDB_dbi outputs;
    MDB_dbi uploads;
};

#define COUNTERS_MAGIC 0x43524954u      /* "TIRC" */

/* A fuzzer (tests/fuzz/fuzz_rpc.c, built with -DTIER_FUZZING) keeps its
 * store on tmpfs and replays a crash from its input: it needs no commit
 * to reach the disk.  The agent's registry must survive a crash of the
 * node, so every other build syncs each commit.
 */
#ifdef TIER_FUZZING
#define STORE_ENV_FLAGS (MDB_NOTLS | MDB_NOSYNC | MDB_NOMETASYNC)
#else
#define STORE_ENV_FLAGS MDB_NOTLS
#endif

struct counters_rec {
    uint32_t magic;
    uint16_t nroles;
    uint16_t nctrs;
    uint64_t v[];                       /* nroles * nctrs */
};

static int lmdb_err (tier_error_t *error, int rc, const char *what)
{
    errno = rc > 0 ? rc : EIO;
    return tier_errprintf (error, "%s: %s", what, mdb_strerror (rc));
}

void store_close (struct store *st)
{
    if (st) {
        int saved = errno;
        if (st->env)
            mdb_env_close (st->env);
        free (st);
        errno = saved;
    }
}

struct store *store_open (const char *dir, size_t mapsize,
                          tier_error_t *error)
{
    /* the agent's own: nobody else may read or change it */
    const struct tier_trust own = { .kind = TIER_TRUST_USER_PRIVATE,
                                    .uid = geteuid (),
                                    .flags = O_DIRECTORY };
    struct store *st;
    MDB_txn *txn = NULL;
    char lock[PATH_MAX];
    int rc, dead = 0, fd;

    if (mkdir (dir, 0700) < 0 && errno != EEXIST) {
        tier_errprintf (error, "%s: %s", dir, strerror (errno));
        return NULL;
    }
    fd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || tier_trust_check (fd, dir, &own, NULL) < 0) {
        if (fd >= 0)
            close (fd);
        errno = EPERM;
        tier_errprintf (error, "%s: must be a directory owned by uid %d with "
                        "mode 0700", dir, (int) geteuid ());
        return NULL;
    }
    close (fd);
    if (!(st = calloc (1, sizeof (*st)))) {
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    if ((rc = mdb_env_create (&st->env))
        || (rc = mdb_env_set_maxdbs (st->env, 8))
        || (rc = mdb_env_set_mapsize (st->env, mapsize))
        || (rc = mdb_env_open (st->env, dir, STORE_ENV_FLAGS, 0600))) {
        lmdb_err (error, rc, dir);
        goto error;
    }
    /* a crashed agent may have left reader slots behind */
    if ((rc = mdb_reader_check (st->env, &dead))) {
        lmdb_err (error, rc, "mdb_reader_check");
        goto error;
    }
    (void) snprintf (lock, sizeof (lock), "%s/lock.mdb", dir);
    (void) chmod (lock, 0600);
    if ((rc = mdb_txn_begin (st->env, NULL, 0, &txn))
        || (rc = mdb_dbi_open (txn, "jobs", MDB_CREATE, &st->jobs))
        || (rc = mdb_dbi_open (txn, "counters", MDB_CREATE, &st->counters))
        || (rc = mdb_dbi_open (txn, "replicas", MDB_CREATE, &st->replicas))
        || (rc = mdb_dbi_open (txn, "outputs", MDB_CREATE, &st->outputs))
        || (rc = mdb_dbi_open (txn, "uploads", MDB_CREATE, &st->uploads))
        || (rc = mdb_txn_commit (txn))) {
        txn = NULL;
        lmdb_err (error, rc, "open databases");
        goto error;
    }
    return st;
error:
    store_close (st);
    return NULL;
}

int store_clear (struct store *st, tier_error_t *error)
{
    const MDB_dbi dbis[] = { st->jobs, st->counters, st->replicas, st->outputs,
                             st->uploads };
    MDB_txn *txn;
    int rc;

    if ((rc = mdb_txn_begin (st->env, NULL, 0, &txn)))
        return lmdb_err (error, rc, "mdb_txn_begin");
    for (size_t i = 0; i < sizeof (dbis) / sizeof (dbis[0]); i++)
        if ((rc = mdb_drop (txn, dbis[i], 0))) {
            mdb_txn_abort (txn);
            return lmdb_err (error, rc, "mdb_drop");
        }
    if ((rc = mdb_txn_commit (txn)))
        return lmdb_err (error, rc, "mdb_txn_commit");
    return 0;
}

static void job_key (uint32_t job_id, uint32_t restart, unsigned char k[8])
{
    for (int i = 0; i < 4; i++) {
        k[i] = (job_id >> (24 - 8 * i)) & 0xff;
        k[4 + i] = (restart >> (24 - 8 * i)) & 0xff;
    }
}

static const char *state_name (enum store_job_state s)
{
    switch (s) {
        case STORE_JOB_RUNNING: return "running";
        case STORE_JOB_ENDED: return "ended";
        case STORE_JOB_RECONCILED: return "reconciled";
    }
    return "unknown";
}

static enum store_job_state state_parse (const char *s)
{
    if (s && !strcmp (s, "ended"))
        return STORE_JOB_ENDED;
    if (s && !strcmp (s, "reconciled"))
        return STORE_JOB_RECONCILED;
    return STORE_JOB_RUNNING;
}

int store_job_set_groups (struct store_job *job, const json_t *groups,
                          tier_error_t *error)
{
    uint32_t v[TIER_CRED_GROUPS_MAX];
    size_t n = json_array_size (groups);

    if (!json_is_array (groups)) {
        errno = EINVAL;
        return tier_errprintf (error, "'groups' must be an array of gids");
    }
    if (n > TIER_CRED_GROUPS_MAX) {
        errno = E2BIG;
        return tier_errprintf (error, "'groups' has %zu gids, more than %d", n,
                               TIER_CRED_GROUPS_MAX);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *g = json_array_get (groups, i);
        json_int_t x = json_integer_value (g);
        if (!json_is_integer (g) || x < 0 || x >= (json_int_t) UINT32_MAX) {
            errno = EINVAL;
            return tier_errprintf (error, "'groups' item %zu is not a gid", i);
        }
        v[i] = (uint32_t) x;
    }
    memcpy (job->groups, v, n * sizeof (v[0]));
    job->ngroups = (int32_t) n;
    return 0;
}

/* The group list, when known, as a JSON array (NULL: none, or no
 * memory, which the caller tells apart by ngroups). */
static json_t *groups_encode (const struct store_job *j)
{
    json_t *a;

    if (j->ngroups < 0 || !(a = json_array ()))
        return NULL;
    for (int32_t i = 0; i < j->ngroups && i < TIER_CRED_GROUPS_MAX; i++)
        if (json_array_append_new (a, json_integer (j->groups[i])) < 0) {
            json_decref (a);
            return NULL;
        }
    return a;
}

static char *job_encode (const struct store_job *j)
{
    json_t *o = json_pack ("{s:I s:I s:I s:I s:I s:I s:s s:s s:s s:I s:I "
                           "s:i s:s s:I s:i s:i}",
                           "job_id", (json_int_t) j->job_id,
                           "restart", (json_int_t) j->restart,
                           "batch_id", (json_int_t) j->batch_id,
                           "array_task_id", (json_int_t) j->array_task_id,
                           "uid", (json_int_t) j->uid,
                           "gid", (json_int_t) j->gid,
                           "user", j->user,
                           "node", j->node,
                           "state", state_name (j->state),
                           "registered", (json_int_t) j->registered,
                           "ended", (json_int_t) j->ended,
                           "steps", (int) j->steps,
                           "options", j->options,
                           "reserved", (json_int_t) j->reserved,
                           "scratch_denied", (int) j->scratch_denied,
                           "exit_code", (int) j->exit_code);
    json_t *groups = groups_encode (j);
    char *s;

    if (o && j->write_cache
        && json_object_set_new (o, "write_cache",
                                json_integer ((json_int_t) j->write_cache))
               < 0) {
        json_decref (o);
        json_decref (groups);
        errno = ENOMEM;
        return NULL;
    }
    if (!o || (j->ngroups >= 0 && !groups)
        || (groups && json_object_set_new (o, "groups", groups) < 0)) {
        if (!o)
            json_decref (groups);
        json_decref (o);
        errno = ENOMEM;
        return NULL;
    }
    s = json_dumps (o, JSON_COMPACT);
    json_decref (o);
    if (!s)
        errno = ENOMEM;
    return s;
}

static int job_decode (const void *data, size_t len, struct store_job *j)
{
    json_error_t jerr;
    json_t *o = json_loadb (data, len, 0, &jerr);
    json_int_t job_id = 0, restart = 0, batch = 0, task = STORE_NO_TASK;
    json_int_t uid = 0, gid = 0, reg = 0, ended = 0, reserved = 0, wc = 0;
    int denied = 0, exit_code = -1;
    const char *user = "", *node = "", *state = NULL, *opts = "";
    int steps = 0;

    if (!o
        || json_unpack (o,
                        "{s:I s:I s?I s?I s:I s:I s?s s?s s?s s?I s?I "
                        "s?i s?s s?I s?i s?i s?I}",
                        "job_id", &job_id, "restart", &restart, "batch_id",
                        &batch, "array_task_id", &task, "uid", &uid, "gid",
                        &gid, "user", &user, "node", &node, "state", &state,
                        "registered", &reg, "ended", &ended, "steps", &steps,
                        "options", &opts, "reserved", &reserved,
                        "scratch_denied", &denied, "exit_code", &exit_code,
                        "write_cache", &wc)
               < 0) {
        json_decref (o);
        errno = EINVAL;
        return -1;
    }
    memset (j, 0, sizeof (*j));
    j->job_id = job_id;
    j->restart = restart;
    j->batch_id = batch;
    j->array_task_id = task;
    j->uid = uid;
    j->gid = gid;
    (void) snprintf (j->user, sizeof (j->user), "%s", user);
    (void) snprintf (j->node, sizeof (j->node), "%s", node);
    j->state = state_parse (state);
    j->registered = reg;
    j->ended = ended;
    j->steps = steps;
    (void) snprintf (j->options, sizeof (j->options), "%s", opts);
    j->reserved = (uint64_t) reserved;
    j->write_cache = wc > 0 ? (uint64_t) wc : 0;
    j->scratch_denied = denied;
    j->exit_code = exit_code;
    /* a record from before the groups were stored: not known (so are
     * unusable ones: the work then asks NSS, as without a list) */
    j->ngroups = -1;
    if (json_object_get (o, "groups"))
        (void) store_job_set_groups (j, json_object_get (o, "groups"), NULL);
    json_decref (o);
    return 0;
}

int store_job_put (struct store *st, const struct store_job *job,
                   tier_error_t *error)
{
    unsigned char k[8];
    MDB_val key = { sizeof (k), k }, val;
    MDB_txn *txn;
    char *s;
    int rc;

    if (!(s = job_encode (job)))
        return tier_errprintf (error, "encode job %u: out of memory",
                               job->job_id);
    job_key (job->job_id, job->restart, k);
    val.mv_size = strlen (s);
    val.mv_data = s;
    if ((rc = mdb_txn_begin (st->env, NULL, 0, &txn))) {
        free (s);
        return lmdb_err (error, rc, "store job");
    }
    if ((rc = mdb_put (txn, st->jobs, &key, &val, 0))) {
        mdb_txn_abort (txn);
        free (s);
        return lmdb_err (error, rc, "store job");
    }
    free (s);
    if ((rc = mdb_txn_commit (txn)))
        return lmdb_err (error, rc, "store job");
    return 0;
}

int store_job_get (struct store *st, uint32_t job_id, uint32_t restart,
                   struct store_job *job, tier_error_t *error)
{
    unsigned char k[8];
    MDB_val key = { sizeof (k), k }, val;
    MDB_txn *txn;
    int rc;

    job_key (job_id, restart, k);
    if ((rc = mdb_txn_begin (st->env, NULL, MDB_RDONLY, &txn)))
        return lmdb_err (error, rc, "read job");
    rc = mdb_get (txn, st->jobs, &key, &val);
    if (rc == MDB_NOTFOUND) {
        mdb_txn_abort (txn);
        errno = ENOENT;
        return tier_errprintf (error, "job %u is not registered on this "
                               "node", job_id);
    }
    if (rc) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "read job");
    }
    rc = job_decode (val.mv_data, val.mv_size, job);
    mdb_txn_abort (txn);
    if (rc < 0)
        return tier_errprintf (error, "job %u: corrupt record", job_id);
    return 0;
}

int store_job_latest (struct store *st, uint32_t job_id,
                      struct store_job *job, tier_error_t *error)
{
    unsigned char k[8];
    MDB_val key = { sizeof (k), k }, val;
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc, found = 0;

    /* position after (job_id, UINT32_MAX) and step back */
    job_key (job_id, UINT32_MAX, k);
    if ((rc = mdb_txn_begin (st->env, NULL, MDB_RDONLY, &txn)))
        return lmdb_err (error, rc, "read job");
    if ((rc = mdb_cursor_open (txn, st->jobs, &cur))) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "read job");
    }
    rc = mdb_cursor_get (cur, &key, &val, MDB_SET_RANGE);
    if (rc == 0 && key.mv_size == 8 && !memcmp (key.mv_data, k, 8))
        found = 1;                      /* restart == UINT32_MAX itself */
    else if (rc == 0 || rc == MDB_NOTFOUND)
        rc = mdb_cursor_get (cur, &key, &val,
                             rc == 0 ? MDB_PREV : MDB_LAST);
    if (!found && rc == 0 && key.mv_size == 8
        && !memcmp (key.mv_data, k, 4))
        found = 1;
    if (found)
        found = job_decode (val.mv_data, val.mv_size, job) == 0;
    mdb_cursor_close (cur);
    mdb_txn_abort (txn);
    if (!found) {
        errno = ENOENT;
        return tier_errprintf (error, "job %u is not registered on this "
                               "node", job_id);
    }
    return 0;
}

int store_job_delete (struct store *st, uint32_t job_id, uint32_t restart,
                      tier_error_t *error)
{
    unsigned char k[8];
    MDB_val key = { sizeof (k), k };
    MDB_txn *txn;
    int rc;

    job_key (job_id, restart, k);
    if ((rc = mdb_txn_begin (st->env, NULL, 0, &txn)))
        return lmdb_err (error, rc, "delete job");
    rc = mdb_del (txn, st->jobs, &key, NULL);
    if (rc && rc != MDB_NOTFOUND) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "delete job");
    }
    if ((rc = mdb_txn_commit (txn)))
        return lmdb_err (error, rc, "delete job");
    return 0;
}

int store_job_foreach (struct store *st, store_job_f cb, void *arg,
                       tier_error_t *error)
{
    MDB_val key, val;
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc;

    if ((rc = mdb_txn_begin (st->env, NULL, MDB_RDONLY, &txn)))
        return lmdb_err (error, rc, "list jobs");
    if ((rc = mdb_cursor_open (txn, st->jobs, &cur))) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "list jobs");
    }
    for (rc = mdb_cursor_get (cur, &key, &val, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get (cur, &key, &val, MDB_NEXT)) {
        struct store_job j;
        if (job_decode (val.mv_data, val.mv_size, &j) < 0)
            continue;                   /* skip a corrupt record */
        if (cb (&j, arg))
            break;
    }
    mdb_cursor_close (cur);
    mdb_txn_abort (txn);
    if (rc && rc != MDB_NOTFOUND)
        return lmdb_err (error, rc, "list jobs");
    return 0;
}

static void counters_key (enum tier_scope scope, uint64_t id,
                          unsigned char k[9])
{
    k[0] = (unsigned char) scope;
    for (int i = 0; i < 8; i++)
        k[1 + i] = (id >> (56 - 8 * i)) & 0xff;
}

/* LMDB values are not aligned: copy fields out with memcpy. */
static void counters_decode (const MDB_val *val, struct tier_counters *c)
{
    const unsigned char *p = val->mv_data;
    struct counters_rec r;

    memset (c, 0, sizeof (*c));
    if (val->mv_size < sizeof (r))
        return;
    memcpy (&r, p, sizeof (r));
    if (r.magic != COUNTERS_MAGIC
        || val->mv_size < sizeof (r)
                          + (size_t) r.nroles * r.nctrs * sizeof (uint64_t))
        return;                         /* unreadable: treat as zero */
    for (int role = 0; role < r.nroles && role < TIER_ROLE_COUNT; role++)
        for (int k = 0; k < r.nctrs && k < TIER_CTR_COUNT; k++)
            memcpy (&c->v[role][k], p + sizeof (r) + sizeof (uint64_t)
                    * ((size_t) role * r.nctrs + k), sizeof (uint64_t));
}

int store_counters_add (struct store *st, const struct store_delta *d,
                        int n, tier_error_t *error)
{
    size_t size = sizeof (struct counters_rec)
                  + sizeof (uint64_t) * TIER_ROLE_COUNT * TIER_CTR_COUNT;
    struct counters_rec *rec;
    MDB_txn *txn;
    int rc = 0;

    if (n == 0)
        return 0;
    if (!(rec = calloc (1, size)))
        return tier_errprintf (error, "out of memory");
    if ((rc = mdb_txn_begin (st->env, NULL, 0, &txn))) {
        free (rec);
        return lmdb_err (error, rc, "store counters");
    }
    for (int i = 0; i < n; i++) {
        unsigned char k[9];
        MDB_val key = { sizeof (k), k }, val;
        struct tier_counters c;

        counters_key (d[i].scope, d[i].id, k);
        rc = mdb_get (txn, st->counters, &key, &val);
        if (rc == 0)
            counters_decode (&val, &c);
        else if (rc == MDB_NOTFOUND)
            memset (&c, 0, sizeof (c));
        else
            break;
        tier_counters_merge (&c, &d[i].c);
        rec->magic = COUNTERS_MAGIC;
        rec->nroles = TIER_ROLE_COUNT;
        rec->nctrs = TIER_CTR_COUNT;
        memcpy (rec->v, c.v, sizeof (c.v));
        val.mv_size = size;
        val.mv_data = rec;
        if ((rc = mdb_put (txn, st->counters, &key, &val, 0)))
            break;
    }
    free (rec);
    if (rc) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "store counters");
    }
    if ((rc = mdb_txn_commit (txn)))
        return lmdb_err (error, rc, "store counters");
    return 0;
}

int store_counters_get (struct store *st, enum tier_scope scope, uint64_t id,
                        struct tier_counters *c, tier_error_t *error)
{
    unsigned char k[9];
    MDB_val key = { sizeof (k), k }, val;
    MDB_txn *txn;
    int rc;

    memset (c, 0, sizeof (*c));
    counters_key (scope, id, k);
    if ((rc = mdb_txn_begin (st->env, NULL, MDB_RDONLY, &txn)))
        return lmdb_err (error, rc, "read counters");
    rc = mdb_get (txn, st->counters, &key, &val);
    if (rc == 0)
        counters_decode (&val, c);
    mdb_txn_abort (txn);
    if (rc && rc != MDB_NOTFOUND)
        return lmdb_err (error, rc, "read counters");
    return 0;
}

int store_counters_delete (struct store *st, enum tier_scope scope,
                           uint64_t id, tier_error_t *error)
{
    unsigned char k[9];
    MDB_val key = { sizeof (k), k };
    MDB_txn *txn;
    int rc;

    counters_key (scope, id, k);
    if ((rc = mdb_txn_begin (st->env, NULL, 0, &txn)))
        return lmdb_err (error, rc, "delete counters");
    rc = mdb_del (txn, st->counters, &key, NULL);
    if (rc && rc != MDB_NOTFOUND) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "delete counters");
    }
    if ((rc = mdb_txn_commit (txn)))
        return lmdb_err (error, rc, "delete counters");
    return 0;
}

static int kv_apply (struct store *st, MDB_dbi dbi, const struct store_kv *kv,
                     int n, tier_error_t *error)
{
    MDB_txn *txn;
    int rc = 0;

    if (n == 0)
        return 0;
    if ((rc = mdb_txn_begin (st->env, NULL, 0, &txn)))
        return lmdb_err (error, rc, "store replicas");
    for (int i = 0; i < n && !rc; i++) {
        MDB_val key = { strlen (kv[i].key), (void *) kv[i].key }, val;
        if (kv[i].val) {
            val.mv_size = strlen (kv[i].val);
            val.mv_data = (void *) kv[i].val;
            rc = mdb_put (txn, dbi, &key, &val, 0);
        }
        else if ((rc = mdb_del (txn, dbi, &key, NULL))
                 == MDB_NOTFOUND)
            rc = 0;
    }
    if (rc) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "store replicas");
    }
    if ((rc = mdb_txn_commit (txn)))
        return lmdb_err (error, rc, "store replicas");
    return 0;
}

static int kv_foreach (struct store *st, MDB_dbi dbi, store_kv_f cb,
                       void *arg, tier_error_t *error)
{
    MDB_val key, val;
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc;

    if ((rc = mdb_txn_begin (st->env, NULL, MDB_RDONLY, &txn)))
        return lmdb_err (error, rc, "list replicas");
    if ((rc = mdb_cursor_open (txn, dbi, &cur))) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "list replicas");
    }
    for (rc = mdb_cursor_get (cur, &key, &val, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get (cur, &key, &val, MDB_NEXT)) {
        char k[PATH_MAX + 128];
        if (key.mv_size >= sizeof (k))
            continue;
        memcpy (k, key.mv_data, key.mv_size);
        k[key.mv_size] = '\0';
        if (cb (k, val.mv_data, val.mv_size, arg))
            break;
    }
    mdb_cursor_close (cur);
    mdb_txn_abort (txn);
    if (rc && rc != MDB_NOTFOUND)
        return lmdb_err (error, rc, "list replicas");
    return 0;
}

int store_replica_apply (struct store *st, const struct store_kv *kv, int n,
                         tier_error_t *error)
{
    return kv_apply (st, st->replicas, kv, n, error);
}

int store_replica_foreach (struct store *st, store_kv_f cb, void *arg,
                           tier_error_t *error)
{
    return kv_foreach (st, st->replicas, cb, arg, error);
}

int store_output_apply (struct store *st, const struct store_kv *kv, int n,
                        tier_error_t *error)
{
    return kv_apply (st, st->outputs, kv, n, error);
}

int store_output_foreach (struct store *st, store_kv_f cb, void *arg,
                          tier_error_t *error)
{
    return kv_foreach (st, st->outputs, cb, arg, error);
}

int store_output_get (struct store *st, const char *k, char **val,
                      size_t *len, tier_error_t *error)
{
    MDB_val key = { strlen (k), (void *) k }, v;
    MDB_txn *txn;
    int rc;

    *val = NULL;
    if ((rc = mdb_txn_begin (st->env, NULL, MDB_RDONLY, &txn)))
        return lmdb_err (error, rc, "read output");
    if ((rc = mdb_get (txn, st->outputs, &key, &v)) == 0
        && (*val = malloc (v.mv_size + 1))) {
        memcpy (*val, v.mv_data, v.mv_size);
        (*val)[v.mv_size] = '\0';
        *len = v.mv_size;
    }
    mdb_txn_abort (txn);
    if (rc == MDB_NOTFOUND) {
        errno = ENOENT;
        return -1;
    }
    if (rc)
        return lmdb_err (error, rc, "read output");
    return *val ? 0 : (errno = ENOMEM, -1);
}

int store_upload_apply (struct store *st, const struct store_kv *kv, int n,
                        tier_error_t *error)
{
    return kv_apply (st, st->uploads, kv, n, error);
}

/* The keys starting with prefix, in order, from a cursor placed at the
 * first of them (MDB_SET_RANGE).  del: delete them instead of calling cb.
 */
static int upload_range (struct store *st, const char *prefix,
                         store_kv_f cb, void *arg, bool del,
                         tier_error_t *error)
{
    size_t plen = strlen (prefix);
    MDB_val key = { plen, (void *) prefix }, val;
    MDB_cursor *cur;
    MDB_txn *txn;
    int rc;

    if ((rc = mdb_txn_begin (st->env, NULL, del ? 0 : MDB_RDONLY, &txn)))
        return lmdb_err (error, rc, "uploads");
    if ((rc = mdb_cursor_open (txn, st->uploads, &cur))) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "uploads");
    }
    for (rc = mdb_cursor_get (cur, &key, &val, plen ? MDB_SET_RANGE
                                                    : MDB_FIRST); rc == 0;
         rc = mdb_cursor_get (cur, &key, &val, MDB_NEXT)) {
        char k[PATH_MAX + 128];
        if (key.mv_size < plen || memcmp (key.mv_data, prefix, plen))
            break;
        if (del) {
            if ((rc = mdb_cursor_del (cur, 0)))
                break;
            continue;
        }
        if (key.mv_size >= sizeof (k))
            continue;
        memcpy (k, key.mv_data, key.mv_size);
        k[key.mv_size] = '\0';
        if (cb (k, val.mv_data, val.mv_size, arg))
            break;
    }
    mdb_cursor_close (cur);
    if (rc && rc != MDB_NOTFOUND) {
        mdb_txn_abort (txn);
        return lmdb_err (error, rc, "uploads");
    }
    if (!del)
        mdb_txn_abort (txn);
    else if ((rc = mdb_txn_commit (txn)))
        return lmdb_err (error, rc, "uploads");
    return 0;
}

int store_upload_foreach (struct store *st, const char *prefix,
                          store_kv_f cb, void *arg, tier_error_t *error)
{
    return upload_range (st, prefix, cb, arg, false, error);
}

int store_upload_delete (struct store *st, const char *prefix,
                         tier_error_t *error)
{
    return upload_range (st, prefix, NULL, NULL, true, error);
}
