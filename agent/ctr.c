/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* ctr.c - counters: accumulated in memory, added to LMDB every few seconds
 *
 * An event costs an array lookup, not a commit: the agent flushes the
 * pending deltas in one transaction every AGENT_FLUSH_MS, at job end and
 * at exit.  A crash loses at most that interval of counts; it never
 * corrupts them.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "agent.h"

static struct store_delta *pending_find (struct agent *a,
                                         enum tier_scope scope, uint64_t id,
                                         bool create)
{
    for (int i = 0; i < a->npending; i++)
        if (a->pending[i].scope == scope && a->pending[i].id == id)
            return &a->pending[i];
    if (!create)
        return NULL;
    if (a->npending == a->cpending) {
        int n = a->cpending ? a->cpending * 2 : 32;
        struct store_delta *p = realloc (a->pending, n * sizeof (*p));
        if (!p)
            return NULL;
        a->pending = p;
        a->cpending = n;
    }
    memset (&a->pending[a->npending], 0, sizeof (a->pending[0]));
    a->pending[a->npending].scope = scope;
    a->pending[a->npending].id = id;
    return &a->pending[a->npending++];
}

static void add_job (struct agent *a, const struct store_job *job,
                     enum tier_role role, enum tier_ctr ctr, uint64_t delta)
{
    struct store_delta *p;

    if ((p = pending_find (a, TIER_SCOPE_JOB,
                           store_job_key (job->job_id, job->restart), true)))
        tier_counters_add (&p->c, role, ctr, delta);
    if ((p = pending_find (a, TIER_SCOPE_BATCH, job->batch_id, true)))
        tier_counters_add (&p->c, role, ctr, delta);
}

void ctr_add (struct agent *a, const struct store_job *job,
              enum tier_role role, enum tier_ctr ctr, uint64_t delta)
{
    struct store_delta *p;

    if (job)
        add_job (a, job, role, ctr, delta);
    if ((p = pending_find (a, TIER_SCOPE_NODE, 0, true)))
        tier_counters_add (&p->c, role, ctr, delta);
}

/* A user's claims change only the user's own job and batch: the node's
 * counters (tierctl counters, MetricsFile) are what the agent saw. */
void ctr_add_reported (struct agent *a, const struct store_job *job,
                       enum tier_role role, enum tier_ctr ctr, uint64_t delta)
{
    if (job)
        add_job (a, job, role, ctr, delta);
}

int ctr_flush (struct agent *a)
{
    tier_error_t error;

    if (a->npending == 0)
        return 0;
    if (store_counters_add (a->store, a->pending,
                            a->npending, &error) < 0) {
        tier_log (LOG_ERR, "counters: %s (kept in memory)", error.text);
        return -1;
    }
    a->npending = 0;
    return 0;
}

int ctr_get (struct agent *a, enum tier_scope scope, uint64_t id,
             struct tier_counters *c)
{
    tier_error_t error;
    struct store_delta *p;

    if (store_counters_get (a->store, scope, id, c, &error) < 0) {
        tier_log (LOG_ERR, "counters: %s", error.text);
        return -1;
    }
    if ((p = pending_find (a, scope, id, false)))
        tier_counters_merge (c, &p->c);
    return 0;
}

/* {"endpoint": {"ops": N, ...}, "pipeline": {...}, "batch": {...},
 *  "total": {...}} with every counter present.
 */
json_t *ctr_to_json (const struct tier_counters *c)
{
    json_t *o = json_object ();

    if (!o)
        return NULL;
    for (int r = 0; r < TIER_ROLE_COUNT; r++) {
        json_t *role = json_object ();
        for (int k = 0; k < TIER_CTR_COUNT; k++)
            json_object_set_new (role, tier_ctr_name (k),
                                 json_integer ((json_int_t) c->v[r][k]));
        json_object_set_new (o, tier_role_name (r), role);
    }
    {
        json_t *total = json_object ();
        for (int k = 0; k < TIER_CTR_COUNT; k++)
            json_object_set_new (total, tier_ctr_name (k),
                                 json_integer ((json_int_t)
                                               tier_counters_total (c, k)));
        json_object_set_new (o, "total", total);
    }
    return o;
}
