/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stats.c - per-batch statistics across nodes, and the node's metrics
 *
 * Every StatsInterval the agent publishes, for each batch with a job
 * running on this node (or one that ended in the last minute), a snapshot
 * of that batch's counters on this node -- with its jobs and a time
 * series -- to
 *
 *     SharedStateDir/users/USER/stats/BATCH/NODE.json
 *
 * written atomically (lib/state.h: a unique temporary, fsync, then
 * rename) by the publisher, a child started with agent/child.h that runs
 * with the user's own credentials (TIER_CRED_OWN): the directory is the
 * user's own (0700), so only the owner and root can read it, and a
 * root-squashing GFS works as well.  The loop never waits for that child
 * (child.c reaps it and calls publisher_done): a hung GFS delays the
 * user's snapshots, not the agent.
 * tierctl aggregates the nodes' files.  There is no central collector to
 * run or to fail: each node writes one small file per batch, the shared
 * file system the site already has carries them, and a reader opens as
 * many files as the batch had nodes.
 *
 * The node's aggregates go to MetricsFile for node_exporter's textfile
 * collector: tier_* counters and gauges with no user, job or path label,
 * written beneath a trusted descriptor of its directory (lib/trust.h's
 * ROOT_DIR) to a new temporary, then renamed.
 *
 * Owns the per-batch series, the publishers and MetricsFile.  Calls the
 * store, ctr.c, migrate_gauges, lib/state, lib/trust and agent/child.h.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/state.h"
#include "lib/trust.h"
#include "agent.h"
#include "child.h"

#define SERIES_MAX 720
#define RECENT_S 60

struct series {
    uint32_t batch;
    int n;
    int64_t t[SERIES_MAX];
    uint64_t v[SERIES_MAX][6];
    struct series *next;
};

static struct series *all_series;

static const enum tier_ctr series_ctrs[6] = {
    TIER_CTR_HITS, TIER_CTR_MISSES, TIER_CTR_BYTES_BB, TIER_CTR_BYTES_NVDIMM,
    TIER_CTR_GFS_BYTES_READ, TIER_CTR_GFS_BYTES_WRITTEN,
};

static struct series *series_get (uint32_t batch)
{
    struct series *s;

    for (s = all_series; s; s = s->next)
        if (s->batch == batch)
            return s;
    if (!(s = calloc (1, sizeof (*s))))
        return NULL;
    s->batch = batch;
    s->next = all_series;
    all_series = s;
    return s;
}

static void series_add (struct series *s, int64_t t,
                        const struct tier_counters *c)
{
    if (s->n == SERIES_MAX) {
        /* keep every other sample: the whole run, at half resolution */
        for (int i = 0; i < SERIES_MAX / 2; i++) {
            s->t[i] = s->t[2 * i + 1];
            memcpy (s->v[i], s->v[2 * i + 1], sizeof (s->v[i]));
        }
        s->n = SERIES_MAX / 2;
    }
    s->t[s->n] = t;
    for (int k = 0; k < 6; k++)
        s->v[s->n][k] = tier_counters_total (c, series_ctrs[k]);
    s->n++;
}

static json_t *series_json (const struct series *s)
{
    json_t *a = json_array ();

    for (int i = 0; s && i < s->n; i++) {
        json_t *row = json_pack ("[I I I I I I I]", (json_int_t) s->t[i],
                                 (json_int_t) s->v[i][0],
                                 (json_int_t) s->v[i][1],
                                 (json_int_t) s->v[i][2],
                                 (json_int_t) s->v[i][3],
                                 (json_int_t) s->v[i][4],
                                 (json_int_t) s->v[i][5]);
        json_array_append_new (a, row);
    }
    return a;
}

struct batch_info {
    uint32_t batch;
    uid_t uid;
    gid_t gid;
    char user[64];
    int running;
    int64_t last_end;
    json_t *jobs;
    struct batch_info *next;
};

struct collect {
    struct agent *a;
    struct batch_info *list;
    int64_t now;
};

static int collect_cb (const struct store_job *j, void *arg)
{
    struct collect *c = arg;
    struct batch_info *b;
    struct tier_counters ctr;
    json_t *job;
    char key[16];

    if (j->state != STORE_JOB_RUNNING && c->now - j->ended > RECENT_S)
        return 0;
    for (b = c->list; b; b = b->next)
        if (b->batch == j->batch_id && b->uid == j->uid)
            break;
    if (!b) {
        if (!(b = calloc (1, sizeof (*b))))
            return 0;
        b->batch = j->batch_id;
        b->uid = j->uid;
        b->gid = j->gid;
        (void) snprintf (b->user, sizeof (b->user), "%s", j->user);
        b->jobs = json_object ();
        b->next = c->list;
        c->list = b;
    }
    if (j->state == STORE_JOB_RUNNING)
        b->running++;
    else if (j->ended > b->last_end)
        b->last_end = j->ended;
    if (ctr_get (c->a, TIER_SCOPE_JOB, store_job_key (j->job_id, j->restart),
                 &ctr) < 0)
        return 0;
    job = json_pack ("{s:s s:o s:I s:I}",
                     "state", j->state == STORE_JOB_RUNNING ? "running"
                                                            : "ended",
                     "array_task_id", j->array_task_id == STORE_NO_TASK
                                      ? json_null ()
                                      : json_integer (j->array_task_id),
                     "registered", (json_int_t) j->registered,
                     "ended", (json_int_t) j->ended);
    if (job) {
        json_object_set_new (job, "counters", ctr_to_json (&ctr));
        (void) snprintf (key, sizeof (key), "%u", j->job_id);
        json_object_set_new (b->jobs, key, job);
    }
    return 0;
}

/* ------------------------------------------------------- publishers */

/* A user's snapshots are written by a child with the user's credentials
 * (the GFS may take its time, or hang: the loop never waits for it).  At
 * most one per user is in flight; while it is, the user's snapshots are
 * not taken again (the next one after it has ended is complete anyway),
 * and snapshots of batches past StatsRetention wait to be removed by the
 * next child, after what the previous one wrote.
 */
struct upub {
    uid_t uid;
    gid_t gid;
    char user[64];
    pid_t pid;                  /* the child in flight, or 0 */
    int64_t started_ms;
    int64_t warned_ms;
    uint32_t *gone;             /* batches whose snapshot is to go */
    int ngone, cgone;
    struct upub *next;
};

static struct upub *upubs;

static struct upub *upub_get (uid_t uid, gid_t gid, const char *user)
{
    struct upub *u;

    for (u = upubs; u; u = u->next)
        if (u->uid == uid)
            return u;
    if (!(u = calloc (1, sizeof (*u))))
        return NULL;
    u->uid = uid;
    u->gid = gid;
    (void) snprintf (u->user, sizeof (u->user), "%s", user);
    u->next = upubs;
    upubs = u;
    return u;
}

struct snap {
    uint32_t batch;
    char *text;
};

struct publish {
    const char *root; /* SharedStateDir */
    const struct upub *u;
    const char *node;
    const struct snap *snaps;
    int nsnaps;
};

/* In the child, with the user's own credentials (agent/child.h): each
 * snapshot to the user's TIER_STATE_STATS/BATCH/NODE.json (atomically),
 * then the snapshots of batches past retention away (and their directory
 * once empty).
 */
static int publisher_main (void *arg, int chan)
{
    const struct publish *p = arg;
    const struct upub *u = p->u;
    char batch[32], name[96];
    int rc = 0, sfd, bfd;

    (void) chan;
    (void) snprintf (name, sizeof (name), "%s.json", p->node);
    for (int i = 0; i < p->nsnaps; i++) {
        (void) snprintf (batch, sizeof (batch), "%u", p->snaps[i].batch);
        if (tier_state_publish (p->root, u->user, u->uid, TIER_STATE_STATS,
                                batch, name, p->snaps[i].text)
            < 0)
            rc = 1;
    }
    if (u->ngone == 0
        || (sfd = tier_state_user_open (p->root, u->user, u->uid,
                                        TIER_STATE_STATS, false, NULL))
               < 0)
        return rc;
    for (int i = 0; i < u->ngone; i++) {
        (void) snprintf (batch, sizeof (batch), "%u", u->gone[i]);
        if ((bfd = openat (sfd, batch,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
            < 0)
            continue;
        (void) unlinkat (bfd, name, 0);
        close (bfd);
        (void) unlinkat (sfd, batch, AT_REMOVEDIR); /* when the last
                                                         * node is gone */
    }
    close (sfd);
    return rc;
}

/* The publisher of u was reaped. */
static void publisher_done (struct agent *a, struct child *c, int status,
                            void *owner)
{
    struct upub *u = owner;
    char path[4096];

    (void) c;
    u->pid = 0;
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        if (tier_state_user_path (a->conf->shared_state_dir, u->user,
                                  TIER_STATE_STATS, path, sizeof (path))
            < 0)
            (void) snprintf (path, sizeof (path), "%s",
                             a->conf->shared_state_dir);
        tier_log (LOG_WARNING, "stats of %s could not be published in %s",
                  u->user, path);
    }
}

/* Start u's publisher for snaps. */
static int publisher_start (struct agent *a, struct upub *u,
                            const struct snap *snaps, int nsnaps)
{
    struct publish p = {
        .root = a->conf->shared_state_dir,
        .u = u,
        .node = a->node,
        .snaps = snaps,
        .nsnaps = nsnaps,
    };
    struct tier_cred cred;
    struct child_spec spec = {
        .name = "tierd-stats",
        .cred = &cred,
        .mode = TIER_CRED_OWN,
        .main = publisher_main,
        .arg = &p,
        .on_done = publisher_done,
        .owner = u,
    };
    tier_error_t error;
    struct child *c;

    tier_cred_init (&cred, u->uid, u->gid);
    (void) snprintf (spec.title, sizeof (spec.title), "tierd-stats %s",
                     u->user);
    if (!(c = child_start (a, &spec, &error))) {
        tier_log (LOG_ERR, "stats of %s: %s", u->user, error.text);
        return -1;
    }
    u->pid = child_pid (c);
    return 0;
}

/* The snapshot of batch b on this node (and a sample of its series). */
static char *snapshot (struct agent *a, struct batch_info *b, int64_t now)
{
    struct tier_counters ctr;
    struct series *s = series_get (b->batch);
    json_t *o;
    char *text;

    if (ctr_get (a, TIER_SCOPE_BATCH, b->batch, &ctr) < 0)
        return NULL;
    migrate_gauges (a, b->batch, &ctr);
    if (s && b->running)
        series_add (s, now, &ctr);
    o = json_pack ("{s:i s:I s:s s:s s:I s:i s:I}",
                   "format", 1,
                   "batch", (json_int_t) b->batch,
                   "node", a->node,
                   "user", b->user,
                   "time", (json_int_t) now,
                   "running", b->running,
                   "interval_ms", (json_int_t) a->conf->stats_interval_ms);
    if (!o)
        return NULL;
    json_object_set_new (o, "counters", ctr_to_json (&ctr));
    json_object_set (o, "jobs", b->jobs);
    json_object_set_new (o, "series", series_json (s));
    text = json_dumps (o, JSON_COMPACT);
    json_decref (o);
    return text;
}

static bool gone_has (const struct upub *u, uint32_t batch)
{
    for (int i = 0; i < u->ngone; i++)
        if (u->gone[i] == batch)
            return true;
    return false;
}

/* Start the child of user u for the batches of list that are u's. */
static void publish_user (struct agent *a, struct upub *u,
                          struct batch_info *list, int64_t now)
{
    struct snap *snaps = NULL;
    int nsnaps = 0, cap = 0, rc;

    if (u->pid > 0) {
        int64_t ms = tier_now_ms ();
        if (!u->warned_ms || ms - u->warned_ms >= 60000) {
            tier_log (LOG_WARNING, "stats for %s not published: the "
                      "previous publisher (pid %d) has been writing to %s "
                      "for %lld s", u->user, (int) u->pid,
                      a->conf->shared_state_dir,
                      (long long) ((ms - u->started_ms) / 1000));
            u->warned_ms = ms;
        }
        return;
    }
    for (struct batch_info *b = list; b; b = b->next) {
        char *text;
        if (b->uid != u->uid || gone_has (u, b->batch))
            continue;
        if (nsnaps == cap) {
            int n = cap ? cap * 2 : 8;
            struct snap *ns = realloc (snaps, (size_t) n * sizeof (*ns));
            if (!ns)
                break;
            snaps = ns;
            cap = n;
        }
        if ((text = snapshot (a, b, now))) {
            snaps[nsnaps].batch = b->batch;
            snaps[nsnaps++].text = text;
        }
    }
    if (nsnaps == 0 && u->ngone == 0) {
        free (snaps);
        return;
    }
    rc = publisher_start (a, u, snaps, nsnaps);
    for (int i = 0; i < nsnaps; i++)
        free (snaps[i].text);
    free (snaps);
    if (rc < 0)
        return;
    u->started_ms = tier_now_ms ();
    u->ngone = 0;                       /* the child removes them */
}

static void stats_retention (struct agent *a);

/* The textfile's lines. */
static void print_metrics (struct agent *a, FILE *f,
                           const struct tier_counters *c, int running)
{
    for (int k = 0; k < TIER_CTR_COUNT; k++) {
        bool gauge = tier_ctr_is_max (k) || k == TIER_CTR_MIGRATIONS_PENDING
                     || k == TIER_CTR_MIGRATIONS_FAILED;
        const char *n = tier_ctr_name (k);
        char name[96];
        size_t len = strlen (n);
        bool ms = len > 3 && !strcmp (n + len - 3, "_ms");

        /* Prometheus wants base units: *_ms become *_seconds */
        if (ms)
            (void) snprintf (name, sizeof (name), "tier_%.*s_seconds%s",
                             (int) (len - 3), n, gauge ? "" : "_total");
        else
            (void) snprintf (name, sizeof (name), "tier_%s%s", n,
                             gauge ? "" : "_total");
        fprintf (f, "# HELP %s tier's %s %s on this node, by data role.\n"
                 "# TYPE %s %s\n", name, n, gauge ? "gauge" : "counter",
                 name, gauge ? "gauge" : "counter");
        for (int r = 0; r < TIER_ROLE_COUNT; r++) {
            if (ms)
                fprintf (f, "%s{role=\"%s\"} %.3f\n", name, tier_role_name (r),
                         (double) c->v[r][k] / 1000.0);
            else
                fprintf (f, "%s{role=\"%s\"} %llu\n", name, tier_role_name (r),
                         (unsigned long long) c->v[r][k]);
        }
    }
    fprintf (f, "# HELP tier_jobs_running Jobs registered and running on "
             "this node.\n# TYPE tier_jobs_running gauge\n"
             "tier_jobs_running %d\n", running);
    fprintf (f, "# HELP tier_agent_up_seconds Seconds since tierd "
             "started.\n# TYPE tier_agent_up_seconds gauge\n"
             "tier_agent_up_seconds %lld\n",
             (long long) ((tier_now_ms () - a->started_ms) / 1000));
    fprintf (f, "# HELP tier_enabled 1 if jobs on this node may use tier.\n"
             "# TYPE tier_enabled gauge\ntier_enabled %d\n",
             !a->disabled && a->conf->enabled);
    if (a->conf->nvdimm_dir[0]) {
        struct statfs sf;
        fprintf (f, "# HELP tier_nvdimm_capacity_bytes The NVDIMM tier's "
                 "configured capacity.\n# TYPE tier_nvdimm_capacity_bytes "
                 "gauge\ntier_nvdimm_capacity_bytes %llu\n",
                 (unsigned long long) a->conf->nvdimm_capacity);
        fprintf (f,
                 "# HELP tier_nvdimm_reserved_bytes Scratch and write caches "
                 "reserved by running jobs.\n# TYPE tier_nvdimm_reserved_bytes "
                 "gauge\n"
                 "tier_nvdimm_reserved_bytes %llu\n",
                 (unsigned long long) agent_reserved (a));
        fprintf (f, "# HELP tier_nvdimm_pmem 1 if the NVDIMM tier is real "
                 "persistent memory.\n# TYPE tier_nvdimm_pmem gauge\n"
                 "tier_nvdimm_pmem %d\n", a->nvdimm_pmem ? 1 : 0);
        if (statfs (a->conf->nvdimm_dir, &sf) == 0)
            fprintf (f, "# HELP tier_nvdimm_fs_free_bytes Free bytes of the "
                     "NVDIMM tier's file system.\n"
                     "# TYPE tier_nvdimm_fs_free_bytes gauge\n"
                     "tier_nvdimm_fs_free_bytes %llu\n",
                     (unsigned long long) sf.f_bavail * sf.f_bsize);
    }
}

/* MetricsFile's directory (root's, lib/trust.h), and a new temporary
 * beneath it (tmp: its name): a descriptor, or -1 after a log line. */
static int metrics_tmp (const char *path, int *dirfd, char *tmp, size_t size)
{
    static const struct tier_trust rule = { .kind = TIER_TRUST_ROOT_DIR };
    const char *slash = strrchr (path, '/');
    char dir[PATH_MAX];
    tier_error_t e;
    int fd = -1;

    if (path[0] != '/' || !slash[1]) {
        tier_log (LOG_ERR, "MetricsFile %s: not an absolute path to a file",
                  path);
        return -1;
    }
    (void) snprintf (dir, sizeof (dir), "%.*s", (int) (slash - path), path);
    if ((*dirfd = tier_trust_open (dir[0] ? dir : "/", &rule, &e)) < 0) {
        tier_log (LOG_ERR, "MetricsFile: %s", e.text);
        return -1;
    }
    (void) snprintf (tmp, size, ".%s.%d.tmp", slash + 1, (int) getpid ());
    for (int tries = 0; fd < 0 && tries < 2; tries++) {
        /* one left by an earlier agent of this pid is stale */
        if (tries > 0)
            (void) unlinkat (*dirfd, tmp, 0);
        fd = openat (*dirfd, tmp,
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY
                         | O_CLOEXEC,
                     0644);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        tier_log_error ("MetricsFile %s/%s", dir, tmp);
        close (*dirfd);
    }
    return fd;
}

/* node_exporter textfile: node aggregates only. */
static void write_metrics (struct agent *a, int running)
{
    const char *path = a->conf->metrics_file;
    struct tier_counters c;
    char tmp[NAME_MAX + 32];
    int dfd, fd;
    FILE *f;

    if (!path[0] || ctr_get (a, TIER_SCOPE_NODE, 0, &c) < 0
        || (fd = metrics_tmp (path, &dfd, tmp, sizeof (tmp))) < 0)
        return;
    if (fchmod (fd, 0644) < 0 || !(f = fdopen (fd, "w"))) {
        tier_log_error ("MetricsFile %s", path);
        close (fd);
        goto error;
    }
    migrate_gauges (a, UINT32_MAX, &c); /* pending/failed: now */
    print_metrics (a, f, &c, running);
    if (fclose (f) != 0
        || renameat (dfd, tmp, dfd, strrchr (path, '/') + 1) < 0) {
        tier_log_error ("MetricsFile %s", path);
        goto error;
    }
    close (dfd);
    return;
error:
    (void) unlinkat (dfd, tmp, 0);
    close (dfd);
}

void stats_tick (struct agent *a, bool force)
{
    struct collect c = { .a = a, .now = time (NULL) };
    tier_error_t error;
    int running = 0;
    int64_t ms = tier_now_ms ();

    if (!force && ms - a->last_stats_ms < (int64_t) a->conf->stats_interval_ms)
        return;
    a->last_stats_ms = ms;
    (void) ctr_flush (a);
    if (store_job_foreach (a->store, collect_cb, &c, &error) < 0)
        return;
    stats_retention (a);
    for (struct batch_info *b = c.list; b; b = b->next) {
        running += b->running;
        if (a->conf->shared_state_dir[0])
            (void) upub_get (b->uid, b->gid, b->user);
    }
    if (a->conf->shared_state_dir[0])
        for (struct upub *u = upubs; u; u = u->next)
            publish_user (a, u, c.list, c.now);
    while (c.list) {
        struct batch_info *b = c.list;
        c.list = b->next;
        json_decref (b->jobs);
        free (b);
    }
    write_metrics (a, running);
}

/* Retention: jobs that ended more than StatsRetention ago leave the
 * registry with their counters; when a batch has no job left here, its
 * counters and this node's snapshot go too (removed as the user).
 */
struct old_ctx {
    int64_t cutoff;
    struct store_job *jobs;
    int n, cap;
};

static int old_cb (const struct store_job *j, void *arg)
{
    struct old_ctx *oc = arg;

    if (j->state == STORE_JOB_RUNNING || j->ended == 0
        || j->ended >= oc->cutoff)
        return 0;
    if (oc->n == oc->cap) {
        int cap = oc->cap ? oc->cap * 2 : 16;
        struct store_job *nj = realloc (oc->jobs, cap * sizeof (*nj));
        if (!nj)
            return 1;
        oc->jobs = nj;
        oc->cap = cap;
    }
    oc->jobs[oc->n++] = *j;
    return 0;
}

struct has_ctx {
    uint32_t batch;
    bool found;
};

static int has_cb (const struct store_job *j, void *arg)
{
    struct has_ctx *hc = arg;

    if (j->batch_id == hc->batch) {
        hc->found = true;
        return 1;
    }
    return 0;
}

/* The snapshot of j's batch on this node is to go, by the user's next
 * publisher. */
static void unpublish (const struct store_job *j)
{
    struct upub *u = upub_get (j->uid, j->gid, j->user);

    if (!u || gone_has (u, j->batch_id))
        return;
    if (u->ngone == u->cgone) {
        int n = u->cgone ? u->cgone * 2 : 8;
        uint32_t *g = realloc (u->gone, (size_t) n * sizeof (*g));
        if (!g)
            return;
        u->gone = g;
        u->cgone = n;
    }
    u->gone[u->ngone++] = j->batch_id;
}

static void stats_retention (struct agent *a)
{
    struct old_ctx oc = { .cutoff = time (NULL)
                                    - (int64_t) a->conf->stats_retention };
    tier_error_t error;

    if (store_job_foreach (a->store, old_cb, &oc, &error) < 0)
        goto out;
    for (int i = 0; i < oc.n; i++) {
        struct store_job *j = &oc.jobs[i];
        struct has_ctx hc = { .batch = j->batch_id };

        (void) store_job_delete (a->store, j->job_id, j->restart, &error);
        (void) store_counters_delete (a->store, TIER_SCOPE_JOB,
                                      store_job_key (j->job_id, j->restart),
                                      &error);
        (void) store_job_foreach (a->store, has_cb, &hc, &error);
        if (hc.found)
            continue;
        (void) store_counters_delete (a->store, TIER_SCOPE_BATCH, j->batch_id,
                                      &error);
        tier_log (LOG_INFO, "batch %u: past StatsRetention, removed",
                  j->batch_id);
        if (a->conf->shared_state_dir[0])
            unpublish (j);
    }
out:
    free (oc.jobs);
}
