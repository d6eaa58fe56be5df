/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* jobs.c - reconcile the registry with slurmctld after a restart
 *
 * Jobs still marked running whose epilog this agent missed (it was dead)
 * are looked up in slurmctld, one RPC per job, from a thread so that the
 * agent serves requests meanwhile.  A job slurmctld no longer knows, or
 * knows as finished, is marked "reconciled"; its tiers are reclaimed by
 * the code of each tier.  Namespaces of jobs the registry does not know
 * at all are looked up the same way (jobs_reclaim).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/cred.h"
#include "lib/jobns.h"
#include "lib/log.h"
#include "agent.h"

/* slurm_init once, for the lookups of either kind */
static void slurm_ready (struct agent *a)
{
    static bool done;

    if (done)
        return;
    if (a->conf->slurm_conf[0])
        setenv ("SLURM_CONF", a->conf->slurm_conf, 1);
    slurm_init (NULL);
    done = true;
}

struct running {
    uint32_t *ids;
    uint32_t *restarts;
    int n, cap;
};

static int collect_cb (const struct store_job *j, void *arg)
{
    struct running *r = arg;

    if (j->state != STORE_JOB_RUNNING)
        return 0;
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 16;
        uint32_t *ids = realloc (r->ids, cap * sizeof (*ids));
        uint32_t *rs;
        if (!ids)
            return 1;
        r->ids = ids;
        if (!(rs = realloc (r->restarts, cap * sizeof (*rs))))
            return 1;
        r->restarts = rs;
        r->cap = cap;
    }
    r->ids[r->n] = j->job_id;
    r->restarts[r->n] = j->restart;
    r->n++;
    return 0;
}

/* 1 = the job has ended (or slurmctld forgot it), 0 = still alive,
 * -1 = cannot tell (slurmctld unreachable).
 */
static int job_ended (uint32_t job_id)
{
    job_info_msg_t *msg = NULL;
    int ended = 1;

    if (slurm_load_job (&msg, job_id, SHOW_ALL) != SLURM_SUCCESS) {
        int e = slurm_get_errno ();
        if (e == ESLURM_INVALID_JOB_ID)
            return 1;
        tier_log (LOG_WARNING, "reconcile: job %u: %s", job_id,
                  slurm_strerror (e));
        return -1;
    }
    for (uint32_t i = 0; i < msg->record_count; i++) {
        uint32_t st = msg->job_array[i].job_state;
        uint32_t base = st & JOB_STATE_BASE;
        if (msg->job_array[i].job_id != job_id)
            continue;
        /* COMPLETING: its epilogs still run -- this node's may be
         * waiting for the outputs (and ends the job itself) */
        if (base == JOB_PENDING || base == JOB_RUNNING || base == JOB_SUSPENDED
            || (st & JOB_COMPLETING))
            ended = 0;
    }
    slurm_free_job_info_msg (msg);
    return ended;
}

struct recon {
    struct running r;
    int *ended;
    int efd;                    /* written when the lookups are done */
    pthread_t thread;
};

static void *recon_thread (void *arg)
{
    struct recon *rc = arg;
    uint64_t one = 1;

    for (int i = 0; i < rc->r.n; i++)
        rc->ended[i] = job_ended (rc->r.ids[i]);
    if (write (rc->efd, &one, sizeof (one)) < 0) {
        /* the loop then never finishes it: logged by the caller */
    }
    return NULL;
}

static void recon_free (struct recon *rc)
{
    if (rc) {
        if (rc->efd >= 0)
            close (rc->efd);
        free (rc->r.ids);
        free (rc->r.restarts);
        free (rc->ended);
        free (rc);
    }
}

/* Start the lookups; returns the eventfd the loop waits on, or -1 when
 * there is nothing to reconcile.  Registry updates happen in
 * jobs_reconcile_finish (LMDB writes stay in the loop's thread).
 */
int jobs_reconcile_start (struct agent *a)
{
    struct recon *rc;
    tier_error_t error;

    if (!(rc = calloc (1, sizeof (*rc))))
        return -1;
    rc->efd = -1;
    if (store_job_foreach (a->store, collect_cb, &rc->r, &error) < 0) {
        tier_log (LOG_ERR, "reconcile: %s", error.text);
        goto error;
    }
    if (rc->r.n == 0 || !(rc->ended = calloc (rc->r.n, sizeof (int))))
        goto error;
    if ((rc->efd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        goto error;
    slurm_ready (a);
    if (pthread_create (&rc->thread, NULL, recon_thread, rc) != 0)
        goto error;
    tier_log (LOG_INFO, "reconciling %d job(s) with slurmctld", rc->r.n);
    a->recon = rc;
    return rc->efd;
error:
    recon_free (rc);
    return -1;
}

int jobs_reconcile_finish (struct agent *a)
{
    struct recon *rc = a->recon;
    tier_error_t error;
    int n = 0;

    if (!rc)
        return 0;
    (void) pthread_join (rc->thread, NULL);
    for (int i = 0; i < rc->r.n; i++) {
        struct store_job j;
        if (rc->ended[i] != 1)
            continue;
        if (store_job_get (a->store, rc->r.ids[i], rc->r.restarts[i], &j,
                           &error) < 0 || j.state != STORE_JOB_RUNNING)
            continue;
        j.state = STORE_JOB_RECONCILED;
        j.ended = time (NULL);
        if (store_job_put (a->store, &j, &error) == 0) {
            tier_log (LOG_NOTICE, "job %u ended while tierd was down: "
                      "reconciled", j.job_id);
            migrate_job_end_unseen (a, &j); /* its outputs, when they arrive */
            n++;
        }
    }
    recon_free (rc);
    a->recon = NULL;
    return n;
}

/* Namespaces the registry does not know (the job never registered on
 * this node -- its prolog made the namespace, its steps never reached
 * the agent -- or the registry was lost): whether the job has ended is
 * slurmctld's to say, asked from a detached thread (one at a time, at
 * most every ORPHAN_CHECK_MS), which marks the ended ones "ended" in
 * their directory.  A job slurmctld still runs is left alone: its prolog
 * may have made the namespace before its first step registered.
 */
#define ORPHAN_CHECK_MS 30000
#define ORPHANS_MAX 4096

struct orphans {
    char base[PATH_MAX];
    int n;
    uint32_t ids[ORPHANS_MAX];
};

static atomic_bool orphans_busy;

static void *orphans_thread (void *arg)
{
    struct orphans *o = arg;

    for (int i = 0; i < o->n; i++)
        if (job_ended (o->ids[i]) == 1)
            (void) tier_ns_mark (o->base, o->ids[i], TIER_NS_ENDED);
    free (o);
    atomic_store (&orphans_busy, false);
    return NULL;
}

static void orphans_check (struct agent *a, const uint32_t *ids, int n)
{
    static int64_t last_ms;
    int64_t now = tier_now_ms ();
    struct orphans *o;
    pthread_attr_t attr;
    pthread_t t;

    if (n == 0 || a->recon || (last_ms && now - last_ms < ORPHAN_CHECK_MS)
        || atomic_exchange (&orphans_busy, true))
        return;
    last_ms = now;
    if (!(o = calloc (1, sizeof (*o)))) {
        atomic_store (&orphans_busy, false);
        return;
    }
    (void) snprintf (o->base, sizeof (o->base), "%s",
                     a->conf->namespace_dir);
    o->n = n < ORPHANS_MAX ? n : ORPHANS_MAX;
    memcpy (o->ids, ids, (size_t) o->n * sizeof (*ids));
    slurm_ready (a);
    tier_log (LOG_INFO, "asking slurmctld about %d namespace(s) of jobs "
              "the registry does not know", o->n);
    if (pthread_attr_init (&attr) != 0
        || pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED) != 0
        || pthread_create (&t, &attr, orphans_thread, o) != 0) {
        free (o);
        atomic_store (&orphans_busy, false);
    }
    (void) pthread_attr_destroy (&attr);
}

/* A namespace made after the registry's run of its job id ended: a new
 * run of the job (requeued), from its prolog, before its first step
 * registers.  Only a namespace its epilog marked "ended" is reclaimed.
 */
static bool newer_run (struct agent *a, const struct store_job *j)
{
    char dir[PATH_MAX], holder[PATH_MAX];
    struct stat sb;

    if (tier_ns_marked (a->conf->namespace_dir, j->job_id, TIER_NS_ENDED)
        || tier_ns_paths (a->conf->namespace_dir, j->job_id, dir, holder,
                          sizeof (dir)) < 0
        || lstat (dir, &sb) < 0)
        return false;
    return sb.st_mtim.tv_sec >= j->ended;   /* the holder was made then */
}

/* Namespaces and tier data of jobs that ended but could not be torn down
 * by their epilog (something was still inside, or the epilog never ran):
 * retried from the agent's timer, and after a restart.  Only jobs the
 * registry knows as ended, or slurmctld said had ended, are touched.
 */
int jobs_reclaim (struct agent *a)
{
    static uint32_t ids[ORPHANS_MAX], orphans[ORPHANS_MAX];
    int n = tier_ns_list (a->conf->namespace_dir, ids, ORPHANS_MAX);
    int done = 0, norphans = 0;

    for (int i = 0; i < n; i++) {
        struct store_job j;
        tier_error_t error;
        bool known = true;
        int rc;

        if (store_job_latest (a->store, ids[i], &j, &error) < 0) {
            if (errno != ENOENT)
                continue;
            if (!tier_ns_marked (a->conf->namespace_dir, ids[i], TIER_NS_ENDED)) {
                orphans[norphans++] = ids[i];
                continue;
            }
            known = false;
        }
        else if (j.state == STORE_JOB_RUNNING || newer_run (a, &j))
            continue;
        rc = tier_job_reclaim (a->conf->namespace_dir, a->conf->nvdimm_dir,
                               ids[i], &error);
        if (rc == 0) {
            tier_log (LOG_NOTICE, "job %u: namespace and tier data "
                      "reclaimed%s", ids[i], known ? ""
                      : " (a job the registry does not know; it ended)");
            done++;
        }
        else
            tier_log (rc > 0 ? LOG_DEBUG : LOG_ERR, "job %u: %s", ids[i],
                      error.text);
    }
    orphans_check (a, orphans, norphans);
    return done;
}

/* Scratch use of running jobs: every few seconds, statfs each of a job's
 * scratch tmpfs through a process inside its namespace (/proc/PID/root is
 * that namespace's view): each job's peak, and the node's total for
 * tierctl status (the host cannot see those tmpfs).
 */
struct sample_ctx {
    struct agent *a;
    uint64_t used;              /* over all running jobs */
    int jobs;
};

static int sample_cb (const struct store_job *j, void *arg)
{
    struct sample_ctx *sc = arg;
    struct agent *a = sc->a;
    pid_t pid;
    uint64_t used = 0;

    if (j->state != STORE_JOB_RUNNING || !a->conf->nvdimm_dir[0]
        || tier_ns_pids (a->conf->namespace_dir, j->job_id, &pid, 1) != 1)
        return 0;
    for (int k = 0; k < 64; k++) {
        char path[4200];
        struct statfs sf;
        (void) snprintf (path, sizeof (path), "/proc/%d/root%s/%u/%d",
                         (int) pid, a->conf->nvdimm_dir, j->job_id, k);
        if (statfs (path, &sf) < 0)
            break;
        if ((unsigned) sf.f_type == 0x01021994)     /* a job tmpfs */
            used += (uint64_t) (sf.f_blocks - sf.f_bfree) * sf.f_bsize;
    }
    if (used) {
        ctr_add (a, j, TIER_ROLE_PIPELINE, TIER_CTR_SCRATCH_PEAK, used);
        sc->used += used;
        sc->jobs++;
    }
    return 0;
}

void jobs_sample (struct agent *a)
{
    struct sample_ctx sc = { .a = a };
    tier_error_t error;

    if (store_job_foreach (a->store, sample_cb, &sc, &error) == 0) {
        a->scratch_used = sc.used;
        a->scratch_jobs = sc.jobs;
    }
}

int jobs_cred (const struct store_job *job, struct tier_cred *cred)
{
    gid_t groups[TIER_CRED_GROUPS_MAX];

    tier_cred_init (cred, job->uid, job->gid);
    if (job->ngroups < 0) /* no step registered one yet */
        return tier_cred_lookup (cred, job->user);
    for (int32_t i = 0; i < job->ngroups && i < TIER_CRED_GROUPS_MAX; i++)
        groups[i] = job->groups[i];
    return tier_cred_set_groups (cred, groups, job->ngroups);
}
