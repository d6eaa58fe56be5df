/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* server.c - tierd's event loop: the socket, signals, timers, connections
 *
 * One thread, epoll, non-blocking connections with their own reader and
 * writer, so that a slow or silent client never blocks the others: a
 * message must arrive whole within AGENT_MSG_TIMEOUT_MS, an oversized one
 * is refused from its header, garbage gets an error reply, and the
 * connection is closed after it.  A client that sends requests without
 * reading the replies is not read from while AGENT_WQUEUE_MAX bytes of
 * replies wait for it, nor while AGENT_CONN_WAITING_MAX of its requests
 * wait for their answers.
 *
 * Connection slots are shared so that no user can take them all: each
 * user (but root and SlurmUser) may hold ClientsPerUser connections, all
 * users together AGENT_CONNS_MAX - AGENT_CONNS_RESERVED, and a connection
 * that has not sent its first request whole within AGENT_FIRST_TIMEOUT_MS
 * is closed.  A refused client gets an error reply saying why.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/trust.h"
#include "bcache.h"
#include "agent.h"
#include "child.h"
#include "streams.h"

enum { EV_LISTEN = 1, EV_SIGNAL, EV_TIMER, EV_RECON, EV_WATCH0 };

#define WATCH_MAX 8
static struct {
    int fd;
    void (*fn) (struct agent *);
} watches[WATCH_MAX];
static int nwatches;

/* The socket directory: root-owned 0755, never a symlink, in directories
 * nobody else may change (lib/trust.h's ROOT_DIR); created if missing
 * (with its parents), refused if someone else made it.
 */
static int socket_dir (const char *dir, tier_error_t *error)
{
    enum tier_trust_why why;
    const struct tier_trust rule = {
        .kind = TIER_TRUST_ROOT_DIR,
        .create = 0755,
        .parents = true,
        .why = &why,
    };
    tier_error_t e;
    struct stat st;
    int fd;

    if ((fd = tier_trust_open (dir, &rule, &e)) < 0) {
        if (errno == EPERM && why != TIER_TRUST_PARENT)
            return tier_errprintf (error,
                                   "%s: must be a directory owned by "
                                   "root and not writable by others (a "
                                   "symlink or a directory made by someone "
                                   "else is refused)",
                                   dir);
        return tier_errprintf (error, "%s", e.text);
    }
    if (fstat (fd, &st) == 0 && (st.st_mode & 07777) != 0755)
        (void) fchmod (fd, 0755);
    close (fd);
    return 0;
}

static int listen_socket (struct agent *a, tier_error_t *error)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    int fd;

    if (socket_dir (a->conf->socket_dir, error) < 0)
        return -1;
    if (tier_conf_socket_path (a->conf, a->sockpath, sizeof (a->sockpath)) < 0
        || strlen (a->sockpath) >= sizeof (sun.sun_path)) {
        errno = ENAMETOOLONG;
        return tier_errprintf (error, "%s/tierd.sock: path too long for a "
                               "unix socket", a->conf->socket_dir);
    }
    strcpy (sun.sun_path, a->sockpath);
    if ((fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      0)) < 0)
        return tier_errprintf (error, "socket: %s", strerror (errno));
    /* We hold the instance lock: a socket file left here is stale. */
    (void) unlink (a->sockpath);
    if (bind (fd, (struct sockaddr *) &sun, sizeof (sun)) < 0
        || chmod (a->sockpath, 0666) < 0 || listen (fd, 128) < 0) {
        tier_errprintf (error, "%s: %s", a->sockpath, strerror (errno));
        close (fd);
        return -1;
    }
    a->lfd = fd;
    return 0;
}

static int ep_add (struct agent *a, int fd, uint32_t events, uint64_t tag)
{
    struct epoll_event ev = { .events = events, .data.u64 = tag };
    return epoll_ctl (a->epfd, EPOLL_CTL_ADD, fd, &ev);
}

int server_init (struct agent *a, tier_error_t *error)
{
    struct itimerspec its = {
        .it_interval = { 1, 0 },
        .it_value = { 1, 0 },
    };
    sigset_t mask;

    a->epfd = a->lfd = a->sigfd = a->timerfd = -1;
    sigemptyset (&mask);
    sigaddset (&mask, SIGTERM);
    sigaddset (&mask, SIGINT);
    sigaddset (&mask, SIGHUP);
    sigaddset (&mask, SIGCHLD);
    sigprocmask (SIG_BLOCK, &mask, NULL);
    signal (SIGPIPE, SIG_IGN);
    if ((a->epfd = epoll_create1 (EPOLL_CLOEXEC)) < 0
        || (a->sigfd = signalfd (-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0
        || (a->timerfd = timerfd_create (CLOCK_MONOTONIC,
                                         TFD_NONBLOCK | TFD_CLOEXEC)) < 0
        || timerfd_settime (a->timerfd, 0, &its, NULL) < 0)
        return tier_errprintf (error, "event loop: %s", strerror (errno));
    if (listen_socket (a, error) < 0)
        return -1;
    if (ep_add (a, a->lfd, EPOLLIN, EV_LISTEN) < 0
        || ep_add (a, a->sigfd, EPOLLIN, EV_SIGNAL) < 0
        || ep_add (a, a->timerfd, EPOLLIN, EV_TIMER) < 0)
        return tier_errprintf (error, "epoll: %s", strerror (errno));
    {
        int efd = jobs_reconcile_start (a);
        if (efd >= 0 && ep_add (a, efd, EPOLLIN, EV_RECON) < 0)
            return tier_errprintf (error, "epoll: %s", strerror (errno));
    }
    return 0;
}

int server_watch (struct agent *a, int fd, void (*fn) (struct agent *))
{
    struct epoll_event ev = { .events = EPOLLIN,
                              .data.u64 = EV_WATCH0 + nwatches };

    if (nwatches >= WATCH_MAX) {
        errno = ENOSPC;
        return -1;
    }
    if (epoll_ctl (a->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -1;
    watches[nwatches].fd = fd;
    watches[nwatches].fn = fn;
    nwatches++;
    return 0;
}

static void conn_close (struct agent *a, struct conn *c)
{
    if (c->waiting)
        replica_conn_gone (a, c);
    if (c->waiting)
        migrate_conn_gone (a, c);
    if (c->waiting)
        mirror_conn_gone (a, c);
    if (c->waiting)
        rpc_conn_gone (a, c);
    if (c->waiting)
        userpol_conn_gone (a, c);
    if (c->waiting)
        bcache_conn_gone (a, c);
    if (c->fd >= 0) {
        (void) epoll_ctl (a->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close (c->fd);
    }
    if (c->reply_fd >= 0)
        close (c->reply_fd);
    tier_msgreader_fini (&c->rd);
    tier_msgwriter_fini (&c->wr);
    if (c->prev)
        c->prev->next = c->next;
    else
        a->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    a->nconns--;
    free (c);
}

void server_fini (struct agent *a)
{
    while (a->conns)
        conn_close (a, a->conns);
    if (a->lfd >= 0) {
        close (a->lfd);
        (void) unlink (a->sockpath);
    }
    if (a->sigfd >= 0)
        close (a->sigfd);
    if (a->timerfd >= 0)
        close (a->timerfd);
    if (a->epfd >= 0)
        close (a->epfd);
}

/* Not read from while its replies wait unread, or while
 * AGENT_CONN_WAITING_MAX of its requests wait for an answer (a fetch, a
 * migration, a child): what one connection can make the agent hold is
 * bounded, and the rest waits in the socket. */
static bool conn_backlogged (struct conn *c)
{
    return tier_msgwriter_bytes (&c->wr) >= AGENT_WQUEUE_MAX
           || c->waiting >= AGENT_CONN_WAITING_MAX;
}

static void conn_want_write (struct agent *a, struct conn *c, bool on)
{
    struct epoll_event ev = {
        .events = (c->closing || conn_backlogged (c) ? 0 : EPOLLIN)
                  | (on ? EPOLLOUT : 0),
        .data.ptr = c,
    };
    (void) epoll_ctl (a->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Flush what is queued; returns -1 if the connection was closed. */
static int conn_flush (struct agent *a, struct conn *c)
{
    tier_error_t error;
    size_t queued = tier_msgwriter_bytes (&c->wr);
    int rc = tier_msgwriter_flush (&c->wr, c->fd, &error);

    if (rc >= 0 && tier_msgwriter_bytes (&c->wr) < queued)
        c->last_ms = tier_now_ms ();   /* the client reads: activity */
    if (rc < 0) {
        tier_log (LOG_DEBUG, "client pid %d: %s", (int) c->cred.pid,
                  error.text);
        conn_close (a, c);
        return -1;
    }
    if (rc == 1 && c->closing) {
        conn_close (a, c);
        return -1;
    }
    conn_want_write (a, c, rc == 0);
    return 0;
}

static void conn_reply (struct agent *a, struct conn *c, uint32_t id,
                        char *body)
{
    int fd = c->reply_fd;

    c->reply_fd = -1;
    if (!body
        || tier_msgwriter_queue (&c->wr, TIER_MSG_RESPONSE, id, body,
                                 strlen (body), fd >= 0 ? &fd : NULL, fd >= 0)
               < 0)
        c->closing = true;              /* out of memory: give up on it */
    free (body);
    if (fd >= 0)
        close (fd);
}

/* A framing error: reply once, then close after the reply is out. */
static void conn_fail (struct agent *a, struct conn *c, int errnum,
                       const char *text)
{
    tier_log (LOG_INFO, "client pid %d uid %d: %s", (int) c->cred.pid,
              (int) c->cred.uid, text);
    conn_reply (a, c, 0, rpc_error_body (errnum, "%s", text));
    c->closing = true;
}

/* Descriptors come only with a connection's first request (the
 * interposer's and tierctl's way), and not from a user whose earlier
 * ones are still being closed (rxfd.c): other reads have no room for
 * them, and the kernel drops them unopened. */
static void conn_fds_allowed (struct conn *c)
{
    if (c->rd.hdr_got == 0 && c->rd.nfds == 0)
        c->rd.no_fds = c->spoke || rxfd_busy (c->cred.uid);
}

static void conn_read (struct agent *a, struct conn *c)
{
    tier_error_t error;
    int rc;

    for (int n = 0; n < 16 && !c->closing && !conn_backlogged (c); n++) {
        conn_fds_allowed (c);
        rc = tier_msgreader_read (&c->rd, c->fd, &error);
        c->last_ms = tier_now_ms ();
        if (rc == 0) {
            /* need more: start the whole-message clock if a message began */
            if (c->rd.hdr_got > 0) {
                if (!c->partial_ms)
                    c->partial_ms = c->last_ms;
            }
            break;
        }
        if (rc < 0) {
            if (errno == ENODATA || errno == ECONNRESET) {
                conn_close (a, c);
                return;
            }
            conn_fail (a, c, errno, error.text);
            break;
        }
        c->partial_ms = 0;
        c->spoke = true;
        {
            const struct tier_msghdr *h = tier_msgreader_hdr (&c->rd);
            int fds[TIER_MSG_FDS_MAX];
            int nfds = tier_msgreader_take_fds (&c->rd, fds);
            size_t len = h->len;
            char *body = tier_msgreader_take_body (&c->rd);
            uint32_t id = h->id;
            bool deferred = false;
            char *reply;

            if (h->version != TIER_PROTO_VERSION) {
                reply = rpc_error_body (EPROTO, "protocol version %u is not "
                                        "supported by tierd %s (it speaks "
                                        "version %d)", (unsigned) h->version,
                                        PACKAGE_VERSION, TIER_PROTO_VERSION);
                c->closing = true;
            }
            else if (h->type != TIER_MSG_REQUEST)
                reply = rpc_error_body (EPROTO, "expected a request");
            else {
                c->req_id = id;
                reply = rpc_handle (a, c, body ? body : "", len, fds, nfds,
                                    &deferred);
            }
            for (int i = 0; i < nfds; i++)
                rxfd_drop (c->cred.uid, fds[i]); /* those not taken */
            free (body);
            tier_msgreader_reset (&c->rd);
            if (!deferred)
                conn_reply (a, c, id, reply);
        }
    }
    (void) conn_flush (a, c);
}

/* A received descriptor the reader gives up (a message cut short, too
 * many of them, one refused): to a closer thread. */
static void conn_drop_fd (int fd, void *arg)
{
    const struct conn *c = arg;

    rxfd_drop (c->cred.uid, fd);
}

/* Each received descriptor as it arrives: one on a user's mount is
 * refused (and dropped) before anything else can touch it. */
static int conn_check_fd (int fd, void *arg, tier_error_t *error)
{
    const struct conn *c = arg;

    return rxfd_check (c->cred.pid, fd, error);
}

void server_reply (struct agent *a, struct conn *c, uint32_t id, char *body)
{
    server_reply_fd (a, c, id, body, -1);
}

void server_reply_fd (struct agent *a, struct conn *c, uint32_t id, char *body,
                      int fd)
{
    if (c->reply_fd >= 0)
        close (c->reply_fd);
    c->reply_fd = fd;
    conn_reply (a, c, id, body);
    (void) conn_flush (a, c);
}

struct conn *server_conn_add (struct agent *a, int fd,
                              const struct ucred *cred)
{
    struct epoll_event ev = { .events = EPOLLIN };
    struct conn *c;

    if (!(c = calloc (1, sizeof (*c))))
        return NULL;
    c->fd = fd;
    c->reply_fd = -1;
    c->cred = *cred;
    tier_msgreader_init (&c->rd, TIER_MSG_MAX);
    c->rd.drop_fd = conn_drop_fd;
    c->rd.check_fd = conn_check_fd;
    c->rd.drop_arg = c;
    c->accepted_ms = c->last_ms = tier_now_ms ();
    c->next = a->conns;
    if (a->conns)
        a->conns->prev = c;
    a->conns = c;
    a->nconns++;
    ev.data.ptr = c;
    if (epoll_ctl (a->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        tier_log_error ("epoll_ctl");
        c->fd = -1;                     /* the caller still owns fd */
        conn_close (a, c);
        errno = EIO;
        return NULL;
    }
    return c;
}

void server_conn_close (struct agent *a, struct conn *c)
{
    conn_close (a, c);
}

/* The user who holds the most of the pool's connections (not root's,
 * SlurmUser's or those closing), and how many. */
static int conn_heaviest (struct agent *a, uid_t *top)
{
    static struct {
        uid_t uid;
        int n;
    } t[2 * AGENT_CONNS_MAX];
    int max = 0;

    memset (t, 0, sizeof (t));
    for (struct conn *c = a->conns; c; c = c->next) {
        size_t i = c->cred.uid % (2 * AGENT_CONNS_MAX);
        if (c->closing || agent_privileged (a, c->cred.uid))
            continue;
        while (t[i].n && t[i].uid != c->cred.uid)
            i = (i + 1) % (2 * AGENT_CONNS_MAX);
        t[i].uid = c->cred.uid;
        if (++t[i].n > max) {
            max = t[i].n;
            *top = c->cred.uid;
        }
    }
    return max;
}

/* The user pool is full and uid holds mine of it: make room by closing
 * the idlest connection of the user who holds the most -- one that sent
 * nothing yet, else the one idle the longest, never one with a request
 * under way -- if that user holds at least two more than uid.  So users
 * who hold many connections share the pool with one who comes, and
 * nobody fills it for the others.  True if one was closed. */
static bool conn_make_room (struct agent *a, uid_t uid, int mine)
{
    static int64_t last_ms;
    static unsigned long quiet;
    struct conn *v = NULL;
    uid_t top = 0;
    int max = conn_heaviest (a, &top);
    int64_t now = tier_now_ms ();
    tier_error_t error;

    if (max < mine + 2 || top == uid)
        return false;
    for (struct conn *c = a->conns; c; c = c->next)
        if (c->cred.uid == top && !c->closing && !c->waiting && !c->partial_ms
            && tier_msgwriter_bytes (&c->wr) == 0
            && (!v || (v->spoke && !c->spoke)
                || (v->spoke == c->spoke && c->last_ms < v->last_ms)))
            v = c;
    if (!v)
        return false;
    if (now - last_ms >= 1000) {
        tier_log (LOG_WARNING,
                  "closed a connection of uid %d (%d of the user "
                  "connections) to make room for uid %d (%lu more since the "
                  "last message)",
                  (int) top, max, (int) uid, quiet);
        last_ms = now;
        quiet = 0;
    }
    else
        quiet++;
    conn_reply (a, v, 0,
                rpc_error_body (EAGAIN,
                                "closed to make room for "
                                "another user: uid %d holds %d of "
                                "the user connections to tierd on "
                                "node %s",
                                (int) top, max, a->node));
    (void) tier_msgwriter_flush (&v->wr, v->fd, &error);
    conn_close (a, v);
    return true;
}

/* Whether a client of uid may have one more connection; if not, why. */
static bool conn_admit (struct agent *a, uid_t uid, char *why, size_t size)
{
    int users = 0, mine = 0;

    if (a->nconns >= AGENT_CONNS_MAX) {
        (void) snprintf (why, size, "tierd on node %s serves %d connections "
                         "already", a->node, a->nconns);
        return false;
    }
    if (agent_privileged (a, uid))
        return true;
    for (struct conn *c = a->conns; c; c = c->next) {
        if (!agent_privileged (a, c->cred.uid))
            users++;
        if (c->cred.uid == uid)
            mine++;
    }
    if (mine >= (int) a->conf->clients_per_user) {
        (void) snprintf (why, size, "uid %d has %d connections to tierd on "
                         "node %s already (ClientsPerUser)", (int) uid, mine,
                         a->node);
        return false;
    }
    if (users >= AGENT_CONNS_MAX - AGENT_CONNS_RESERVED
        && !conn_make_room (a, uid, mine)) {
        (void) snprintf (why, size, "tierd on node %s serves %d user "
                         "connections already (the rest are kept for root "
                         "and SlurmUser)", a->node, users);
        return false;
    }
    return true;
}

/* A refused connection: one error reply (if the socket takes it at once),
 * then close.  Logged at most once a second, with how many were refused.
 */
static void conn_refuse (int fd, const struct ucred *cred, const char *why)
{
    static int64_t last_ms;
    static unsigned long quiet;
    struct tier_msgwriter w;
    tier_error_t error;
    char *body = rpc_error_body (EAGAIN, "%s", why);
    int64_t now = tier_now_ms ();

    if (now - last_ms >= 1000) {
        tier_log (LOG_WARNING, "client pid %d uid %d refused: %s "
                  "(%lu more refused since the last message)",
                  (int) cred->pid, (int) cred->uid, why, quiet);
        last_ms = now;
        quiet = 0;
    }
    else
        quiet++;
    tier_msgwriter_init (&w);
    if (body && tier_msgwriter_queue (&w, TIER_MSG_RESPONSE, 0, body,
                                      strlen (body), NULL, 0) == 0)
        (void) tier_msgwriter_flush (&w, fd, &error);
    tier_msgwriter_fini (&w);
    free (body);
    close (fd);
}

/* Out of descriptors: stop accepting until the next timer tick (the
 * listener would wake the loop at once, again and again).
 */
static void accept_pause (struct agent *a, int errnum, bool pause)
{
    struct epoll_event ev = { .events = pause ? 0 : EPOLLIN,
                              .data.u64 = EV_LISTEN };

    if (pause)
        tier_log (LOG_WARNING, "accept: %s; not accepting for a second",
                  strerror (errnum));
    if (epoll_ctl (a->epfd, EPOLL_CTL_MOD, a->lfd, &ev) == 0)
        a->accept_paused = pause;
}

static void do_accept (struct agent *a)
{
    for (int n = 0; n < 64; n++) {
        struct conn *c;
        struct ucred cred;
        socklen_t len = sizeof (cred);
        char why[256];
        int fd = accept4 (a->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS
                || errno == ENOMEM)
                accept_pause (a, errno, true);
            else if (errno != EAGAIN && errno != EINTR
                     && errno != ECONNABORTED)
                tier_log_error ("accept");
            return;
        }
        if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
            tier_log_error ("SO_PEERCRED");
            close (fd);
            continue;
        }
        if (!conn_admit (a, cred.uid, why, sizeof (why))) {
            conn_refuse (fd, &cred, why);
            continue;
        }
        if (!(c = server_conn_add (a, fd, &cred)))
            conn_refuse (fd, &cred, "out of memory");
    }
}

/* Stagers, fetchers, migrators, publishers and other children that
 * ended (on SIGCHLD, and every second in case one was missed). */
static void reap_children (struct agent *a)
{
    pid_t pid;
    int status;

    while ((pid = waitpid (-1, &status, WNOHANG | WUNTRACED)) > 0)
        if (WIFSTOPPED (status))
            (void) child_stopped (a, pid, WSTOPSIG (status));
        else
            (void) child_reaped (a, pid, status);
}

static void do_signal (struct agent *a)
{
    struct signalfd_siginfo si;

    while (read (a->sigfd, &si, sizeof (si)) == sizeof (si)) {
        if (si.ssi_signo == SIGCHLD)
            reap_children (a);
        else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            tier_log (LOG_NOTICE, "signal %d: stopping", (int) si.ssi_signo);
            a->stop = true;
        }
        else if (si.ssi_signo == SIGHUP) {
            struct tier_conf *conf = tier_conf_create (a->node);
            tier_error_t error;

            /* parse everything first, then apply (or keep the old) */
            if (!conf || tier_conf_load (conf, a->conf_path, true,
                                         &error) < 0) {
                tier_log (LOG_ERR, "reload: %s; keeping the old "
                          "configuration", conf ? error.text : "no memory");
                tier_conf_destroy (conf);
                continue;
            }
            tier_log_set_level (conf->log_level);
            (void) tier_log_reopen ();
            tier_conf_destroy (a->conf);
            a->conf = conf;
            a->slurm_uid = agent_slurm_uid (conf);
            tier_log (LOG_NOTICE, "reloaded %s", a->conf_path);
        }
    }
}

static void do_timer (struct agent *a)
{
    uint64_t ticks;
    int64_t now = tier_now_ms ();
    struct conn *c, *next;

    while (read (a->timerfd, &ticks, sizeof (ticks)) == sizeof (ticks))
        ;
    reap_children (a);
    if (a->accept_paused)
        accept_pause (a, 0, false);
    for (c = a->conns; c; c = next) {
        next = c->next;
        if (c->closing) {
            /* its last replies have not moved for a while: the client
             * does not read them */
            if (now - c->last_ms > AGENT_MSG_TIMEOUT_MS)
                conn_close (a, c);
        }
        else if (!c->spoke && !c->waiting
                 && now - c->accepted_ms > AGENT_FIRST_TIMEOUT_MS) {
            conn_fail (a, c, ETIMEDOUT, c->partial_ms
                       ? "a message did not arrive whole within 5 s"
                       : "no whole request within 5 s of connecting");
            (void) conn_flush (a, c);
        }
        else if (c->partial_ms && now - c->partial_ms > AGENT_MSG_TIMEOUT_MS) {
            conn_fail (a, c, ETIMEDOUT, "a message did not arrive whole "
                       "within 5 s");
            (void) conn_flush (a, c);
        }
        else if (now - c->last_ms > AGENT_IDLE_TIMEOUT_MS && !c->waiting)
            conn_close (a, c);
    }
    if (now - a->last_reclaim_ms >= AGENT_RECLAIM_MS) {
        (void) jobs_reclaim (a);
        jobs_sample (a);
        a->last_reclaim_ms = now;
    }
    child_tick (a);
    stats_tick (a, false);
    replica_tick (a);
    migrate_tick (a);
    streams_tick (a);
    bcache_tick (a);
    if (now - a->last_flush_ms >= AGENT_FLUSH_MS) {
        (void) ctr_flush (a);
        (void) replica_flush (a);
        a->last_flush_ms = now;
    }
}

int server_run (struct agent *a)
{
    struct epoll_event evs[64];

    while (!a->stop) {
        int n = epoll_wait (a->epfd, evs, 64, -1);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            tier_log_error ("epoll_wait");
            return -1;
        }
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == EV_LISTEN)
                do_accept (a);
            else if (tag == EV_SIGNAL)
                do_signal (a);
            else if (tag == EV_TIMER)
                do_timer (a);
            else if (tag == EV_RECON) {
                (void) jobs_reconcile_finish (a);
                (void) jobs_reclaim (a);
            }
            else if (tag >= EV_WATCH0 && tag < EV_WATCH0 + WATCH_MAX)
                watches[tag - EV_WATCH0].fn (a);
            else if (tag >= AGENT_EV_CHILD0
                     && tag < AGENT_EV_CHILD0 + CHILD_MAX)
                child_event (a, (int) (tag - AGENT_EV_CHILD0), evs[i].events);
            else if (tag >= AGENT_EV_STREAM0
                     && tag < AGENT_EV_STREAM0 + AGENT_STREAMS_MAX)
                streams_event (a, (int) (tag - AGENT_EV_STREAM0));
            else {
                struct conn *c = evs[i].data.ptr;
                bool alive = false;
                /* the connection may have been closed by an earlier event
                 * of this batch: only touch it if it is still listed */
                for (struct conn *x = a->conns; x; x = x->next)
                    if (x == c) {
                        alive = true;
                        break;
                    }
                if (!alive)
                    continue;
                if (evs[i].events & (EPOLLERR | EPOLLHUP)
                    && !(evs[i].events & EPOLLIN)) {
                    conn_close (a, c);
                    continue;
                }
                if (evs[i].events & EPOLLOUT) {
                    if (conn_flush (a, c) < 0)
                        continue;
                }
                if (evs[i].events & EPOLLIN)
                    conn_read (a, c);
            }
        }
    }
    (void) ctr_flush (a);
    (void) replica_flush (a);
    return 0;
}
