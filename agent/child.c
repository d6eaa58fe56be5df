/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* child.c - the one way tierd starts a process (see child.h)
 *
 * Owns the table of running children and their channels, and the table
 * of abandoned ones (killed, but stuck in the kernel: reaped whenever
 * they end); calls nothing of the agent but its loop's epoll descriptor
 * (agent.h).
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/usercg.h"
#include "agent.h"
#include "child.h"

#define READ_BURST 64                   /* messages read per event */
#define WQUEUE_MAX (CHMSG_MAX * 4)
/* A child killed this long ago and not reaped is stuck in the kernel (a
 * file system request that is never answered: D state, where SIGKILL
 * waits for the answer) and is abandoned. */
#define ABANDON_AFTER_MS 1000

struct child {
    struct child_spec spec;
    struct agent *a;
    pid_t pid;
    int fd;                             /* the agent's end, or -1 */
    int slot;
    bool want_out;
    int why;
    int pidfd; /* or -1 */
    bool abandoned;
    bool held; /* child_hold: no stall counted */
    uid_t uid; /* whose credentials it runs with (0: root) */
    int64_t started_ms, last_ms, killed_ms;
    struct tier_msgreader rd;
    struct tier_msgwriter wr;
};

static struct child *slots[CHILD_MAX];
static int nchildren;

/* Abandoned children, oldest first: only their pid and name are kept,
 * until they are reaped (child_reaped) or, past CHILD_ABANDONED_MAX,
 * forgotten (the loop's waitpid (-1) still reaps them). */
struct gone {
    pid_t pid;
    int pidfd;
    uid_t uid;
    char name[CHILD_NAME_MAX + 1];
    int64_t since_ms;
};
static struct gone gone[CHILD_ABANDONED_MAX];
static int ngone;
static char *title_area;
static size_t title_len;

/* ------------------------------------------------------ in the child */

void child_title_init (int argc, char **argv)
{
    char *end;

    if (argc < 1 || !argv[0])
        return;
    end = argv[0] + strlen (argv[0]);
    for (int i = 1; i < argc && argv[i] == end + 1; i++)
        end = argv[i] + strlen (argv[i]);
    title_area = argv[0];
    title_len = (size_t) (end - argv[0]);
}

static void set_title (const struct child_spec *s)
{
    const char *t = s->title[0] ? s->title : s->name;

    (void) prctl (PR_SET_NAME, s->name, 0, 0, 0);
    if (title_area && title_len > 0) {
        memset (title_area, 0, title_len + 1);
        (void) snprintf (title_area, title_len + 1, "%s", t);
    }
}

/* The user cgroups children join (lib/usercg.h): found at start. */
static struct tier_usercg usercg;

int child_usercg_init (const struct tier_conf *conf)
{
    char why[1024], list[1024] = "";
    size_t used = 0;

    if (tier_usercg_find (&usercg, conf, true, why, sizeof (why)) == 0
        && !why[0]) {
        tier_log (LOG_INFO, "user cgroups: %s",
                  conf->user_cgroup_dir[0] ? "no cgroup hierarchy to use"
                                           : "off (UserCgroupDir is empty)");
        return 0;
    }
    if (why[0])
        tier_log (LOG_WARNING, "user cgroups: %s", why);
    tier_usercg_sweep (&usercg);
    for (int i = 0; i < usercg.ntrees && used < sizeof (list); i++)
        used += (size_t) snprintf (list + used, sizeof (list) - used, "%s%s",
                                   i ? ", " : "", usercg.trees[i].base);
    if (usercg.ntrees)
        tier_log (LOG_INFO,
                  "the work done for a user is charged to their cgroup "
                  "uid_UID in %s (%u tasks, memory %s)",
                  list, usercg.tasks_limit,
                  usercg.mem_limit ? "limited" : "not limited");
    return usercg.ntrees;
}

static int cmp_int (const void *x, const void *y)
{
    return *(const int *) x - *(const int *) y;
}

/* Close every descriptor from 3 up but those in keep[]. */
static void close_all_but (const int *keep, int n)
{
    int sorted[CHILD_KEEP_MAX + 2];
    unsigned from = 3;

    memcpy (sorted, keep, (size_t) n * sizeof (int));
    qsort (sorted, (size_t) n, sizeof (int), cmp_int);
    for (int i = 0; i < n; i++) {
        if (sorted[i] < (int) from)
            continue;
        if ((unsigned) sorted[i] > from)
            (void) syscall (SYS_close_range, from, (unsigned) sorted[i] - 1,
                            0U);
        from = (unsigned) sorted[i] + 1;
    }
    (void) syscall (SYS_close_range, from, ~0U, 0U);
}

static void reset_signals (void)
{
    struct sigaction sa;
    sigset_t none;

    memset (&sa, 0, sizeof (sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            (void) sigaction (s, &sa, NULL);
    (void) signal (SIGPIPE, SIG_IGN);
    sigemptyset (&none);
    (void) sigprocmask (SIG_SETMASK, &none, NULL);
}

static void __attribute__ ((noreturn))
child_run (const struct child_spec *s, int chan, pid_t parent)
{
    int keep[CHILD_KEEP_MAX + 2];
    int n = 0;

    reset_signals ();
    for (int i = 0; i < s->nkeep && i < CHILD_KEEP_MAX; i++)
        if (s->keep[i] >= 0)
            keep[n++] = s->keep[i];
    keep[n++] = chan;
    if ((keep[n] = tier_log_child_fd ()) >= 0)
        n++; /* children log too */
    close_all_but (keep, n);
    if (s->own_pgrp)
        (void) setpgid (0, 0);
    set_title (s);
    /* dies with its parent, even before the drop */
    if (!s->outlive) {
        (void) prctl (PR_SET_PDEATHSIG, SIGKILL);
        if (getppid () != parent)
            _exit (0);
    }
    if (s->for_uid || (s->cred && s->cred->uid))
        (void) tier_usercg_join (&usercg,
                                 s->for_uid ? s->for_uid : s->cred->uid);
    if (s->as_root && s->as_root (s->arg) < 0)
        _exit (CHILD_EXIT_SETUP);
    if (s->cred && tier_cred_drop (s->cred, s->mode) < 0) {
        int e = errno;
        (void) dprintf (2, "%s: cannot take uid %u: %s\n", s->name,
                        (unsigned) s->cred->uid, strerror (e));
        _exit (CHILD_EXIT_SETUP);
    }
    /* the kernel cleared the parent-death signal with the credentials */
    if (!s->outlive) {
        (void) prctl (PR_SET_PDEATHSIG, SIGKILL);
        if (getppid () != parent)
            _exit (0);
    }
    _exit (s->main ? s->main (s->arg, chan) : 0);
}

pid_t child_spawn (const struct child_spec *spec, int *chan,
                   tier_error_t *error)
{
    pid_t parent = getpid ();
    int sv[2];
    pid_t pid;

    if (!spec->name || strlen (spec->name) > CHILD_NAME_MAX
        || spec->nkeep < 0 || spec->nkeep > CHILD_KEEP_MAX) {
        errno = EINVAL;
        return tier_errprintf (error, "child %s: bad spec",
                               spec->name ? spec->name : "?");
    }
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return tier_errprintf (error, "%s: socketpair: %s", spec->name,
                               strerror (errno));
    if ((pid = fork ()) < 0) {
        int e = errno;
        close (sv[0]);
        close (sv[1]);
        errno = e;
        return tier_errprintf (error, "%s: fork: %s", spec->name,
                               strerror (e));
    }
    if (pid == 0) {
        close (sv[0]);
        child_run (spec, sv[1], parent);
    }
    close (sv[1]);
    *chan = sv[0];
    return pid;
}

/* ------------------------------------------------------ in the agent */

static void watch_out (struct child *c, bool on)
{
    struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0),
                              .data.u64 = AGENT_EV_CHILD0
                                          + (uint64_t) c->slot };

    if (c->fd >= 0 && c->want_out != on
        && epoll_ctl (c->a->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->want_out = on;
}

static void channel_close (struct child *c)
{
    if (c->fd < 0)
        return;
    (void) epoll_ctl (c->a->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close (c->fd);
    c->fd = -1;
    tier_msgreader_fini (&c->rd);
    tier_msgwriter_fini (&c->wr);
}

/* 0 if a child may start: fewer than CHILD_ABANDONED_MAX children stuck
 * in the kernel, and fewer than CHILD_ABANDONED_PER_UID of uid's -- one
 * user whose file system never answers (a FUSE mount of their own) must
 * not leave others none. */
static int stuck_check (const struct child_spec *s, uid_t uid,
                        tier_error_t *error)
{
    int mine = 0;

    for (int i = 0; i < ngone; i++)
        mine += gone[i].uid == uid;
    if (ngone < CHILD_ABANDONED_MAX
        && (uid == 0 || mine < CHILD_ABANDONED_PER_UID))
        return 0;
    errno = EAGAIN;
    if (ngone >= CHILD_ABANDONED_MAX)
        return tier_errprintf (error,
                               "%s: %d children are stuck in the kernel "
                               "already (a file system that does not "
                               "answer): no more until some of them end",
                               s->name, ngone);
    return tier_errprintf (error,
                           "%s: %d children of uid %d are stuck in the "
                           "kernel already (a file system of its that does "
                           "not answer): none more of its until some end",
                           s->name, mine, (int) uid);
}

static struct child *child_new (struct agent *a, const struct child_spec *s,
                                tier_error_t *error)
{
    uid_t uid = s->cred ? s->cred->uid : 0;
    struct child *c;
    int slot = -1;

    if (stuck_check (s, uid, error) < 0)
        return NULL;
    for (int i = 0; i < CHILD_MAX && slot < 0; i++)
        if (!slots[i])
            slot = i;
    if (slot < 0) {
        errno = EAGAIN;
        tier_errprintf (error, "%s: %d children already", s->name, CHILD_MAX);
        return NULL;
    }
    if (!(c = calloc (1, sizeof (*c)))) {
        tier_errprintf (error, "%s: out of memory", s->name);
        return NULL;
    }
    c->spec = *s;
    c->a = a;
    c->uid = uid;
    c->slot = slot;
    c->fd = -1;
    c->pidfd = -1;
    tier_msgreader_init (&c->rd, CHMSG_MAX);
    tier_msgwriter_init (&c->wr);
    return c;
}

static void child_free (struct child *c)
{
    channel_close (c);
    if (c->pidfd >= 0)
        close (c->pidfd);
    slots[c->slot] = NULL;
    nchildren--;
    free (c);
}

static int child_fork (struct agent *a, struct child *c, tier_error_t *error)
{
    if ((c->pid = child_spawn (&c->spec, &c->fd, error)) < 0)
        return -1;
    (void) a;
    /* ours and not reaped: the pidfd is of this very process */
    c->pidfd = (int) syscall (SYS_pidfd_open, c->pid, 0);
    if (c->pidfd >= 0)
        (void) fcntl (c->pidfd, F_SETFD, FD_CLOEXEC);
    c->started_ms = c->last_ms = tier_now_ms ();
    slots[c->slot] = c;
    nchildren++;
    return 0;
}

/* Signal the child by its pidfd (a pid the agent reaped and the kernel
 * gave again is never hit), by its pid where there is none. */
static void signal_child (struct child *c, int sig)
{
    if (c->pidfd >= 0
        && syscall (SYS_pidfd_send_signal, c->pidfd, sig, NULL, 0) == 0)
        return;
    if (c->pidfd < 0 && c->pid > 0)
        (void) kill (c->pid, sig);
}

/* Killed by child.c (why: ETIMEDOUT, ESTALE, or ECANCELED: stopped). */
static void kill_for (struct child *c, int why)
{
    c->why = why;
    c->killed_ms = tier_now_ms ();
    signal_child (c, SIGKILL);
}

struct child *child_start (struct agent *a, const struct child_spec *spec,
                           tier_error_t *error)
{
    struct epoll_event ev = { .events = EPOLLIN };
    static bool subreaper;
    struct child *c;

    /* a child's children that outlive it (a stager's copier it
     * abandoned) are reaped here too, not by init */
    if (!subreaper)
        subreaper = prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
    if (!(c = child_new (a, spec, error)))
        return NULL;
    if (child_fork (a, c, error) < 0) {
        free (c);
        return NULL;
    }
    ev.data.u64 = AGENT_EV_CHILD0 + (uint64_t) c->slot;
    if (fcntl (c->fd, F_SETFL, O_NONBLOCK) < 0
        || epoll_ctl (a->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        /* no channel: it runs, and is reaped, without one */
        tier_log_error ("%s %d: its channel cannot be watched",
                        spec->name, (int) c->pid);
        close (c->fd);
        c->fd = -1;
    }
    return c;
}

/* One whole message from the reader: decode it and hand it over. */
static void dispatch (struct child *c)
{
    const struct tier_msghdr *h = tier_msgreader_hdr (&c->rd);
    int fds[TIER_MSG_FDS_MAX], nfds = tier_msgreader_take_fds (&c->rd, fds);
    tier_error_t err;
    json_t *body = NULL;
    int type;

    c->last_ms = tier_now_ms ();
    if (h->type != TIER_MSG_RESPONSE || h->version != TIER_PROTO_VERSION
        || !c->spec.proto
        || chmsg_decode (c->spec.proto, tier_msgreader_body (&c->rd), h->len,
                         &type, &body, &err) < 0) {
        tier_log (LOG_WARNING, "%s %d: a message it sent is refused: %s",
                  c->spec.name, (int) c->pid,
                  h->type != TIER_MSG_RESPONSE ? "not a response"
                  : !c->spec.proto ? "it has no channel" : err.text);
    }
    else if (c->spec.on_msg)
        c->spec.on_msg (c->a, c, type, body, fds, nfds, c->spec.owner);
    else
        json_decref (body);
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0)
            close (fds[i]);
}

/* Read what the channel holds (at most READ_BURST messages, unless all
 * is wanted: the child has exited). */
static void read_channel (struct child *c, bool all)
{
    tier_error_t err;

    for (int n = 0; c->fd >= 0 && (all || n < READ_BURST); n++) {
        int r = tier_msgreader_read (&c->rd, c->fd, &err);
        if (r == 0)
            return;
        if (r < 0) {
            if (errno != ENODATA && errno != ECONNRESET)
                tier_log (LOG_WARNING, "%s %d: its channel: %s",
                          c->spec.name, (int) c->pid, err.text);
            channel_close (c);
            return;
        }
        dispatch (c);
        if (c->fd >= 0)
            tier_msgreader_reset (&c->rd);
    }
}

void child_event (struct agent *a, int slot, uint32_t events)
{
    struct child *c;

    (void) a;
    if (slot < 0 || slot >= CHILD_MAX || !(c = slots[slot]))
        return;
    if ((events & EPOLLOUT) && c->fd >= 0) {
        int r = tier_msgwriter_flush (&c->wr, c->fd, NULL);
        if (r < 0)
            channel_close (c);
        else if (r == 1)
            watch_out (c, false);
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        read_channel (c, false);
}

/* An abandoned child ended at last: forget it. */
static bool gone_reaped (pid_t pid, int status)
{
    for (int i = 0; i < ngone; i++) {
        if (gone[i].pid != pid)
            continue;
        tier_log (LOG_NOTICE,
                  "%s %d, abandoned %lld s ago, ended at last "
                  "(status %d)",
                  gone[i].name, (int) pid,
                  (long long) ((tier_now_ms () - gone[i].since_ms) / 1000),
                  status);
        if (gone[i].pidfd >= 0)
            close (gone[i].pidfd);
        memmove (&gone[i], &gone[i + 1],
                 (size_t) (ngone - i - 1) * sizeof (gone[0]));
        ngone--;
        return true;
    }
    return false;
}

bool child_reaped (struct agent *a, pid_t pid, int status)
{
    struct child *c = NULL;

    (void) a;
    for (int i = 0; i < CHILD_MAX && !c; i++)
        if (slots[i] && slots[i]->pid == pid)
            c = slots[i];
    if (!c)
        return gone_reaped (pid, status);
    /* what it sent before it exited comes first */
    read_channel (c, true);
    channel_close (c);
    if (c->spec.on_done)
        c->spec.on_done (c->a, c, status, c->spec.owner);
    child_free (c);
    return true;
}

bool child_stopped (struct agent *a, pid_t pid, int sig)
{
    (void) a;
    for (int i = 0; i < CHILD_MAX; i++) {
        struct child *c = slots[i];
        if (!c || c->pid != pid)
            continue;
        if (!c->killed_ms) {
            tier_log (LOG_WARNING,
                      "%s %d was stopped (signal %d, from "
                      "outside); killed",
                      c->spec.name, (int) pid, sig);
            kill_for (c, ECANCELED);
        }
        return true;
    }
    return false;
}

/* Keep the pid of c, which does not end, in gone[] (the oldest is
 * forgotten when it is full). */
static void gone_add (struct child *c, int64_t now)
{
    if (ngone == CHILD_ABANDONED_MAX) {
        if (gone[0].pidfd >= 0)
            close (gone[0].pidfd);
        memmove (&gone[0], &gone[1], (size_t) (ngone - 1) * sizeof (gone[0]));
        ngone--;
    }
    gone[ngone].pid = c->pid;
    gone[ngone].pidfd = c->pidfd;
    gone[ngone].uid = c->uid;
    (void) snprintf (gone[ngone].name, sizeof (gone[ngone].name), "%s",
                     c->spec.name);
    gone[ngone].since_ms = now;
    ngone++;
    c->pidfd = -1;
}

/* c was killed and has not ended: it sleeps in the kernel, where even
 * SIGKILL waits (a request of a file system that does not answer).  Its
 * owner hears of it now, as if it had been reaped killed; the agent never
 * waits for it, and its slot is free. */
static void abandon (struct child *c, int64_t now)
{
    tier_log (LOG_WARNING,
              "%s %d: killed %lld ms ago and still there (stuck "
              "in the kernel: a file system that does not answer?): "
              "abandoned, reaped whenever it ends",
              c->spec.name, (int) c->pid, (long long) (now - c->killed_ms));
    c->abandoned = true;
    read_channel (c, false); /* what it sent before */
    channel_close (c);
    if (c->spec.on_done)
        c->spec.on_done (c->a, c, SIGKILL, c->spec.owner);
    gone_add (c, now);
    child_free (c);
}

void child_tick (struct agent *a)
{
    int64_t now = tier_now_ms ();

    (void) a;
    for (int i = 0; i < CHILD_MAX; i++) {
        struct child *c = slots[i];
        if (!c)
            continue;
        if (c->killed_ms && now - c->killed_ms >= ABANDON_AFTER_MS) {
            abandon (c, now);
            continue;
        }
        if (c->why)
            continue;
        if (c->spec.deadline_ms > 0
            && now - c->started_ms > c->spec.deadline_ms)
            kill_for (c, ETIMEDOUT);
        else if (c->spec.stall_ms > 0 && !c->held
                 && now - c->last_ms > c->spec.stall_ms)
            kill_for (c, ESTALE);
        if (c->why)
            tier_log (LOG_WARNING, "%s %d: %s; killed", c->spec.name,
                      (int) c->pid,
                      c->why == ETIMEDOUT ? "past its deadline"
                                          : "no progress");
    }
}

void child_hold (struct child *c, bool on)
{
    c->held = on;
    c->last_ms = tier_now_ms ();
}

int child_send (struct child *c, int type, json_t *body, const int *fds,
                int nfds)
{
    char *text;
    int r;

    if (c->fd < 0) {
        json_decref (body);
        errno = EPIPE;
        return -1;
    }
    if (tier_msgwriter_bytes (&c->wr) > WQUEUE_MAX) {
        json_decref (body);
        errno = ENOBUFS;
        return -1;
    }
    if (!c->spec.proto || !(text = chmsg_encode (c->spec.proto, type, body)))
        return -1;
    r = tier_msgwriter_queue (&c->wr, TIER_MSG_REQUEST, 0, text,
                              (uint32_t) strlen (text), fds, nfds);
    free (text);
    if (r < 0)
        return -1;
    if ((r = tier_msgwriter_flush (&c->wr, c->fd, NULL)) < 0) {
        channel_close (c);
        errno = EPIPE;
        return -1;
    }
    watch_out (c, r == 0);
    return 0;
}

/* child_ask's: who hears the answer, once. */
struct ask {
    child_answer_f done;
    void *arg;
    bool answered;
    int timeout_ms;
};

static void ask_msg (struct agent *a, struct child *c, int type, json_t *body,
                     int *fds, int nfds, void *owner)
{
    struct ask *k = owner;
    int fd = -1;

    (void) c;
    if (k->answered) {
        json_decref (body);
        return;
    }
    if (nfds > 0) {
        fd = fds[0];
        fds[0] = -1;
    }
    k->answered = true;
    k->done (a, 0, type, body, fd, NULL, k->arg);
}

static void ask_done (struct agent *a, struct child *c, int status, void *owner)
{
    struct ask *k = owner;
    tier_error_t e;
    int why = child_why (c);

    if (!k->answered) {
        if (why == ETIMEDOUT)
            tier_errprintf (&e, "%s did not answer within %d s", c->spec.name,
                            k->timeout_ms / 1000);
        else if (why == ECANCELED)
            tier_errprintf (&e, "%s was stopped (and killed)", c->spec.name);
        else {
            why = ENODATA;
            tier_errprintf (&e, "%s exited without an answer (status %d)",
                            c->spec.name, status);
        }
        k->done (a, why, 0, NULL, -1, &e, k->arg);
    }
    free (k);
}

void child_ask (struct agent *a, const struct child_spec *spec, int timeout_ms,
                child_answer_f done, void *arg)
{
    struct child_spec s = *spec;
    struct ask *k = calloc (1, sizeof (*k));
    tier_error_t e;

    if (!k) {
        tier_errprintf (&e, "%s: out of memory", spec->name);
        done (a, ENOMEM, 0, NULL, -1, &e, arg);
        return;
    }
    k->done = done;
    k->arg = arg;
    k->timeout_ms = timeout_ms;
    s.on_msg = ask_msg;
    s.on_done = ask_done;
    s.owner = k;
    s.deadline_ms = timeout_ms;
    if (!child_start (a, &s, &e)) {
        int why = errno ? errno : EIO;
        free (k);
        done (a, why, 0, NULL, -1, &e, arg);
    }
}

pid_t child_pid (const struct child *c)
{
    return c->pid;
}

int child_why (const struct child *c)
{
    return c->why;
}

bool child_abandoned (const struct child *c)
{
    return c->abandoned;
}

void child_kill (struct child *c, int sig)
{
    if (sig == SIGKILL && !c->killed_ms)
        c->killed_ms = tier_now_ms (); /* abandoned if it does not end */
    signal_child (c, sig);
}

void child_orphan (struct child *c)
{
    c->spec.on_msg = NULL;
    c->spec.on_done = NULL;
    c->spec.owner = NULL;
}

int child_count (void)
{
    return nchildren;
}

int child_abandoned_count (void)
{
    return ngone;
}

int child_daemonize (void)
{
    pid_t pid;
    int fd;

    if ((pid = fork ()) < 0)
        return -1;
    if (pid > 0)
        _exit (0);
    (void) setsid ();
    if ((pid = fork ()) < 0)
        return -1;
    if (pid > 0)
        _exit (0);
    if ((fd = open ("/dev/null", O_RDWR)) >= 0) {
        (void) dup2 (fd, 0);
        (void) dup2 (fd, 1);
        (void) dup2 (fd, 2);
        if (fd > 2)
            close (fd);
    }
    return 0;
}
