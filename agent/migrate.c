/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate.c - stage-out: the write cache's migrations to the GFS (or to
 * object stores), on the agent's side (see migrate.h for the whole)
 *
 * Owns the list of the node's jobs with outputs (struct mig): starting
 * their migrators through child.c, with the job's credentials and what
 * the records say is published already, and restarting them when they
 * die; their results (into the records, migrate_rec.c); the syncs and
 * the waiters of job.stageout_sync (the epilog's, tierctl wait and
 * flush); the end of a job once all its outputs arrived (the manifest,
 * then the outbox goes); the RPCs, status and gauges.  Calls the other
 * migrate_*.c modules, child.c, the GFS streams (streams.h) and the
 * store.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/cred.h"
#include "lib/log.h"
#include "lib/units.h"
#include "child.h"
#include "migrate.h"
#include "procfd.h"
#include "streams.h"

#define RESTART_MS 2000  /* a migrator that died: again after */
#define RESPAWN_MS 10000 /* one that could not be started */
#define STATUS_FAILURES_MAX 5
#define WAIT_FOREVER_MS 86400000
#define ANSWER_WALK_MAX 4096 /* entries an answer without a count looks at */

static struct mig *migs;
static unsigned stalls_total; /* migrators killed by StallTimeout */

static struct mig *mig_find (uint32_t job_id, uint32_t restart)
{
    for (struct mig *g = migs; g; g = g->next)
        if (g->job_id == job_id && g->restart == restart)
            return g;
    return NULL;
}

int migrate_tell (struct mig *g, const struct migmsg *m)
{
    json_t *body;

    if (!g->child || !(body = migmsg_pack (m)))
        return -1;
    return child_send (g->child, m->type, body, NULL, 0);
}

static int tell_sync (struct mig *g, unsigned seq, bool flush)
{
    struct migmsg m = { .type = MIGMSG_SYNC, .seq = seq, .flush = flush };

    return migrate_tell (g, &m);
}

static unsigned sync_now (struct mig *g)
{
    if (g->seq_sent == g->seq_done || !g->seq_sent)
        if (tell_sync (g, g->seq_sent + 1, false) == 0)
            g->seq_sent++;
    return g->seq_sent;
}

static struct mig *mig_new (const struct store_job *job,
                            const struct migrate_spec *s)
{
    struct mig *g = calloc (1, sizeof (*g));

    if (!g)
        return NULL;
    g->job_id = job->job_id;
    g->restart = job->restart;
    g->uid = job->uid;
    g->gid = job->gid;
    (void) snprintf (g->user, sizeof (g->user), "%s", job->user);
    g->spec = *s;
    g->spec.job_id = job->job_id;
    g->spec.restart = job->restart;
    g->spec.uid = job->uid;
    g->spec.gid = job->gid;
    g->spec.job_start = job->registered;
    g->ended = job->state != STORE_JOB_RUNNING;
    g->next = migs;
    migs = g;
    return g;
}

static void mig_free (struct mig *g)
{
    struct mig **pp = &migs;

    while (*pp && *pp != g)
        pp = &(*pp)->next;
    if (*pp)
        *pp = g->next;
    migrate_watch_drop (g);
    /* still running: reaped by child.c, with nobody to tell */
    if (g->child)
        child_orphan (g->child);
    if (g->manifest)
        child_orphan (g->manifest);
    while (g->waiters) {
        struct migrate_waiter *w = g->waiters;
        g->waiters = w->next;
        free (w);
    }
    free (g);
}

/* ------------------------------------------------------- the migrator */

static void on_migrator_msg (struct agent *a, struct child *c, int type,
                             json_t *body, int *fds, int nfds, void *owner)
{
    struct mig *g = owner;
    struct migmsg m;
    tier_error_t e;

    (void) fds; /* none expected: child.c closes */
    (void) nfds;
    if (migmsg_unpack (type, body, MIGMSG_RESULT, &m, &e) < 0)
        tier_log (LOG_WARNING, "job %u: migrator: %s", g->job_id, e.text);
    else if (m.type == MIGMSG_ALIVE)
        ; /* a beat: child.c's stall watchdog saw it */
    else if (m.type == MIGMSG_QUEUED)
        child_hold (c, m.on); /* waiting for a GFS stream is no stall */
    else if (m.rel && m.k >= g->spec.ndirs)
        tier_log (LOG_WARNING,
                  "job %u: migrator: '%s' of an output "
                  "directory it does not have",
                  g->job_id, chmsg_name (&migmsg_proto, type));
    else if (m.type == MIGMSG_ERROR)
        tier_log (LOG_ERR, "job %u: migrator: %s", g->job_id, m.error);
    else if (m.type == MIGMSG_SYNCED) {
        g->seq_done = m.seq;
        g->pending = m.pending;
        g->failed = m.failed;
        g->conflicts = m.conflicts;
        g->held = m.size > 0 ? (uint64_t) m.size : 0;
        migrate_settle (a, g); /* may free g */
    }
    else if (m.type != MIGMSG_READY)
        migrate_rec_result (a, g, &m);
    json_decref (body);
}

/* The GFS file a stuck migrator writes: of the descriptors it has open
 * for writing, one beneath an output directory of the job.  Only /proc
 * is read: the GFS, which does not answer, is not touched.  false if
 * none. */
struct stuck_out {
    const struct mig *g;
    char *out;
    size_t size;
};

static bool stuck_output_fd (const char *target, unsigned long flags, void *arg)
{
    struct stuck_out *so = arg;

    if ((flags & O_ACCMODE) == O_RDONLY)
        return false;
    for (int k = 0; k < so->g->spec.ndirs; k++) {
        size_t len = strlen (so->g->spec.gfs[k]);
        if (len && !strncmp (target, so->g->spec.gfs[k], len)
            && target[len] == '/') {
            (void) snprintf (so->out, so->size, "%s", target);
            return true;
        }
    }
    return false;
}

static bool stuck_output (const struct mig *g, pid_t pid, char *out,
                          size_t size)
{
    struct stuck_out so = { g, out, size };

    return procfd_each (pid, stuck_output_fd, &so);
}

/* Does a process hold the OFD lock of g's outbox (the one writer of it:
 * holder.h)?  Asked without waiting (F_OFD_GETLK). */
static bool outbox_locked (struct agent *a, const struct mig *g)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    int dfd = migrate_outbox_open (a->conf, g->job_id, g->restart, -1), fd;
    bool held;

    if (dfd < 0)
        return false;
    fd = openat (dfd, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    close (dfd);
    if (fd < 0)
        return false;
    held = fcntl (fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    close (fd);
    return held;
}

/* Killed by StallTimeout: say which file is stuck; one that did not end
 * (asleep in the kernel on a GFS request that is never answered) is
 * abandoned: its GFS stream is given back at once, and no successor
 * starts until it lets go of the job's outbox (one writer, ever). */
static void migrator_stalled (struct agent *a, struct mig *g, struct child *c)
{
    char file[PATH_MAX + 64], why[PATH_MAX + 512];
    pid_t pid = child_pid (c);
    bool stuck = child_abandoned (c);

    g->stalls++;
    stalls_total++;
    if (!stuck_output (g, pid, file, sizeof (file)))
        (void) snprintf (file, sizeof (file), "%.4000s%s", g->spec.gfs[0],
                         g->spec.ndirs > 1 ? " (or another output directory)"
                                           : "");
    (void) snprintf (why, sizeof (why),
                     "job %u: stage-out of %.4000s: no progress for %llu s "
                     "(StallTimeout): migrator %d %s",
                     g->job_id, file,
                     (unsigned long long) a->conf->stall_timeout, (int) pid,
                     stuck ? "abandoned (stuck in a GFS request); the next "
                             "one starts once it lets go of the job"
                           : "killed; the next one resumes");
    tier_log (LOG_ERR, "%s", why);
    if (stuck) {
        if (g->stream_id)
            (void) streams_revoke (a, g->stream_id, why);
        g->stuck = pid;
    }
}

/* It died (what it sent before is read): again, resumed, in a while. */
static void on_migrator_done (struct agent *a, struct child *c, int status,
                              void *owner)
{
    struct mig *g = owner;

    if (g->child != c)
        return;
    if (child_why (c) == ESTALE)
        migrator_stalled (a, g, c);
    else if (WIFEXITED (status) && WEXITSTATUS (status) == MIGRATOR_EXIT_BUSY)
        tier_log (LOG_WARNING,
                  "job %u: another migrator still holds the job's "
                  "outbox; trying again in %d s",
                  g->job_id, RESTART_MS / 1000);
    else if (WIFEXITED (status) && WEXITSTATUS (status) == CHILD_EXIT_SETUP)
        tier_log (LOG_ERR,
                  "job %u: the migrator could not take the job's "
                  "credentials (uid %u); restarting it",
                  g->job_id, (unsigned) g->uid);
    else
        tier_log (LOG_WARNING,
                  "job %u: the migrator ended (status %d); "
                  "restarting it",
                  g->job_id, status);
    g->child = NULL;
    g->pid = 0;
    g->stream_id = 0;
    g->seq_done = g->seq_sent = 0;
    g->spec.resumed = true;
    g->restart_after_ms = tier_now_ms () + RESTART_MS;
}

/* The job's data credentials (its group list).  A user NSS does not know
 * has only the primary group. */
static int mig_cred (struct agent *a, const struct mig *g,
                     struct tier_cred *cred)
{
    struct store_job job;
    tier_error_t e;

    if (store_job_get (a->store, g->job_id, g->restart, &job, &e) < 0) {
        memset (&job, 0, sizeof (job));
        job.ngroups = -1; /* not known: NSS */
        job.job_id = g->job_id;
        job.restart = g->restart;
        job.uid = g->uid;
        job.gid = g->gid;
        (void) snprintf (job.user, sizeof (job.user), "%s", g->user);
    }
    if (jobs_cred (&job, cred) == 0)
        return 0;
    if (errno != ENOENT) {
        tier_log_error ("job %u: the groups of %s", g->job_id, g->user);
        return -1;
    }
    tier_log (LOG_WARNING,
              "job %u: no groups known for %s: its migrator "
              "has the primary group only",
              g->job_id, g->user);
    tier_cred_init (cred, g->uid, g->gid);
    return tier_cred_set_groups (cred, NULL, 0);
}

/* Start g's migrator with what the records say (resume). */
static int mig_spawn (struct agent *a, struct mig *g)
{
    struct migrator_arg ma = {
        .spec = &g->spec, .conf = a->conf, .node = a->node, .user = g->user
    };
    struct child_spec spec = {
        .name = "tierd-mig",
        .proto = &migmsg_proto,
        .mode = TIER_CRED_DATA,
        .as_root = migrator_as_root,
        .main = migrator_main,
        .arg = &ma,
        .on_msg = on_migrator_msg,
        .on_done = on_migrator_done,
        .owner = g,
        /* StallTimeout: it beats while it runs, copies or hashes;
         * waiting for a GFS stream does not count (queued) */
        .stall_ms = a->conf->stall_timeout > INT_MAX / 1000
                        ? INT_MAX
                        : (int) a->conf->stall_timeout * 1000,
    };
    struct migmsg_batch resume = { 0 };
    struct tier_cred cred;
    int uploads = 0;
    char what[64];
    tier_error_t e;

    if (mig_cred (a, g, &cred) < 0)
        return -1;
    if (migrate_rec_resume (a, g, &resume, &uploads) < 0) {
        tier_log_error ("job %u: the migrator's resume", g->job_id);
        migmsg_batch_fini (&resume);
        return -1;
    }
    if (uploads)
        tier_log (LOG_NOTICE, "job %u: %d multipart upload(s) resume",
                  g->job_id, uploads);
    spec.cred = &cred;
    (void) snprintf (spec.title, sizeof (spec.title), "tierd-mig job %u.%u %s",
                     g->job_id, g->restart, g->user);
    ma.resume = &resume;
    /* its migrations take GFS streams and the user's bandwidth */
    (void) snprintf (what, sizeof (what), "stage-out of job %u", g->job_id);
    ma.limit = streams_limit (a, g->uid, NULL);
    if ((ma.streams_fd = streams_client_id (a, g->uid, NULL, STREAMS_STAGE_OUT,
                                            what, &g->stream_id))
        >= 0)
        spec.keep[spec.nkeep++] = ma.streams_fd;
    g->child = child_start (a, &spec, &e);
    if (ma.streams_fd >= 0)
        close (ma.streams_fd);
    migmsg_batch_fini (&resume);
    if (!g->child) {
        tier_log (LOG_ERR, "job %u: migrator: %s", g->job_id, e.text);
        return -1;
    }
    g->pid = child_pid (g->child);
    tier_log (LOG_INFO, "job %u: migrator %d for %d output director%s",
              g->job_id, (int) g->pid, g->spec.ndirs,
              g->spec.ndirs == 1 ? "y" : "ies");
    return 0;
}

/* ------------------------------------------------------------ waiters */

void migrate_late (struct agent *a, struct mig *g, const char *why)
{
    if (g->spec.late)
        return;
    g->spec.late = true;
    migrate_rec_late (a, g);
    tier_log (LOG_WARNING,
              "job %u: ended before its outputs were all on "
              "the GFS (%s): they are kept and retried; its dependents may "
              "have started without them",
              g->job_id, why);
    if (migrate_outbox_write_dirs (a, g) < 0)
        tier_log (LOG_WARNING, "job %u: cannot record that in the outbox",
                  g->job_id);
}

static void answer (struct agent *a, struct mig *g, struct migrate_waiter *w,
                    bool timed_out)
{
    json_t *o = json_pack ("{s:I s:i s:i s:i s:b s:b}", "job_id",
                           (json_int_t) g->job_id, "pending", g->pending,
                           "failed", g->failed, "conflicts", g->conflicts,
                           "timed_out", timed_out, "stuck", g->stuck != 0);
    char *s;

    if (o && timed_out && !g->pending && !g->failed && !g->conflicts) {
        /* no count from the migrator (it died or is stuck before it
         * could sync): what the write cache holds without a record of
         * its arrival */
        char first[PATH_MAX];
        int missing = migrate_outbox_missing (a, g, first, sizeof (first),
                                              ANSWER_WALK_MAX);
        json_object_set_new (o, "pending", json_integer (missing));
        if (missing && first[0]) {
            json_object_set_new (o, "first_path", json_string (first));
            json_object_set_new (o, "first_error",
                                 json_string (g->stuck ? "its migrator is "
                                                         "stuck in a GFS "
                                                         "request"
                                                       : "not on the GFS yet"));
        }
    }
    else if (o && g->failed) {
        /* the first file that failed, and why: for the job's stderr and
         * its record */
        json_t *arr = migrate_rec_failures (a, g, 1), *f;
        if ((f = json_array_get (arr, 0))) {
            json_object_set (o, "first_path", json_object_get (f, "path"));
            json_object_set (o, "first_error", json_object_get (f, "error"));
        }
        json_decref (arr);
    }
    s = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    w->c->waiting--;
    server_reply (a, w->c, w->msgid, s);
}

/* A finished job whose outputs all seem to be there: the agent looks
 * for itself before the write cache may go, then writes the manifest.
 * False if a file has no record of its arrival (synced again). */
static bool finish (struct agent *a, struct mig *g)
{
    char first[PATH_MAX];
    int missing = migrate_outbox_missing (a, g, first, sizeof (first), -1);

    if (missing) {
        /* never drop what did not arrive: look again */
        tier_log (LOG_ERR,
                  "job %u: %d file(s) of its write cache (%s, ...) "
                  "have no record of reaching the GFS: kept",
                  g->job_id, missing, first);
        g->seq_done = 0;
        (void) tell_sync (g, ++g->seq_sent, false);
        return false;
    }
    if (migrate_manifest_start (a, g) < 0)
        g->manifest_done = true; /* no SharedStateDir */
    return true;
}

/* Every output is there and the manifest written: stop the migrator and
 * remove the outbox (frees g). */
static void retire (struct agent *a, struct mig *g)
{
    struct migmsg quit = { .type = MIGMSG_QUIT };

    /* past this point it has nothing left to publish */
    if (g->child && migrate_tell (g, &quit) < 0)
        child_kill (g->child, SIGTERM);
    migrate_outbox_remove (a, g);
    tier_log (LOG_INFO,
              "job %u: every output is on the GFS (%d in "
              "conflict, kept in the manifest)",
              g->job_id, g->conflicts);
    mig_free (g);
}

/* Settle waiters; a finished job whose outputs all reached the GFS (or
 * are in conflict, which retrying cannot change) is done: its manifest
 * is written -- before any waiter hears that everything arrived (the
 * epilog is one: afterok dependents find the manifest) --, then its
 * migrator is stopped and its outbox removed.
 */
void migrate_settle (struct agent *a, struct mig *g)
{
    int64_t now = tier_now_ms ();
    struct migrate_waiter **pp = &g->waiters;
    bool clean = g->pending == 0 && g->failed == 0 && g->seq_done
                 && g->seq_done == g->seq_sent;
    bool ready;

    /* (a manifest that failed: past its backoff) */
    if (g->ended && clean && !g->manifest_done && !g->manifest
        && now >= g->manifest_after_ms)
        clean = finish (a, g);
    ready = clean && (!g->ended || g->manifest_done);
    while (*pp) {
        struct migrate_waiter *w = *pp;
        if ((ready && w->seq <= g->seq_done) || now >= w->deadline_ms) {
            *pp = w->next;
            if (w->end && !ready)
                migrate_late (a, g, "its epilog's StageOutTimeout passed");
            answer (a, g, w, !clean);
            free (w);
        }
        else
            pp = &w->next;
    }
    if (g->ended && ready && !g->waiters)
        retire (a, g);
}

/* ------------------------------------------------------------ requests */

/* job.stageout {job_id, restart, dirs: [DIR...], urls?} (root, from the
 * plugin once the job's output overlays are mounted on this node): start
 * the job's migrator.  dirs[K] is the GFS directory of
 * .outbox/JOB.RESTART/K.
 */
json_t *op_job_stageout (struct agent *a, struct conn *c, json_t *req,
                         tier_error_t *error)
{
    json_int_t job_id = 0, restart = 0;
    struct store_job job;
    struct migrate_spec s;
    struct mig *g;

    (void) c;
    memset (&s, 0, sizeof (s));
    if (json_unpack (req, "{s:I s:I}", "job_id", &job_id, "restart",
                     &restart) < 0 || job_id <= 0 || restart < 0
        || job_id > UINT32_MAX || restart > UINT32_MAX) {
        errno = EINVAL;
        tier_errprintf (error, "job.stageout needs 'job_id' and 'restart'");
        return NULL;
    }
    if (migrate_outbox_parse_dirs (json_object_get (req, "dirs"),
                                   json_object_get (req, "urls"), &s, error)
            < 0
        || store_job_get (a->store, (uint32_t) job_id, (uint32_t) restart, &job,
                          error)
               < 0)
        return NULL;
    if (!(g = mig_find (job.job_id, job.restart))) {
        if (!(g = mig_new (&job, &s))) {
            errno = ENOMEM;
            tier_errprintf (error, "out of memory");
            return NULL;
        }
        if (migrate_outbox_write_dirs (a, g) < 0)
            tier_log (LOG_WARNING, "job %u: cannot record its output "
                      "directories in the outbox", g->job_id);
        for (int k = 0; k < g->spec.ndirs; k++)
            migrate_watch_tree (a, g, k, "");
        if (mig_spawn (a, g) < 0)
            g->restart_after_ms = tier_now_ms () + RESTART_MS;
    }
    return json_pack ("{s:I s:i}", "job_id", job_id, "migrator",
                      (int) g->pid);
}

static struct mig *mig_for_caller (struct agent *a, struct conn *c,
                                   json_t *req, tier_error_t *error)
{
    json_int_t job_id = 0;
    struct mig *found = NULL;

    if (json_unpack (req, "{s:I}", "job_id", &job_id) < 0 || job_id <= 0) {
        errno = EINVAL;
        tier_errprintf (error, "'job_id' is missing");
        return NULL;
    }
    for (struct mig *g = migs; g; g = g->next)
        if (g->job_id == (uint32_t) job_id
            && (!found || g->restart > found->restart))
            found = g;
    if (!found) {
        errno = ENOENT;
        tier_errprintf (error, "job %lld has no outputs in flight on node %s",
                        (long long) job_id, a->node);
        return NULL;
    }
    if (!agent_privileged (a, c->cred.uid) && found->uid != c->cred.uid) {
        errno = EPERM;
        tier_errprintf (error, "job %lld belongs to another user",
                        (long long) job_id);
        return NULL;
    }
    return found;
}

/* job.stageout_sync {job_id, timeout_ms?, wait?, flush?, end?}: publish
 * what the outputs hold now; with wait, answer once every output reached
 * the GFS, or when timeout_ms passed (the epilog's bound; tierctl wait and
 * flush).  With end (the epilog: root and SlurmUser only), the job has
 * ended on this node: the answer also waits for its manifest.  The job's
 * owner, root and SlurmUser.
 */
json_t *op_job_stageout_sync (struct agent *a, struct conn *c, json_t *req,
                              tier_error_t *error)
{
    json_int_t timeout = 0;
    struct migrate_waiter *w;
    struct mig *g;
    int wait = 1, flush = 0, end = 0;

    if (!(g = mig_for_caller (a, c, req, error)))
        return NULL;
    (void) json_unpack (req, "{s?I s?b s?b s?b}", "timeout_ms", &timeout,
                        "wait", &wait, "flush", &flush, "end", &end);
    if (end && !agent_privileged (a, c->cred.uid)) {
        errno = EPERM;
        tier_errprintf (error, "only the epilog ends a job");
        return NULL;
    }
    if (!(w = calloc (1, sizeof (*w)))) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    /* a fresh sync, after the one in flight (sent by the tick) */
    if (g->child && g->seq_sent == g->seq_done
        && tell_sync (g, g->seq_sent + 1, flush) == 0)
        w->seq = ++g->seq_sent;
    else
        w->seq = g->seq_sent + 1;
    w->c = c;
    w->msgid = c->req_id;
    w->end = end;
    w->deadline_ms = tier_now_ms ()
                     + (timeout > 0 ? timeout : (wait ? WAIT_FOREVER_MS : 0));
    w->next = g->waiters;
    g->waiters = w;
    c->waiting++;
    if (end)
        g->ended = true;
    if (flush)
        g->manifest_after_ms = 0; /* a manifest that failed: now */
    return RPC_DEFERRED;
}

/* job.outputs {job_id}: the job's outputs on this node, with their state
 * (done with size and SHA-256, pending, failed and why, conflict).
 */
json_t *op_job_outputs (struct agent *a, struct conn *c, json_t *req,
                        tier_error_t *error)
{
    json_int_t job_id = 0;
    struct store_job job;
    struct migrate_list lc = { 0 };

    if (json_unpack (req, "{s:I}", "job_id", &job_id) < 0 || job_id <= 0
        || job_id > UINT32_MAX) {
        errno = EINVAL;
        tier_errprintf (error, "'job_id' is missing");
        return NULL;
    }
    if (store_job_latest (a->store, (uint32_t) job_id, &job, error) < 0)
        return NULL;
    if (!agent_privileged (a, c->cred.uid) && job.uid != c->cred.uid) {
        errno = EPERM;
        tier_errprintf (error, "job %lld belongs to another user",
                        (long long) job_id);
        return NULL;
    }
    lc.job_id = job.job_id;
    lc.restart = job.restart;
    /* finished: the records have "dir" and "path" of their own; the
     * manifest in SharedStateDir has them too */
    lc.g = mig_find (job.job_id, job.restart);
    lc.arr = json_array ();
    (void) migrate_rec_list (a, &lc, error);
    return json_pack ("{s:s s:I s:i s:i s:i s:i s:b s:b s:o}", "node", a->node,
                      "job_id", job_id, "done", lc.done, "pending", lc.pending,
                      "failed", lc.failed, "conflicts", lc.conflicts,
                      "in_flight", lc.g != NULL, "late",
                      (lc.g && lc.g->spec.late) || lc.late, "outputs", lc.arr);
}

/* ----------------------------------------------------- the agent's hooks */

/* The job ended on this node (job.end): once its outputs are all on the
 * GFS, its migrator stops and its outbox goes.
 */
void migrate_job_end (struct agent *a, const struct store_job *job)
{
    struct mig *g = mig_find (job->job_id, job->restart);

    (void) a;
    if (g) {
        g->ended = true;
        (void) sync_now (g);
    }
}

/* The job ended while no agent ran (its epilog could not wait for the
 * outputs): the same, and its outputs are late. */
void migrate_job_end_unseen (struct agent *a, const struct store_job *job)
{
    struct mig *g = mig_find (job->job_id, job->restart);

    if (g && !g->manifest_done)
        migrate_late (a, g, "it ended while no tierd ran");
    migrate_job_end (a, job);
}

void migrate_fini (struct agent *a)
{
    /* the migrators die with the agent; the outboxes stay for the next */
    (void) a;
    while (migs)
        mig_free (migs);
}

void migrate_conn_gone (struct agent *a, struct conn *c)
{
    (void) a;
    for (struct mig *g = migs; g; g = g->next) {
        struct migrate_waiter **pp = &g->waiters;
        while (*pp) {
            if ((*pp)->c == c) {
                struct migrate_waiter *w = *pp;
                *pp = w->next;
                free (w);
                c->waiting--;
            }
            else
                pp = &(*pp)->next;
        }
    }
}

/* The node's migrations: the totals, and the jobs (their migrators, the
 * files that failed and why) only of the caller's own (all of them for
 * root and SlurmUser).
 */
uint64_t migrate_held_ended (struct agent *a, uid_t uid)
{
    uint64_t sum = 0;

    (void) a;
    for (struct mig *g = migs; g; g = g->next)
        if (g->ended && (uid == (uid_t) -1 || g->uid == uid))
            sum = tier_size_add (sum, g->held);
    return sum;
}

json_t *migrate_status_json (struct agent *a, uid_t uid)
{
    json_t *arr = json_array ();
    int pending = 0, failed = 0, conflicts = 0;

    for (struct mig *g = migs; g && arr; g = g->next) {
        json_t *o;
        pending += g->pending;
        failed += g->failed;
        conflicts += g->conflicts;
        /* the node's totals for all; jobs, migrator pids and files only
         * to their owner (and root, SlurmUser) */
        if (g->uid != uid && !agent_privileged (a, uid))
            continue;
        o = json_pack ("{s:I s:i s:i s:i s:b s:i s:i s:i}", "job_id",
                       (json_int_t) g->job_id, "pending", g->pending, "failed",
                       g->failed, "conflicts", g->conflicts, "ended", g->ended,
                       "migrator", (int) g->pid, "stalled", (int) g->stalls,
                       "stuck_migrator", (int) g->stuck);
        if (o && g->failed) {
            json_t *f = migrate_rec_failures (a, g, STATUS_FAILURES_MAX);
            json_object_set_new (o, "failures", f ? f : json_array ());
        }
        json_array_append_new (arr, o);
    }
    return json_pack ("{s:i s:i s:i s:i s:o}", "pending", pending, "failed",
                      failed, "conflicts", conflicts, "stalled_migrators",
                      (int) stalls_total, "jobs", arr ? arr : json_array ());
}

/* An outbox a previous life left: its outputs resume. */
static void resume_outbox (struct agent *a, const struct store_job *job,
                           const struct migrate_spec *s)
{
    struct mig *g;

    if (mig_find (job->job_id, job->restart) || !(g = mig_new (job, s)))
        return;
    tier_log (LOG_NOTICE, "job %u: resuming its outputs", g->job_id);
    g->spec.resumed = true;
    for (int k = 0; k < g->spec.ndirs; k++)
        migrate_watch_tree (a, g, k, "");
    if (mig_spawn (a, g) < 0)
        g->restart_after_ms = tier_now_ms () + RESTART_MS;
    else
        (void) sync_now (g);
}

/* At start: the watch, and a migrator for every outbox a previous life
 * left (their outputs resume).
 */
int migrate_init (struct agent *a)
{
    if (migrate_watch_init (a) < 0)
        return -1;
    if (a->nvdimm_ok && a->conf->nvdimm_dir[0])
        migrate_outbox_foreach (a, resume_outbox);
    return 0;
}

void migrate_gauges (struct agent *a, uint32_t batch, struct tier_counters *c)
{
    uint64_t pending = 0, failed = 0;

    for (struct mig *g = migs; g; g = g->next) {
        struct store_job job;
        tier_error_t e;
        if (batch != UINT32_MAX       /* UINT32_MAX: the whole node */
            && (store_job_get (a->store, g->job_id, g->restart, &job,
                               &e) < 0 || job.batch_id != batch))
            continue;
        pending += (uint64_t) g->pending;
        failed += (uint64_t) g->failed;
    }
    c->v[TIER_ROLE_ENDPOINT][TIER_CTR_MIGRATIONS_PENDING] = pending;
    c->v[TIER_ROLE_ENDPOINT][TIER_CTR_MIGRATIONS_FAILED] = failed;
}

void migrate_tick (struct agent *a)
{
    int64_t now = tier_now_ms ();
    struct mig *g, *next;

    for (g = migs; g; g = next) {
        next = g->next;
        if (g->stuck && !g->child && now >= g->restart_after_ms) {
            if (outbox_locked (a, g)) {
                g->restart_after_ms = now + RESTART_MS;
                continue;
            }
            tier_log (LOG_NOTICE,
                      "job %u: the stuck migrator %d let go of the job: "
                      "its outputs resume",
                      g->job_id, (int) g->stuck);
            g->stuck = 0;
        }
        if (!g->child && now >= g->restart_after_ms && mig_spawn (a, g) < 0)
            g->restart_after_ms = now + RESPAWN_MS;
        if (!g->child) {
            /* none now (dead, or stuck and not yet let go): the waiters'
             * deadlines hold all the same */
            if (g->waiters)
                migrate_settle (a, g); /* may free g */
            continue;
        }
        /* waiters, and jobs that ended with outputs left: keep syncing
         * (each sync retries what failed, past its backoff) */
        if (g->waiters || g->ended)
            (void) sync_now (g);
        migrate_settle (a, g);
    }
}
