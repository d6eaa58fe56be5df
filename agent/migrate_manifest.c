/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate_manifest.c - stage-out: the job's manifest in SharedStateDir
 *
 * Once every output of a finished job reached the GFS (or is in
 * conflict), its records become SharedStateDir/users/USER/jobs/
 * JOB.RESTART/outputs-NODE.json (lib/state.h names them): what reached
 * the GFS, size and checksum, what failed or is in conflict and why.
 * It is written before any waiter hears that everything arrived (the
 * epilog is one: afterok dependents find the manifest), by a child with
 * the user's own credentials (TIER_CRED_OWN: the directory is the
 * user's), as the GFS may take its time: the loop does not wait for it.
 *
 * Owns the manifest's format; calls the records (migrate_rec.c), child.c
 * and lib/state.h, and migrate_settle when the writer is done.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/cred.h"
#include "lib/log.h"
#include "lib/state.h"
#include "child.h"
#include "migrate.h"

#define MANIFEST_BACKOFF_MIN_MS 1000
#define MANIFEST_BACKOFF_MAX_MS 60000

struct manifest_arg {
    const char *root;
    const char *user;
    uid_t uid;
    char job[32];
    char name[TIER_NODENAME_MAX + 16];
    const char *text;
};

/* In the child, as the user: write it atomically. */
static int manifest_main (void *arg, int chan)
{
    const struct manifest_arg *m = arg;

    (void) chan;
    return tier_state_publish (m->root, m->user, m->uid, TIER_STATE_JOBS,
                               m->job, m->name, m->text)
                   < 0
               ? 1
               : 0;
}

/* A manifest that could not be written: again later, with backoff (1 s
 * doubling to 60 s); the job's outbox stays until it is written. */
static void manifest_later (struct mig *g)
{
    g->manifest_backoff_ms = g->manifest_backoff_ms ? g->manifest_backoff_ms * 2
                                                    : MANIFEST_BACKOFF_MIN_MS;
    if (g->manifest_backoff_ms > MANIFEST_BACKOFF_MAX_MS)
        g->manifest_backoff_ms = MANIFEST_BACKOFF_MAX_MS;
    g->manifest_after_ms = tier_now_ms () + g->manifest_backoff_ms;
}

static void manifest_done (struct agent *a, struct child *c, int status,
                           void *owner)
{
    struct mig *g = owner;

    (void) c;
    g->manifest = NULL;
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        char dir[PATH_MAX];
        if (tier_state_user_path (a->conf->shared_state_dir, g->user,
                                  TIER_STATE_JOBS, dir, sizeof (dir))
            < 0)
            (void) snprintf (dir, sizeof (dir), "%s/users/?",
                             a->conf->shared_state_dir);
        manifest_later (g);
        tier_log (LOG_WARNING,
                  "job %u: the output manifest could not be "
                  "written to %s (retried in %lld s)",
                  g->job_id, dir, (long long) g->manifest_backoff_ms / 1000);
    }
    else
        g->manifest_done = true;
    migrate_settle (a, g); /* may free g */
}

/* The manifest's text (malloc'd), or NULL. */
static char *manifest_text (struct agent *a, struct mig *g)
{
    struct migrate_list lc = {
        .job_id = g->job_id, .restart = g->restart, .g = g, .arr = json_array ()
    };
    tier_error_t e;
    char *text;
    json_t *o;

    if (!lc.arr)
        return NULL;
    (void) migrate_rec_list (a, &lc, &e);
    o = json_pack ("{s:i s:I s:I s:s s:I s:i s:i s:i s:i s:b s:o}", "format", 1,
                   "job_id", (json_int_t) g->job_id, "restart",
                   (json_int_t) g->restart, "node", a->node, "time",
                   (json_int_t) time (NULL), "done", lc.done, "pending",
                   lc.pending, "failed", lc.failed, "conflicts", lc.conflicts,
                   "late", g->spec.late, "outputs", lc.arr);
    text = o ? json_dumps (o, JSON_INDENT (1) | JSON_SORT_KEYS) : NULL;
    json_decref (o);
    return text;
}

int migrate_manifest_start (struct agent *a, struct mig *g)
{
    struct manifest_arg m = { .root = a->conf->shared_state_dir,
                              .user = g->user,
                              .uid = g->uid };
    struct child_spec spec = { .name = "tierd-manifest",
                               .main = manifest_main,
                               .arg = &m,
                               .mode = TIER_CRED_OWN,
                               .on_done = manifest_done,
                               .owner = g };
    struct tier_cred cred;
    tier_error_t e;
    char *text;

    if (!a->conf->shared_state_dir[0])
        return -1;
    if (!(text = manifest_text (a, g))) {
        manifest_later (g);
        tier_log (LOG_WARNING, "job %u: no output manifest: out of memory",
                  g->job_id);
        return 0;
    }
    tier_state_job_name (g->job_id, g->restart, m.job, sizeof (m.job));
    tier_state_manifest_name (a->node, m.name, sizeof (m.name));
    m.text = text;
    tier_cred_init (&cred, g->uid, g->gid);
    spec.cred = &cred;
    (void) snprintf (spec.title, sizeof (spec.title),
                     "tierd-manifest job %s %s", m.job, g->user);
    g->manifest = child_start (a, &spec, &e);
    free (text);
    if (!g->manifest) {
        manifest_later (g);
        tier_log (LOG_WARNING, "job %u: the output manifest: %s", g->job_id,
                  e.text);
    }
    return 0;
}
