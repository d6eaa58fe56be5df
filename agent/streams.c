/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* streams.c - the node's GFS streams: at most GfsStreams at once, shared
 * fairly between users, and a bandwidth share per user (UserBandwidth)
 *
 * Every copy that reads or writes the GFS for a user goes through here:
 * replica fetches (the interposer's misses and tierctl prefetch), stage-in
 * copies and stage-out migrations.  A stream is a ticket that the agent
 * grants; nothing else counts.
 *
 *  - Replica fetches are the agent's own children: the fetch queue asks
 *    for a stream (streams_want) and forks the fetcher when it is granted;
 *    the fetch gives it back when it ends (streams_done).
 *  - Stage-in copiers and stage-out migrators run with the user's
 *    credentials.  Each gets one end of a SOCK_SEQPACKET socketpair that
 *    the agent made before forking it (streams_client); on it the worker
 *    asks ('A') and gives back ('D'), and the agent answers 'G' (granted)
 *    or 'Q' (queued; 'G' follows).  A worker that dies closes its end: the
 *    agent reads EOF and takes back what it held or waited for.
 *
 * Why granted over inherited sockets, not slot files to flock: the
 * workers run as the user, so a file they can open by name she can open
 * from her own shell too, and hold or fake; and flock serves waiters in no
 * order at all.  An inherited descriptor cannot be reached from outside:
 * a process that changed its uid is not dumpable, so the user can neither
 * ptrace it nor open its /proc/PID/fd/N; she can only kill her own worker,
 * which gives its stream back.  And the agent, which alone holds the
 * queue, can order it fairly.
 *
 * Fairness: a free stream goes to the waiting user who holds the fewest,
 * ties to the one served least recently (round robin between users), and
 * within a user to the oldest request -- so a user with one job waits for
 * at most one stream to end, however many another user queued.
 *
 * Bandwidth: each user has one token bucket (the copy engine's limit) in
 * memory shared with the workers (MAP_SHARED, made before they are
 * forked), at UserBandwidth: the user's streams in flight on the node
 * share it, so together they never exceed it and one alone gets it all.
 * Its own accounting (bytes, delayed bytes, waits, stall) is in tierctl
 * status.
 *
 * A worker that loses the agent (it died, or did not answer a request
 * for STREAMS_ANSWER_MS: stopped or hung) goes on without a stream: the
 * restarted agent does not know it, the copy still finishes.
 *
 * A worker that is stuck (a GFS request never answered: killed, it still
 * does not end, and keeps its end of the channel open) is abandoned by
 * whoever watched it, and its ticket revoked (streams_revoke): what it
 * held or waited for no longer counts against the node's streams or its
 * user's share.  Should it ever wake, it finds the channel closed (it
 * was killed anyway).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/copy.h"
#include "lib/log.h"
#include "agent.h"
#include "streams.h"

#define USERS_MAX 4096
#define STREAMS_ANSWER_MS 30000     /* a live agent answers a request */

enum tstate {
    T_IDLE = 0,
    T_WAITING,
    T_HOLDING,
};

struct stream_ticket {
    int slot;                   /* remote: its index in slots[]; -1 local */
    int fd;                     /* remote: the agent's end */
    uid_t uid;
    enum streams_kind kind;
    char what[200];             /* "stage-in of job 12", for the log */
    enum tstate state;
    uint64_t id;                /* remote: for streams_revoke */
    bool told;                  /* told to wait ('Q', logged) */
    uint64_t seq;               /* arrival of the current wait */
    int64_t since_ms;
    streams_go_f go;            /* local */
    void *arg;
    struct stream_ticket **owner;       /* local: cleared when it ends */
    struct stream_ticket *prev, *next;
};

struct suser {
    uid_t uid;
    char name[64];
    unsigned held, waiting;
    uint64_t served;            /* the grant number of its last grant */
    uint64_t grants, queued;    /* grants, of which after a wait */
    uint64_t wait_ms;           /* their waits */
    struct tier_copy_limit *limit;      /* shared with its workers */
};

struct streams {
    struct stream_ticket *tickets;
    struct stream_ticket *slots[AGENT_STREAMS_MAX];
    struct suser *users;
    int nusers, cusers;
    unsigned in_use, waiting;
    uint64_t seq, grants, ids, revoked;
    uint64_t rate;              /* UserBandwidth the buckets have */
    bool busy, again;           /* schedule () is running / to run again */
};

const char *streams_kind_name (enum streams_kind kind)
{
    switch (kind) {
        case STREAMS_REPLICA: return "replica";
        case STREAMS_STAGE_IN: return "stage-in";
        case STREAMS_STAGE_OUT: return "stage-out";
    }
    return "?";
}

/* ------------------------------------------------------------ choice */

static bool better (const struct streams_cand *x,
                    const struct streams_cand *y)
{
    if (x->held != y->held)
        return x->held < y->held;
    if (x->served != y->served)
        return x->served < y->served;
    return x->seq < y->seq;
}

int streams_pick (const struct streams_cand *c, int n)
{
    int best = -1;

    for (int i = 0; i < n; i++)
        if (best < 0 || better (&c[i], &c[best]))
            best = i;
    return best;
}

/* ------------------------------------------------------------- users */

static struct suser *user_get (struct agent *a, uid_t uid, const char *name)
{
    struct streams *s = a->streams;
    struct suser *u;

    for (int i = 0; i < s->nusers; i++)
        if (s->users[i].uid == uid) {
            u = &s->users[i];
            if (name && name[0] && !u->name[0])
                (void) snprintf (u->name, sizeof (u->name), "%s", name);
            return u;
        }
    if (s->nusers == s->cusers) {
        int n = s->cusers ? s->cusers * 2 : 16;
        struct suser *v;
        if (n > USERS_MAX || !(v = realloc (s->users, n * sizeof (*v))))
            return NULL;
        s->users = v;
        s->cusers = n;
    }
    u = &s->users[s->nusers];
    memset (u, 0, sizeof (*u));
    u->uid = uid;
    if (name && name[0])
        (void) snprintf (u->name, sizeof (u->name), "%s", name);
    else {
        struct passwd pw, *pwp = NULL;
        char buf[1024];
        if (getpwuid_r (uid, &pw, buf, sizeof (buf), &pwp) == 0 && pwp)
            (void) snprintf (u->name, sizeof (u->name), "%s", pw.pw_name);
    }
    /* its bucket, before any of its workers is forked */
    if (!(u->limit = tier_copy_limit_create_shared (s->rate, 0)))
        tier_log_error ("GFS streams: the bandwidth limit of uid %u",
                        (unsigned) uid);
    s->nusers++;
    return u;
}

struct tier_copy_limit *streams_limit (struct agent *a, uid_t uid,
                                       const char *name)
{
    struct suser *u;

    if (!a->streams || !(u = user_get (a, uid, name)))
        return NULL;
    return u->limit;
}

/* ----------------------------------------------------------- granting */

static unsigned cap (struct agent *a)
{
    return a->conf->gfs_streams ? a->conf->gfs_streams : 1;
}

static void log_state (struct agent *a, int level, const char *event,
                       const struct stream_ticket *t, int64_t waited)
{
    struct streams *s = a->streams;
    struct suser *u = user_get (a, t->uid, NULL);
    char after[48] = "";

    if (waited >= 0)
        (void) snprintf (after, sizeof (after), " after %lld ms",
                         (long long) waited);
    tier_log (level, "GFS stream %s: %s (user %s)%s: %u of %u in use, %u "
              "waiting", event, t->what, u && u->name[0] ? u->name : "?",
              after, s->in_use, cap (a), s->waiting);
}

static void ticket_send (struct stream_ticket *t, char m)
{
    if (t->fd >= 0 && send (t->fd, &m, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
        tier_log (LOG_DEBUG, "GFS stream: %s: %s", t->what,
                  strerror (errno));
    /* a worker that is gone is noticed by its EOF */
}

static void grant (struct agent *a, struct stream_ticket *t)
{
    struct streams *s = a->streams;
    struct suser *u = user_get (a, t->uid, NULL);
    int64_t waited = tier_now_ms () - t->since_ms;

    s->waiting--;
    s->in_use++;
    t->state = T_HOLDING;
    s->grants++;
    if (u) {
        u->waiting--;
        u->held++;
        u->served = s->grants;
        u->grants++;
        if (t->told) {
            u->queued++;
            u->wait_ms += (uint64_t) waited;
        }
    }
    log_state (a, t->told ? LOG_INFO : LOG_DEBUG, "granted", t,
               t->told ? waited : -1);
    t->told = false;
    if (t->slot >= 0)
        ticket_send (t, 'G');
    else if (t->go)
        t->go (a, t->arg);              /* last: it may end the ticket */
}

/* Grant free streams to waiting tickets, fairly (streams_pick). */
static void schedule (struct agent *a)
{
    struct streams *s = a->streams;

    if (s->busy) {
        s->again = true;
        return;
    }
    s->busy = true;
    do {
        s->again = false;
        while (s->in_use < cap (a) && s->waiting > 0) {
            struct stream_ticket *best = NULL;
            struct streams_cand bc = { 0 };

            for (struct stream_ticket *t = s->tickets; t; t = t->next) {
                struct suser *u;
                struct streams_cand c = { 0 };
                if (t->state != T_WAITING)
                    continue;
                if ((u = user_get (a, t->uid, NULL))) {
                    c.held = u->held;
                    c.served = u->served;
                }
                c.seq = t->seq;
                if (!best || better (&c, &bc)) {
                    best = t;
                    bc = c;
                }
            }
            if (!best)
                break;
            grant (a, best);
        }
    } while (s->again);
    s->busy = false;
}

static void ticket_want (struct agent *a, struct stream_ticket *t)
{
    struct streams *s = a->streams;
    struct suser *u = user_get (a, t->uid, NULL);

    t->state = T_WAITING;
    t->seq = ++s->seq;
    t->since_ms = tier_now_ms ();
    s->waiting++;
    if (u)
        u->waiting++;
    schedule (a);
}

/* After ticket_want: still waiting?  Then say so. */
static void tell_queued (struct agent *a, struct stream_ticket *t)
{
    if (t->state != T_WAITING || t->told)
        return;
    t->told = true;
    log_state (a, LOG_INFO, "queued", t, -1);
    if (t->slot >= 0)
        ticket_send (t, 'Q');
}

/* A held stream comes back, or a wait ends without one. */
static void ticket_idle (struct agent *a, struct stream_ticket *t)
{
    struct streams *s = a->streams;
    struct suser *u = user_get (a, t->uid, NULL);

    if (t->state == T_HOLDING) {
        s->in_use--;
        if (u)
            u->held--;
    }
    else if (t->state == T_WAITING) {
        s->waiting--;
        if (u)
            u->waiting--;
    }
    t->state = T_IDLE;
    t->told = false;
}

static struct stream_ticket *ticket_new (struct agent *a, uid_t uid,
                                         const char *user,
                                         enum streams_kind kind,
                                         const char *what)
{
    struct streams *s = a->streams;
    struct stream_ticket *t;

    if (!s || !(t = calloc (1, sizeof (*t))))
        return NULL;
    t->slot = t->fd = -1;
    t->uid = uid;
    t->kind = kind;
    (void) snprintf (t->what, sizeof (t->what), "%s", what);
    (void) user_get (a, uid, user);
    t->next = s->tickets;
    if (s->tickets)
        s->tickets->prev = t;
    s->tickets = t;
    return t;
}

static void ticket_free (struct agent *a, struct stream_ticket *t)
{
    struct streams *s = a->streams;

    ticket_idle (a, t);
    if (t->prev)
        t->prev->next = t->next;
    else
        s->tickets = t->next;
    if (t->next)
        t->next->prev = t->prev;
    if (t->slot >= 0) {
        s->slots[t->slot] = NULL;
        (void) epoll_ctl (a->epfd, EPOLL_CTL_DEL, t->fd, NULL);
    }
    if (t->fd >= 0)
        close (t->fd);
    if (t->owner)
        *t->owner = NULL;
    free (t);
}

/* ------------------------------------------------------ local tickets */

void streams_want (struct agent *a, uid_t uid, enum streams_kind kind,
                   const char *what, streams_go_f go, void *arg,
                   struct stream_ticket **ticket)
{
    struct stream_ticket *t = ticket_new (a, uid, NULL, kind, what);

    *ticket = t;
    if (!t) {
        go (a, arg);                    /* no memory: go without one */
        return;
    }
    t->go = go;
    t->arg = arg;
    t->owner = ticket;
    ticket_want (a, t);
    if (*ticket == t)                   /* go () may have ended it */
        tell_queued (a, t);
}

void streams_done (struct agent *a, struct stream_ticket **ticket)
{
    struct stream_ticket *t = *ticket;

    if (!t || !a->streams)
        return;
    *ticket = NULL;
    t->owner = NULL;
    ticket_free (a, t);
    schedule (a);
}

/* ----------------------------------------------------- remote tickets */

int streams_client (struct agent *a, uid_t uid, const char *user,
                    enum streams_kind kind, const char *what)
{
    return streams_client_id (a, uid, user, kind, what, NULL);
}

int streams_client_id (struct agent *a, uid_t uid, const char *user,
                       enum streams_kind kind, const char *what, uint64_t *id)
{
    struct streams *s = a->streams;
    struct stream_ticket *t;
    struct epoll_event ev = { .events = EPOLLIN };
    int sv[2], slot = -1;

    if (!s)
        return -1;
    for (int i = 0; i < AGENT_STREAMS_MAX && slot < 0; i++)
        if (!s->slots[i])
            slot = i;
    if (slot < 0) {
        tier_log (LOG_WARNING, "GFS streams: %d workers at once; %s runs "
                  "without one", AGENT_STREAMS_MAX, what);
        return -1;
    }
    if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        tier_log_error ("GFS streams: socketpair");
        return -1;
    }
    if (!(t = ticket_new (a, uid, user, kind, what))) {
        close (sv[0]);
        close (sv[1]);
        return -1;
    }
    t->fd = sv[0];
    ev.data.u64 = AGENT_EV_STREAM0 + (uint64_t) slot;
    if (epoll_ctl (a->epfd, EPOLL_CTL_ADD, t->fd, &ev) < 0) {
        tier_log_error ("GFS streams: epoll");
        ticket_free (a, t);
        close (sv[1]);
        return -1;
    }
    t->slot = slot;
    t->id = ++s->ids;
    s->slots[slot] = t;
    if (id)
        *id = t->id;
    return sv[1];
}

bool streams_revoke (struct agent *a, uint64_t id, const char *why)
{
    struct streams *s = a->streams;
    struct stream_ticket *t = NULL;
    bool held;
    char c;

    if (!s || id == 0)
        return false;
    for (int i = 0; i < AGENT_STREAMS_MAX && !t; i++)
        if (s->slots[i] && s->slots[i]->id == id)
            t = s->slots[i];
    if (!t)
        return false; /* ended already */
    held = t->state == T_HOLDING;
    /* a worker that closed its end just now is gone, not stuck: its EOF
     * waits in the loop */
    if (recv (t->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
        why = NULL;
    else {
        s->revoked++;
        ticket_idle (a, t); /* the counts the log line shows: after */
        log_state (a, LOG_WARNING, held ? "revoked" : "wait revoked", t, -1);
        tier_log (LOG_WARNING, "GFS stream of %s: %s", t->what,
                  why ? why : "its worker does not end");
    }
    ticket_free (a, t);
    if (held)
        schedule (a);
    return why != NULL;
}

void streams_event (struct agent *a, int slot)
{
    struct streams *s = a->streams;
    struct stream_ticket *t;

    if (!s || slot < 0 || slot >= AGENT_STREAMS_MAX || !(t = s->slots[slot]))
        return;
    for (;;) {
        char m[16];
        ssize_t n = recv (t->fd, m, sizeof (m), MSG_DONTWAIT);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            /* the worker is gone: whatever it held comes back */
            bool held = t->state == T_HOLDING;
            ticket_free (a, t);
            if (held)
                schedule (a);
            return;
        }
        /* one letter a message; anything else is ignored */
        if (n == 1 && m[0] == 'A' && t->state == T_IDLE) {
            ticket_want (a, t);
            tell_queued (a, t);
        }
        else if (n == 1 && m[0] == 'D' && t->state == T_HOLDING) {
            ticket_idle (a, t);
            schedule (a);
        }
    }
}

void streams_close_agent_ends (struct agent *a)
{
    struct streams *s = a->streams;

    if (!s)
        return;
    for (struct stream_ticket *t = s->tickets; t; t = t->next)
        if (t->fd >= 0)
            (void) close (t->fd);
}

void streams_close_except (const int *keep, int n)
{
    unsigned from = 3;

    for (;;) {
        int next = -1;
        for (int i = 0; i < n; i++)
            if (keep[i] >= (int) from && (next < 0 || keep[i] < next))
                next = keep[i];
        if (next < 0) {
            (void) close_range (from, ~0U, 0);
            return;
        }
        if ((unsigned) next > from)
            (void) close_range (from, (unsigned) next - 1, 0);
        from = (unsigned) next + 1;
    }
}

/* --------------------------------------------------------- the worker */

static int w_fd = -1;
static bool w_holding;
static struct tier_copy_limit *w_limit;

void streams_worker_init (int fd, struct tier_copy_limit *limit)
{
    w_fd = fd;
    w_limit = limit;
    w_holding = false;
}

struct tier_copy_limit *streams_worker_limit (void)
{
    return w_limit;
}

int streams_take (void (*queued) (void *arg, bool on), void *arg)
{
    bool told = false;
    char m = 'A';

    if (w_fd < 0)
        return 1;
    if (w_holding)
        return 0;
    if (send (w_fd, &m, 1, MSG_NOSIGNAL) != 1)
        goto lost;
    for (;;) {
        struct pollfd p = { .fd = w_fd, .events = POLLIN };
        ssize_t n;
        int rc;

        /* the agent answers at once, 'G' or 'Q': one that says nothing
         * for long is stopped or hung, and the copy goes on without it
         * (closing the channel, so that a stream it grants later comes
         * back at once) */
        if (!told && (rc = poll (&p, 1, STREAMS_ANSWER_MS)) <= 0) {
            if (rc < 0 && errno == EINTR)
                continue;
            goto lost;
        }
        n = recv (w_fd, &m, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1)
            goto lost;
        if (m == 'Q' && !told && queued) {
            queued (arg, true);
            told = true;
        }
        else if (m == 'G') {
            if (told)
                queued (arg, false);
            w_holding = true;
            return 0;
        }
    }
lost:
    /* the agent is gone: go on without a stream */
    if (told)
        queued (arg, false);
    close (w_fd);
    w_fd = -1;
    return 1;
}

void streams_give (void)
{
    char m = 'D';

    if (w_fd >= 0 && w_holding
        && send (w_fd, &m, 1, MSG_NOSIGNAL) != 1) {
        close (w_fd);
        w_fd = -1;
    }
    w_holding = false;
}

/* --------------------------------------------------- the agent's side */

int streams_init (struct agent *a)
{
    if (!(a->streams = calloc (1, sizeof (*a->streams))))
        return -1;
    a->streams->rate = a->conf->user_bandwidth;
    tier_log (LOG_INFO, "GFS streams: %u at once, UserBandwidth %llu "
              "bytes/s%s", cap (a),
              (unsigned long long) a->conf->user_bandwidth,
              a->conf->user_bandwidth ? "" : " (unlimited)");
    return 0;
}

void streams_fini (struct agent *a)
{
    struct streams *s = a->streams;

    if (!s)
        return;
    while (s->tickets)
        ticket_free (a, s->tickets);
    for (int i = 0; i < s->nusers; i++)
        tier_copy_limit_destroy (s->users[i].limit);
    free (s->users);
    free (s);
    a->streams = NULL;
}

void streams_tick (struct agent *a)
{
    struct streams *s = a->streams;

    if (!s)
        return;
    /* tier.conf was reloaded: new rates, maybe more streams */
    if (s->rate != a->conf->user_bandwidth) {
        s->rate = a->conf->user_bandwidth;
        for (int i = 0; i < s->nusers; i++)
            tier_copy_limit_set (s->users[i].limit, s->rate, 0);
        tier_log (LOG_INFO, "GFS streams: UserBandwidth now %llu bytes/s",
                  (unsigned long long) s->rate);
    }
    schedule (a);
}

json_t *streams_status_json (struct agent *a, uid_t uid)
{
    struct streams *s = a->streams;
    bool all = agent_privileged (a, uid);
    json_t *users, *o;

    if (!s || !(users = json_array ()))
        return NULL;
    for (int i = 0; i < s->nusers; i++) {
        struct suser *u = &s->users[i];
        struct tier_copy_limit_stats st;

        if (!all && u->uid != uid)
            continue;
        tier_copy_limit_stats (u->limit, &st);
        o = json_pack ("{s:I s:s s:i s:i s:I s:I s:I s:{s:I s:I s:I s:I s:I "
                       "s:I s:I s:I}}",
                       "uid", (json_int_t) u->uid, "user", u->name,
                       "held", (int) u->held, "waiting", (int) u->waiting,
                       "grants", (json_int_t) u->grants,
                       "queued", (json_int_t) u->queued,
                       "wait_ms", (json_int_t) u->wait_ms,
                       "bandwidth",
                       "rate", (json_int_t) st.rate,
                       "burst", (json_int_t) st.burst,
                       "bytes", (json_int_t) st.bytes,
                       "ops", (json_int_t) st.ops,
                       "delayed_bytes", (json_int_t) st.delayed_bytes,
                       "delayed_ops", (json_int_t) st.delayed_ops,
                       "wait_ns", (json_int_t) st.wait_ns,
                       "stall_ns", (json_int_t) st.stall_ns);
        if (!o || json_array_append_new (users, o) < 0) {
            json_decref (users);
            return NULL;
        }
    }
    return json_pack ("{s:i s:i s:i s:I s:I s:o}", "max", (int) cap (a),
                      "in_use", (int) s->in_use, "waiting", (int) s->waiting,
                      "revoked", (json_int_t) s->revoked, "user_bandwidth",
                      (json_int_t) a->conf->user_bandwidth, "users", users);
}
