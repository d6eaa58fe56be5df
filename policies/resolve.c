/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* resolve.c - the effective policy of a path, and freezing a job's set
 *
 * Prefixes match on path-component boundaries ("/a/b" covers "/a/b/c",
 * never "/a/bc") of lexically normalised paths; callers resolve symlinks
 * where they want the real directory (tierctl does for directories that
 * exist).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/paths.h"
#include "policy.h"

/* The longest policy of layer covering path (a later one wins a tie). */
static const struct tier_policy *longest (const struct tier_policy_set *set,
                                          const char *path,
                                          enum tier_policy_layer layer,
                                          bool locked_only)
{
    const struct tier_policy *best = NULL;
    size_t blen = 0;

    for (int i = 0; i < set->n; i++) {
        const struct tier_policy *p = &set->v[i];
        size_t len;
        if (p->layer != layer || (locked_only && !p->locked)
            || !tier_path_under (path, p->dir))
            continue;
        len = strlen (p->dir);
        if (!best || len >= blen) {
            best = p;
            blen = len;
        }
    }
    return best;
}

int tier_policy_resolve (const struct tier_policy_set *set, const char *path,
                         struct tier_policy_match *m)
{
    char norm[PATH_MAX];

    if (!m || !path || path[0] != '/') {
        errno = EINVAL;
        return -1;
    }
    memset (m, 0, sizeof (*m));
    if (strlen (path) >= sizeof (norm)
        || tier_path_normalize (path, norm, sizeof (norm)) < 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!set)
        return 0;
    if ((m->lock = longest (set, norm, TIER_LAYER_SITE, true))) {
        /* under a locked site policy the site layer alone decides */
        m->policy = longest (set, norm, TIER_LAYER_SITE, false);
        return 0;
    }
    for (int l = TIER_LAYER_JOB; l >= TIER_LAYER_SITE && !m->policy; l--)
        m->policy = longest (set, norm, l, false);
    return 0;
}

int tier_policy_check_roots (const struct tier_policy *p,
                             const struct tier_policy_roots *roots,
                             tier_error_t *error)
{
    bool allowed = false;

    if (!roots || roots->nallowed == 0) {
        errno = EPERM;
        return tier_errprintf (error, "%s is outside the directories tier "
                               "may act on: AllowedRoots is not set in "
                               "tier.conf", p->dir);
    }
    for (int i = 0; i < roots->nallowed; i++)
        if (roots->allowed[i] && tier_path_under (p->dir, roots->allowed[i]))
            allowed = true;
    if (!allowed) {
        errno = EPERM;
        return tier_errprintf (error, "%s is outside the directories tier "
                               "may act on (AllowedRoots)", p->dir);
    }
    for (int i = 0; i < roots->nown; i++) {
        const char *own = roots->own[i];
        if (!own || !own[0])
            continue;
        if (tier_path_under (p->dir, own)) {
            errno = EPERM;
            return tier_errprintf (error, "%s lies inside %s, one of tier's "
                                   "own directories", p->dir, own);
        }
        if (tier_policy_role_mounts (p->role)
            && tier_path_under (own, p->dir)) {
            errno = EPERM;
            return tier_errprintf (error, "%s contains %s, one of tier's own "
                                   "directories: a %s directory cannot",
                                   p->dir, own,
                                   tier_policy_role_name (p->role));
        }
    }
    return 0;
}

/* Precedence in a nesting conflict: a locked site policy above all. */
static int rank (const struct tier_policy *p)
{
    if (p->layer == TIER_LAYER_SITE && p->locked)
        return TIER_LAYER_COUNT;
    return (int) p->layer;
}

/* The entry that decides directory dir among the live ones (the same
 * rule as resolution, at exactly dir).
 */
static int decider (const struct tier_policy_set *in, const bool *dead,
                    const char *dir)
{
    int best = -1;

    for (int i = 0; i < in->n; i++) {
        if (dead[i] || strcmp (in->v[i].dir, dir))
            continue;
        if (best < 0 || rank (&in->v[i]) >= rank (&in->v[best]))
            best = i;
    }
    return best;
}

static int refuse (json_t *refused, const struct tier_policy *p,
                   const char *reason)
{
    json_t *o;

    if (!refused)
        return 0;
    if (!(o = tier_policy_to_json (p, true)))
        goto nomem;
    if (json_object_set_new (o, "reason", json_string (reason)) < 0) {
        json_decref (o);
        goto nomem;
    }
    if (json_array_append_new (refused, o) < 0)     /* consumes o */
        goto nomem;
    return 0;
nomem:
    errno = ENOMEM;
    return -1;
}

static const struct tier_policy *locked_over (const struct tier_policy_set *in,
                                              const bool *dead,
                                              const char *dir)
{
    const struct tier_policy *best = NULL;

    for (int i = 0; i < in->n; i++) {
        const struct tier_policy *p = &in->v[i];
        if (!dead[i] && p->layer == TIER_LAYER_SITE && p->locked
            && tier_path_under (dir, p->dir)
            && (!best || strlen (p->dir) > strlen (best->dir)))
            best = p;
    }
    return best;
}

int tier_policy_freeze (const struct tier_policy_set *in,
                        const struct tier_policy_roots *roots,
                        struct tier_policy_set *out, json_t *refused,
                        tier_error_t *error)
{
    bool *dead = NULL, *dec = NULL;
    char reason[TIER_ERROR_MAX + 128];
    tier_error_t e;
    bool changed;

    if (!in || !out) {
        errno = EINVAL;
        return tier_errprintf (error, "invalid arguments");
    }
    if (in->n && !(dead = calloc (in->n, sizeof (*dead)))) {
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    /* 1. where policies may act at all; what users may set */
    for (int i = 0; i < in->n; i++) {
        const struct tier_policy *p = &in->v[i], *lk;
        if (roots && tier_policy_check_roots (p, roots, &e) < 0) {
            dead[i] = true;
            if (refuse (refused, p, e.text) < 0)
                goto nomem;
        }
        else if (tier_policy_validate (p, &e) < 0) {
            dead[i] = true;
            if (refuse (refused, p, e.text) < 0)
                goto nomem;
        }
        else if (p->layer != TIER_LAYER_SITE
                 && (lk = locked_over (in, dead, p->dir))) {
            dead[i] = true;
            (void) snprintf (reason, sizeof (reason), "%s lies under the "
                             "locked site policy %s (%s)", p->dir, lk->dir,
                             lk->source);
            if (refuse (refused, p, reason) < 0)
                goto nomem;
        }
    }
    /* 2. nothing nests inside a pipeline or endpoint directory: among
     * the directories' deciding entries, the lower rank gives way, in one
     * rank the inner one; repeat until nothing changes (a removal may
     * uncover an entry of a lower layer).
     */
    if (in->n && !(dec = calloc (in->n, sizeof (*dec))))
        goto nomem;
    do {
        changed = false;
        for (int i = 0; i < in->n; i++)
            dec[i] = !dead[i] && decider (in, dead, in->v[i].dir) == i;
        for (int i = 0; i < in->n && !changed; i++) {
            const struct tier_policy *a = &in->v[i];
            if (!dec[i] || !tier_policy_role_mounts (a->role))
                continue;
            for (int j = 0; j < in->n && !changed; j++) {
                const struct tier_policy *b = &in->v[j];
                if (!dec[j] || j == i || !strcmp (a->dir, b->dir)
                    || !tier_path_under (b->dir, a->dir))
                    continue;
                if (rank (b) > rank (a))
                    (void) snprintf (reason, sizeof (reason), "%s (%s) would "
                                     "contain %s (%s layer, %s), which comes "
                                     "first: nothing may nest inside a %s "
                                     "directory", a->dir,
                                     tier_policy_role_name (a->role), b->dir,
                                     tier_policy_layer_name (b->layer),
                                     b->source,
                                     tier_policy_role_name (a->role));
                else
                    (void) snprintf (reason, sizeof (reason), "%s lies inside "
                                     "the %s directory %s (%s layer, %s): "
                                     "nothing may nest inside a %s "
                                     "directory", b->dir,
                                     tier_policy_role_name (a->role), a->dir,
                                     tier_policy_layer_name (a->layer),
                                     a->source,
                                     tier_policy_role_name (a->role));
                dead[rank (b) > rank (a) ? i : j] = true;
                changed = true;
                if (refuse (refused, rank (b) > rank (a) ? a : b, reason) < 0)
                    goto nomem;
            }
        }
    } while (changed);
    for (int i = 0; i < in->n; i++)
        if (!dead[i] && tier_policy_add (out, &in->v[i], error) < 0) {
            free (dead);
            free (dec);
            return -1;
        }
    free (dead);
    free (dec);
    return 0;
nomem:
    free (dead);
    free (dec);
    errno = ENOMEM;
    return tier_errprintf (error, "out of memory");
}
