/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* userpol.c - requests that follow the caller's user policies
 *
 * A request from outside a job (tierctl prefetch, tierctl mirror) follows
 * the site policies and the caller's own, which live in the caller's
 * directory of SharedStateDir, on the GFS.  Reading them is file work as
 * the user that can take seconds -- or forever, on a directory the user
 * mounted a FUSE file system over -- so it never runs on the loop: the
 * request waits here, with its descriptors, while the policy freezer
 * (policy_freezer.c) reads them off the loop, and runs when the answer
 * (or the freezer's 5 s deadline) comes, with c->upol set to it.  At
 * most UPOL_PER_UID reads per user and UPOL_MAX in all are under way.
 *
 * One `tierctl prefetch` asks once per file; its requests carry the same
 * "policy_run" (a random token of that tierctl): the first one's read
 * serves the others of the run (one read per run, not one child per
 * file), for UPOL_TTL_MS after the run's last request.  A request
 * without a token, or from another run, reads the policies again: a
 * policy set between two prefetches always counts.  A token is only
 * ever matched with its own uid.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/proto.h"
#include "agent.h"
#include "peer.h"
#include "policy_freezer.h"

#define UPOL_PER_UID 4 /* reads of one user under way */
#define UPOL_MAX 256   /* of all users */
#define UPOL_TTL_MS 30000
#define UPOL_CACHE 64   /* runs whose read is kept */
#define UPOL_RUN_MAX 32 /* a token: at most 32 hex digits */

/* A run's policies, as its first read found them. */
struct upol_cached {
    uid_t uid;
    char run[UPOL_RUN_MAX + 1];
    char user[64];
    int kind; /* POLMSG_USER or POLMSG_NONE */
    char *text;
    int64_t at_ms; /* last used; 0: an empty slot */
};
static struct upol_cached cache[UPOL_CACHE];

struct upol_wait {
    struct agent *a;
    struct conn *c; /* NULL once gone */
    uint32_t msgid;
    uid_t uid;
    char user[64];
    rpc_f fn;
    json_t *req;
    int fds[TIER_MSG_FDS_MAX];
    int nfds;
    bool in_call;               /* userpol_call has not returned yet */
    char run[UPOL_RUN_MAX + 1]; /* its "policy_run", or "" */
    bool done;                  /* answered while in_call */
    int kind;
    char *text;
    struct upol_wait *next;
};
static struct upol_wait *waits;
static int nwaits;

/* Run w's request with the policies read; its result. */
static json_t *run (struct upol_wait *w, tier_error_t *error)
{
    struct conn *c = w->c;
    struct user_pols up = { w->user, w->kind, w->text };
    uint32_t id = c->req_id;
    json_t *res;

    c->req_id = w->msgid;
    c->req_fds = w->fds;
    c->req_nfds = w->nfds;
    c->upol = &up;
    errno = 0;
    res = w->fn (w->a, c, w->req, error);
    c->upol = NULL;
    c->req_fds = NULL;
    c->req_nfds = 0;
    c->req_id = id;
    return res;
}

static void unlink_wait (struct upol_wait *w)
{
    struct upol_wait **pp;

    for (pp = &waits; *pp && *pp != w; pp = &(*pp)->next)
        ;
    if (*pp) {
        *pp = w->next;
        nwaits--;
    }
}

static void free_wait (struct upol_wait *w)
{
    for (int i = 0; i < w->nfds; i++)
        if (w->fds[i] >= 0)
            rxfd_drop (w->uid, w->fds[i]); /* those not taken */
    json_decref (w->req);
    free (w->text);
    free (w);
}

static struct upol_cached *cached (uid_t uid, const char *run)
{
    for (int i = 0; i < UPOL_CACHE; i++)
        if (cache[i].at_ms && cache[i].uid == uid
            && !strcmp (cache[i].run, run))
            return &cache[i];
    return NULL;
}

/* The request's "policy_run" into run: "" if none or not a token. */
static void run_of (json_t *req, char run[UPOL_RUN_MAX + 1])
{
    const char *s = json_string_value (json_object_get (req, "policy_run"));
    size_t n = s ? strlen (s) : 0;

    run[0] = '\0';
    if (n < 8 || n > UPOL_RUN_MAX || strspn (s, "0123456789abcdef") != n)
        return;
    memcpy (run, s, n + 1);
}

static void cache_drop (struct upol_cached *u)
{
    free (u->text);
    memset (u, 0, sizeof (*u));
}

/* Keep what w's read found for the rest of its run. */
static void cache_put (const struct upol_wait *w)
{
    struct upol_cached *u;
    char *text = NULL;

    if (!w->run[0] || (w->kind != POLMSG_USER && w->kind != POLMSG_NONE)
        || (w->text && !(text = strdup (w->text))))
        return;
    u = cached (w->uid, w->run);
    if (!u) { /* a free slot, else the oldest */
        u = &cache[0];
        for (int i = 0; i < UPOL_CACHE && u->at_ms; i++)
            if (!cache[i].at_ms || cache[i].at_ms < u->at_ms)
                u = &cache[i];
    }
    cache_drop (u);
    u->uid = w->uid;
    memcpy (u->run, w->run, sizeof (u->run));
    (void) snprintf (u->user, sizeof (u->user), "%s", w->user);
    u->kind = w->kind;
    u->text = text;
    u->at_ms = tier_now_ms ();
    if (u->at_ms <= 0)
        u->at_ms = 1;
}

static void on_read (struct agent *a, int kind, char *out, void *arg)
{
    struct upol_wait *w = arg;
    struct conn *c = w->c;
    tier_error_t e = { { 0 } };
    json_t *res;
    char *body;

    w->kind = kind;
    w->text = out;
    cache_put (w);
    if (w->in_call) {
        w->done = true;
        return;
    }
    unlink_wait (w);
    if (c) {
        c->waiting--;
        res = run (w, &e);
        if (res != RPC_DEFERRED) {
            if (res) {
                body = json_dumps (res, JSON_COMPACT);
                json_decref (res);
            }
            else
                body = rpc_error_body (errno ? errno : EIO, "%s",
                                       e.text[0] ? e.text : "failed");
            server_reply (a, c, w->msgid, body); /* may close c */
        }
    }
    free_wait (w);
}

static json_t *run_now (struct agent *a, struct conn *c, rpc_f fn, json_t *req,
                        const struct user_pols *up, tier_error_t *error)
{
    json_t *res;

    c->upol = up;
    res = fn (a, c, req, error);
    c->upol = NULL;
    return res;
}

static int waits_of (uid_t uid)
{
    int n = 0;

    for (struct upol_wait *w = waits; w; w = w->next)
        n += w->uid == uid;
    return n;
}

json_t *userpol_call (struct agent *a, struct conn *c, rpc_f fn, json_t *req,
                      tier_error_t *error)
{
    struct user_pols none = { "", POLMSG_NONE, NULL };
    struct passwd pwd, *pw = NULL;
    struct store_job job, mine;
    struct peer_job pj;
    struct upol_wait *w;
    struct upol_cached *u;
    char token[UPOL_RUN_MAX + 1];
    tier_error_t e;
    char buf[4096];
    json_t *res;
    int err;

    if (rpc_caller_job (a, c, &mine, &pj, &e) == 0)
        return run_now (a, c, fn, req, &none, error);
    if (getpwuid_r (c->cred.uid, &pwd, buf, sizeof (buf), &pw) || !pw) {
        errno = ENOENT;
        tier_errprintf (error, "uid %d has no passwd entry on node %s",
                        (int) c->cred.uid, a->node);
        return NULL;
    }
    if (!a->conf->shared_state_dir[0]) { /* the site's policies only */
        none.user = pw->pw_name;
        return run_now (a, c, fn, req, &none, error);
    }
    run_of (req, token);
    if (token[0] && (u = cached (c->cred.uid, token))) {
        int64_t now = tier_now_ms ();
        if (now - u->at_ms < UPOL_TTL_MS && !strcmp (u->user, pw->pw_name)) {
            struct user_pols up = { u->user, u->kind, u->text };
            u->at_ms = now > 0 ? now : 1;
            return run_now (a, c, fn, req, &up, error);
        }
        cache_drop (u);
    }
    if (nwaits >= UPOL_MAX || waits_of (c->cred.uid) >= UPOL_PER_UID) {
        errno = EAGAIN;
        tier_errprintf (error,
                        "%d requests of uid %d wait for its "
                        "policies already: try again later",
                        waits_of (c->cred.uid), (int) c->cred.uid);
        return NULL;
    }
    if (!(w = calloc (1, sizeof (*w)))) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    w->a = a;
    w->c = c;
    w->msgid = c->req_id;
    w->uid = c->cred.uid;
    (void) snprintf (w->user, sizeof (w->user), "%s", pw->pw_name);
    w->fn = fn;
    w->req = json_incref (req);
    for (int i = 0; i < c->req_nfds && i < TIER_MSG_FDS_MAX; i++) {
        w->fds[w->nfds++] = c->req_fds[i];
        c->req_fds[i] = -1; /* ours now */
    }
    w->next = waits;
    waits = w;
    nwaits++;
    c->waiting++;
    memset (&job, 0, sizeof (job));
    job.ngroups = -1;
    job.uid = pw->pw_uid;
    job.gid = pw->pw_gid;
    (void) snprintf (job.user, sizeof (job.user), "%s", pw->pw_name);
    memcpy (w->run, token, sizeof (w->run));
    w->in_call = true;
    policy_freezer_read_start (a, &job, on_read, w);
    w->in_call = false;
    if (!w->done)
        return RPC_DEFERRED;
    /* answered at once: the freezer could not start */
    unlink_wait (w);
    c->waiting--;
    res = run (w, error);
    err = errno;
    free_wait (w);
    errno = err;
    return res;
}

void userpol_conn_gone (struct agent *a, struct conn *c)
{
    (void) a;
    for (struct upol_wait *w = waits; w; w = w->next)
        if (w->c == c) {
            w->c = NULL;
            c->waiting--;
        }
}
