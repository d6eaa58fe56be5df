/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_child.c - agent/child.c, the one way tierd starts a process: what
 * a child finds when its main runs (descriptors, name, title, signals,
 * parent-death signal, credentials), and the agent's side through a small
 * event loop of the test's own (messages in order and before on_done, the
 * deadline and the stall watchdog, abandoning a child that does not end
 * when killed), child_ask and child_send
 *
 * No assertion bounds a wall-clock time: a child is killed or not, and
 * for a reason; every wait has a safety bound (SAFETY_MS) so that a broken
 * child.c fails the test rather than hangs it.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/child.h"
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "agent/agent.h"

#define SAFETY_MS 10000
#define MAX_MSGS 256

/* ------------------------------------------------ the test's channel */

enum {
    TC_REPORT = 1,
    TC_SEQ,
    TC_ANSWER,
    TC_ECHO,
};

static const struct chmsg_type tc_types[] = {
    { TC_REPORT, "report" },
    { TC_SEQ, "seq" },
    { TC_ANSWER, "answer" },
    { TC_ECHO, "echo" },
};

static const struct chmsg_proto tc_proto = {
    .channel = "test child",
    .version = 1,
    .types = tc_types,
    .ntypes = (int) (sizeof (tc_types) / sizeof (tc_types[0])),
};

/* The test's argv[0] and the length of the title area (child.c's) */
static char *test_argv0;
static size_t title_area_len;

static void spec_init (struct child_spec *s, child_main_f main, void *arg)
{
    memset (s, 0, sizeof (*s));
    s->name = "tierd-test";
    s->proto = &tc_proto;
    s->main = main;
    s->arg = arg;
}

/* ------------------------------------------------ the children's mains */

/* What the child finds: its descriptors, name, parent-death signal,
 * signal mask and dispositions, title and ids. */
static int child_report (void *arg, int chan)
{
    json_t *fds = json_array ();
    json_t *groups = json_array ();
    char name[32] = "";
    int pdeath = -1;
    uid_t ru, eu, su;
    gid_t rg, eg, sg, gl[64];
    int ng;
    sigset_t mask;
    bool mask_empty = true;
    struct sigaction pipe_sa, usr2_sa, hup_sa;
    DIR *d;
    struct dirent *de;

    (void) arg;
    if ((d = opendir ("/proc/self/fd"))) {
        while ((de = readdir (d)))
            if (de->d_name[0] != '.' && atoi (de->d_name) != dirfd (d))
                json_array_append_new (fds, json_integer (atoi (de->d_name)));
        closedir (d);
    }
    (void) prctl (PR_GET_NAME, name, 0, 0, 0);
    (void) prctl (PR_GET_PDEATHSIG, &pdeath, 0, 0, 0);
    (void) sigprocmask (SIG_BLOCK, NULL, &mask);
    for (int s = 1; s < NSIG; s++)
        if (sigismember (&mask, s) == 1)
            mask_empty = false;
    (void) sigaction (SIGPIPE, NULL, &pipe_sa);
    (void) sigaction (SIGUSR2, NULL, &usr2_sa);
    (void) sigaction (SIGHUP, NULL, &hup_sa);
    (void) getresuid (&ru, &eu, &su);
    (void) getresgid (&rg, &eg, &sg);
    if ((ng = getgroups (64, gl)) > 0)
        for (int i = 0; i < ng; i++)
            json_array_append_new (groups, json_integer (gl[i]));
    if (chmsg_tell (chan, &tc_proto, TC_REPORT,
                    "{s:o, s:s, s:i, s:b, s:b, s:b, s:b, s:s,"
                    " s:[iii], s:[iii], s:o}",
                    "fds", fds, "name", name, "pdeath", pdeath, "mask_empty",
                    mask_empty, "pipe_ign", pipe_sa.sa_handler == SIG_IGN,
                    "usr2_dfl", usr2_sa.sa_handler == SIG_DFL, "hup_dfl",
                    hup_sa.sa_handler == SIG_DFL, "title", test_argv0, "uid",
                    (int) ru, (int) eu, (int) su, "gid", (int) rg, (int) eg,
                    (int) sg, "groups", groups)
        < 0)
        return 1;
    return 0;
}

static int child_sleep (void *arg, int chan)
{
    (void) arg;
    (void) chan;
    for (;;)
        (void) pause ();
    return 0;
}

/* Sends n messages {"i": k, "s": "message k"}, gap_ms apart; then sleeps
 * forever (stall) or exits with status. */
struct seq {
    int n, gap_ms, status;
    bool stall;
};

static int child_seq (void *arg, int chan)
{
    const struct seq *q = arg;
    char s[32];

    for (int k = 0; k < q->n; k++) {
        if (k > 0 && q->gap_ms > 0)
            (void) usleep ((useconds_t) q->gap_ms * 1000);
        (void) snprintf (s, sizeof (s), "message %d", k);
        if (chmsg_tell (chan, &tc_proto, TC_SEQ, "{s:i, s:s}", "i", k, "s", s)
            < 0)
            return 99;
    }
    if (q->stall)
        return child_sleep (NULL, chan);
    return q->status;
}

/* Answers once (or twice: the caller takes the first), with a descriptor
 * (a sealed memfd holding "payload"), and exits 0. */
static int child_answer (void *arg, int chan)
{
    int twice = arg ? *(const int *) arg : 0;
    int fd = chmsg_text_fd ("t", "payload", 7);
    json_t *body = json_pack ("{s:i, s:s}", "x", 42, "s", "hi");

    if (fd < 0 || !body
        || chmsg_send (chan, &tc_proto, true, TC_ANSWER, body, &fd, 1, 10000,
                       NULL)
               < 0)
        return 1;
    if (twice) /* the caller may have closed the channel already */
        (void) chmsg_tell (chan, &tc_proto, TC_SEQ, "{s:i}", "i", 2);
    return 0;
}

/* Writes its pid on the pipe *arg (kept), then never answers. */
static int child_pid_then_sleep (void *arg, int chan)
{
    pid_t me = getpid ();

    if (write (*(const int *) arg, &me, sizeof (me)) != sizeof (me))
        return 1;
    return child_sleep (NULL, chan);
}

static int child_exit3 (void *arg, int chan)
{
    (void) arg;
    (void) chan;
    return 3;
}

/* Echoes n messages (and their descriptors) back, then exits 0. */
static int child_echo (void *arg, int chan)
{
    int n = *(const int *) arg;

    for (int k = 0; k < n; k++) {
        int fds[2], nfds = 0, type;
        json_t *body;

        if (chmsg_recv (chan, &tc_proto, &type, &body, fds, &nfds, 2, SAFETY_MS,
                        NULL)
            < 0)
            return 1;
        if (chmsg_send (chan, &tc_proto, true, type, body, fds, nfds, SAFETY_MS,
                        NULL)
            < 0)
            return 1;
        for (int i = 0; i < nfds; i++)
            close (fds[i]);
    }
    return 0;
}

/* ------------------------------------------------ the agent's side */

struct rec {
    int nmsg;
    int types[MAX_MSGS];
    json_t *bodies[MAX_MSGS];
    char *texts[MAX_MSGS]; /* of a memfd beside the message, or NULL */
    bool done;
    int ndone;
    bool abandoned;
    int status;
    int why;
    int msgs_at_done;
};

static void rec_fini (struct rec *r)
{
    for (int i = 0; i < r->nmsg; i++) {
        json_decref (r->bodies[i]);
        free (r->texts[i]);
    }
}

static void on_msg (struct agent *a, struct child *c, int type, json_t *body,
                    int *fds, int nfds, void *owner)
{
    struct rec *r = owner;
    struct stat st;

    (void) a;
    (void) c;
    if (r->nmsg >= MAX_MSGS) {
        json_decref (body);
        return;
    }
    r->types[r->nmsg] = type;
    r->bodies[r->nmsg] = body;
    r->texts[r->nmsg] = NULL;
    if (nfds > 0 && fstat (fds[0], &st) == 0)
        (void) chmsg_text_read (fds[0], (uint64_t) st.st_size, 4096,
                                &r->texts[r->nmsg]);
    r->nmsg++;
}

static void on_done (struct agent *a, struct child *c, int status, void *owner)
{
    struct rec *r = owner;

    (void) a;
    r->done = true;
    r->ndone++;
    r->abandoned = child_abandoned (c);
    r->status = status;
    r->why = child_why (c);
    r->msgs_at_done = r->nmsg;
}

static void agent_init (struct agent *a)
{
    memset (a, 0, sizeof (*a));
    a->epfd = epoll_create1 (EPOLL_CLOEXEC);
    assert_true (a->epfd >= 0);
}

static void agent_fini (struct agent *a)
{
    assert_int_equal (child_count (), 0);
    close (a->epfd);
}

/* Wait up to 20 ms for the channels, and hand their events to child.c. */
static void dispatch (struct agent *a)
{
    struct epoll_event evs[8];
    int n = epoll_wait (a->epfd, evs, 8, 20);

    for (int i = 0; i < n; i++) {
        uint64_t tag = evs[i].data.u64;
        if (tag >= AGENT_EV_CHILD0 && tag < AGENT_EV_CHILD0 + CHILD_MAX)
            child_event (a, (int) (tag - AGENT_EV_CHILD0), evs[i].events);
    }
}

/* server.c's loop, in small: reap, tick, wait for the channels.  Runs
 * until r->done; past SAFETY_MS the child is killed with SIGTERM (and the
 * test fails on what on_done saw). */
static void run (struct agent *a, struct child *c, struct rec *r)
{
    int64_t deadline = tier_now_ms () + SAFETY_MS;
    bool killed = false;

    while (!r->done) {
        int status;
        pid_t pid;

        while ((pid = waitpid (-1, &status, WNOHANG | WUNTRACED)) > 0)
            if (WIFSTOPPED (status))
                (void) child_stopped (a, pid, WSTOPSIG (status));
            else
                (void) child_reaped (a, pid, status);
        if (r->done)
            break;
        child_tick (a);
        if (!killed && tier_now_ms () > deadline) {
            child_kill (c, SIGTERM); /* not child.c's SIGKILL */
            killed = true;
        }
        assert_true (tier_now_ms () < deadline + SAFETY_MS);
        dispatch (a);
    }
}

static struct child *start (struct agent *a, struct child_spec *s,
                            struct rec *r)
{
    tier_error_t e;
    struct child *c;

    memset (r, 0, sizeof (*r));
    s->on_msg = on_msg;
    s->on_done = on_done;
    s->owner = r;
    c = child_start (a, s, &e);
    assert_non_null (c);
    assert_true (child_pid (c) > 0);
    return c;
}

static bool killed_by_sigkill (int status)
{
    return WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL;
}

/* -------------------------------------------------- child_spawn */

static bool has_fd (json_t *fds, int fd)
{
    size_t i;
    json_t *v;

    json_array_foreach (fds, i,
                        v) if (json_integer_value (v) == fd) return true;
    return false;
}

/* Spawn child_report with s and return its report (and *status). */
static json_t *report (const struct child_spec *s, int *status)
{
    tier_error_t e;
    json_t *body = NULL;
    int chan, type = 0;
    pid_t pid;

    pid = child_spawn (s, &chan, &e);
    assert_true (pid > 0);
    assert_true (fcntl (chan, F_GETFD) & FD_CLOEXEC);
    if (chmsg_recv (chan, &tc_proto, &type, &body, NULL, NULL, 0, SAFETY_MS, &e)
        < 0) {
        (void) kill (pid, SIGKILL);
        body = NULL;
    }
    close (chan);
    assert_int_equal (waitpid (pid, status, 0), pid);
    assert_non_null (body);
    assert_int_equal (type, TC_REPORT);
    return body;
}

static int dev_null (void)
{
    int fd = open ("/dev/null", O_RDONLY); /* no O_CLOEXEC: inherited */

    assert_true (fd >= 0);
    return fd;
}

static void test_spawn_fds (void **state)
{
    struct child_spec s;
    json_t *body;
    int k1 = dev_null (), o1 = dev_null (), k2 = dev_null ();
    int k3 = dup2 (k1, 200), o2 = dup2 (o1, 150), cx;
    int status;

    (void) state;
    cx = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true (k3 == 200 && o2 == 150 && cx >= 0);
    spec_init (&s, child_report, NULL);
    /* in no order, and a -1 that is skipped */
    s.keep[0] = k3;
    s.keep[1] = -1;
    s.keep[2] = k2;
    s.keep[3] = k1;
    s.nkeep = 4;
    body = report (&s, &status);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    {
        json_t *fds = json_object_get (body, "fds");
        assert_true (has_fd (fds, k1));
        assert_true (has_fd (fds, k2));
        assert_true (has_fd (fds, 200));
        assert_false (has_fd (fds, o1));
        assert_false (has_fd (fds, 150));
        assert_false (has_fd (fds, cx));
        /* 0-2 if the test has them, the three kept and the channel */
        assert_int_equal (json_array_size (fds),
                          (size_t) (4 + (fcntl (0, F_GETFD) >= 0)
                                    + (fcntl (1, F_GETFD) >= 0)
                                    + (fcntl (2, F_GETFD) >= 0)));
    }
    json_decref (body);

    /* nothing kept: only 0-2 and the channel */
    s.nkeep = 0;
    body = report (&s, &status);
    assert_false (has_fd (json_object_get (body, "fds"), k1));
    assert_false (has_fd (json_object_get (body, "fds"), 200));
    json_decref (body);
    close (k1);
    close (k2);
    close (k3);
    close (o1);
    close (o2);
    close (cx);
}

static void on_usr2 (int sig)
{
    (void) sig;
}

static void test_spawn_name_signals (void **state)
{
    struct sigaction sa = { .sa_handler = SIG_IGN }, old_hup, old_usr2;
    sigset_t block, old_mask;
    struct child_spec s;
    json_t *body;
    int status;

    (void) state;
    /* what the agent has: signals blocked for its signalfd, handlers */
    sigemptyset (&block);
    sigaddset (&block, SIGTERM);
    sigaddset (&block, SIGCHLD);
    sigaddset (&block, SIGUSR1);
    assert_int_equal (sigprocmask (SIG_BLOCK, &block, &old_mask), 0);
    assert_int_equal (sigaction (SIGHUP, &sa, &old_hup), 0);
    sa.sa_handler = on_usr2;
    assert_int_equal (sigaction (SIGUSR2, &sa, &old_usr2), 0);

    spec_init (&s, child_report, NULL);
    (void) snprintf (s.title, sizeof (s.title), "tierd-test job 42.0 alice");
    body = report (&s, &status);
    assert_int_equal (sigprocmask (SIG_SETMASK, &old_mask, NULL), 0);
    assert_int_equal (sigaction (SIGHUP, &old_hup, NULL), 0);
    assert_int_equal (sigaction (SIGUSR2, &old_usr2, NULL), 0);

    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    assert_string_equal (json_string_value (json_object_get (body, "name")),
                         "tierd-test");
    assert_int_equal (json_integer_value (json_object_get (body, "pdeath")),
                      SIGKILL);
    assert_true (json_is_true (json_object_get (body, "mask_empty")));
    assert_true (json_is_true (json_object_get (body, "pipe_ign")));
    assert_true (json_is_true (json_object_get (body, "usr2_dfl")));
    assert_true (json_is_true (json_object_get (body, "hup_dfl")));
    {
        /* the title, as much of it as the test's argv holds */
        const char *t = json_string_value (json_object_get (body, "title"));
        size_t n = strlen (s.title) < title_area_len ? strlen (s.title)
                                                     : title_area_len;
        assert_non_null (t);
        assert_true (n > 0);
        assert_int_equal (strlen (t), n);
        assert_memory_equal (t, s.title, n);
    }
    json_decref (body);

    /* no title: the name; outlive: no parent-death signal */
    s.title[0] = '\0';
    s.outlive = true;
    s.name = "tierd-x";
    body = report (&s, &status);
    assert_string_equal (json_string_value (json_object_get (body, "name")),
                         "tierd-x");
    assert_string_equal (json_string_value (json_object_get (body, "title")),
                         "tierd-x");
    assert_int_equal (json_integer_value (json_object_get (body, "pdeath")), 0);
    json_decref (body);
}

static void test_spawn_cred (void **state)
{
    struct tier_cred cred;
    struct child_spec s;
    json_t *body, *v;
    int status;

    (void) state;
    if (geteuid () != 0) {
        skip ();
        return;
    }
    tier_cred_init (&cred, 65534, 65534);
    spec_init (&s, child_report, NULL);
    s.cred = &cred;
    s.mode = TIER_CRED_OWN;
    body = report (&s, &status);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    v = json_object_get (body, "uid");
    for (size_t i = 0; i < 3; i++)
        assert_int_equal (json_integer_value (json_array_get (v, i)), 65534);
    v = json_object_get (body, "gid");
    for (size_t i = 0; i < 3; i++)
        assert_int_equal (json_integer_value (json_array_get (v, i)), 65534);
    assert_int_equal (json_array_size (json_object_get (body, "groups")), 0);
    /* armed again after the drop, which cleared it */
    assert_int_equal (json_integer_value (json_object_get (body, "pdeath")),
                      SIGKILL);
    json_decref (body);
}

static void test_spawn_bad_spec (void **state)
{
    struct child_spec s;
    tier_error_t e;
    int chan = -1;

    (void) state;
    spec_init (&s, child_exit3, NULL);
    s.name = "tierd-a-name-too-long";
    errno = 0;
    assert_int_equal (child_spawn (&s, &chan, &e), -1);
    assert_int_equal (errno, EINVAL);
    s.name = NULL;
    assert_int_equal (child_spawn (&s, &chan, &e), -1);
    s.name = "tierd-test";
    s.nkeep = CHILD_KEEP_MAX + 1;
    errno = 0;
    assert_int_equal (child_spawn (&s, &chan, &e), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (chan, -1);
}

/* -------------------------------------------------- child_start */

static void assert_seq (const struct rec *r, int n)
{
    assert_int_equal (r->nmsg, n);
    for (int k = 0; k < n; k++) {
        char s[32];
        (void) snprintf (s, sizeof (s), "message %d", k);
        assert_int_equal (r->types[k], TC_SEQ);
        assert_int_equal (json_integer_value (json_object_get (r->bodies[k],
                                                               "i")),
                          k);
        assert_string_equal (json_string_value (json_object_get (r->bodies[k],
                                                                 "s")),
                             s);
        /* "t" and "v" are the channel's */
        assert_int_equal (json_object_size (r->bodies[k]), 2);
    }
}

static void test_start_messages (void **state)
{
    struct seq q = { .n = 3, .gap_ms = 20, .status = 7 };
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_seq, &q);
    c = start (&a, &s, &r);
    assert_int_equal (child_count (), 1);
    run (&a, c, &r);
    assert_true (r.done);
    assert_true (WIFEXITED (r.status) && WEXITSTATUS (r.status) == 7);
    assert_int_equal (r.why, 0);
    assert_int_equal (r.msgs_at_done, 3);
    assert_seq (&r, 3);
    rec_fini (&r);
    agent_fini (&a);
}

/* A child that has sent more than one read burst and exited before the
 * loop looked: on_done still comes after every message. */
static void test_start_drain_at_exit (void **state)
{
    struct seq q = { .n = 150, .status = 0 };
    struct pollfd p = { .events = POLLIN };
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_seq, &q);
    c = start (&a, &s, &r);
    p.fd = (int) syscall (SYS_pidfd_open, child_pid (c), 0);
    assert_true (p.fd >= 0);
    assert_int_equal (poll (&p, 1, SAFETY_MS), 1); /* it exited */
    close (p.fd);
    run (&a, c, &r);
    assert_true (WIFEXITED (r.status) && WEXITSTATUS (r.status) == 0);
    assert_int_equal (r.msgs_at_done, 150);
    assert_seq (&r, 150);
    rec_fini (&r);
    agent_fini (&a);
}

static void test_start_deadline (void **state)
{
    struct seq q = { .n = 1000, .gap_ms = 50 };
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_sleep, NULL);
    s.deadline_ms = 200;
    c = start (&a, &s, &r);
    run (&a, c, &r);
    assert_true (killed_by_sigkill (r.status));
    assert_int_equal (r.why, ETIMEDOUT);
    rec_fini (&r);

    /* progress does not move the deadline */
    spec_init (&s, child_seq, &q);
    s.deadline_ms = 300;
    s.stall_ms = 5000;
    c = start (&a, &s, &r);
    run (&a, c, &r);
    assert_true (killed_by_sigkill (r.status));
    assert_int_equal (r.why, ETIMEDOUT);
    assert_true (r.nmsg >= 1);
    rec_fini (&r);
    agent_fini (&a);
}

static void test_start_stall (void **state)
{
    struct seq stalls = { .n = 1, .stall = true };
    struct seq steady = { .n = 12, .gap_ms = 50, .status = 0 };
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_seq, &stalls);
    s.stall_ms = 200;
    c = start (&a, &s, &r);
    run (&a, c, &r);
    assert_true (killed_by_sigkill (r.status));
    assert_int_equal (r.why, ESTALE);
    assert_seq (&r, 1);
    rec_fini (&r);

    /* a message every 50 ms for 600 ms: progress, never killed */
    spec_init (&s, child_seq, &steady);
    s.stall_ms = 200;
    c = start (&a, &s, &r);
    run (&a, c, &r);
    assert_true (WIFEXITED (r.status) && WEXITSTATUS (r.status) == 0);
    assert_int_equal (r.why, 0);
    assert_seq (&r, 12);
    rec_fini (&r);
    agent_fini (&a);
}

/* A child stopped from outside (its user may, when it runs as the user)
 * is killed at once, long before its stall watchdog: why ECANCELED. */
static void test_start_stopped (void **state)
{
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_sleep, NULL);
    s.stall_ms = 60000;
    c = start (&a, &s, &r);
    assert_int_equal (kill (child_pid (c), SIGSTOP), 0);
    run (&a, c, &r);
    assert_true (killed_by_sigkill (r.status));
    assert_int_equal (r.why, ECANCELED);
    rec_fini (&r);
    agent_fini (&a);
}

/* The loop for ms (reaping), or until r is done. */
static void run_for (struct agent *a, struct rec *r, int ms)
{
    int64_t end = tier_now_ms () + ms;

    while (!r->done && tier_now_ms () < end) {
        int status;
        pid_t pid;

        while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
            (void) child_reaped (a, pid, status);
        child_tick (a);
        dispatch (a);
    }
}

/* Held (waiting for a GFS stream), a silent child is no stall; let go,
 * the watchdog counts again, from then. */
static void test_start_stall_held (void **state)
{
    struct seq stalls = { .n = 1, .stall = true };
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;
    int64_t t0;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_seq, &stalls);
    s.stall_ms = 100;
    c = start (&a, &s, &r);
    child_hold (c, true);
    run_for (&a, &r, 600);
    assert_false (r.done);
    t0 = tier_now_ms ();
    child_hold (c, false);
    run (&a, c, &r);
    assert_true (killed_by_sigkill (r.status));
    assert_int_equal (r.why, ESTALE);
    assert_true (tier_now_ms () - t0 >= 100);
    rec_fini (&r);
    agent_fini (&a);
}

/* A child stuck in the kernel (D state: SIGKILL waits for a file system
 * request) is what a unit test cannot make; one the loop does not reap
 * looks the same to child.c.  Runs the loop without reaping until every
 * r[i] is done (or SAFETY_MS). */
static void run_unreaped (struct agent *a, struct rec *r, int n)
{
    int64_t deadline = tier_now_ms () + SAFETY_MS;
    int left = n;

    while (left > 0 && tier_now_ms () < deadline) {
        child_tick (a);
        dispatch (a);
        left = 0;
        for (int i = 0; i < n; i++)
            left += !r[i].done;
    }
    assert_int_equal (left, 0);
}

static void test_start_abandon (void **state)
{
    struct seq stalls = { .n = 2, .stall = true };
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;
    int status;
    pid_t pid;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_seq, &stalls);
    s.stall_ms = 100;
    c = start (&a, &s, &r);
    pid = child_pid (c);
    run_unreaped (&a, &r, 1);
    /* told at once, as if killed, with what it sent; its slot is free */
    assert_int_equal (r.ndone, 1);
    assert_true (r.abandoned);
    assert_int_equal (r.why, ESTALE);
    assert_true (killed_by_sigkill (r.status));
    assert_seq (&r, 2);
    assert_int_equal (child_count (), 0);
    assert_int_equal (child_abandoned_count (), 1);
    /* it ends at last: reaped, known, and its owner not called again */
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (child_reaped (&a, pid, status));
    assert_int_equal (child_abandoned_count (), 0);
    assert_int_equal (r.ndone, 1);
    /* a pid nobody knows (the loop reaps every child) */
    assert_false (child_reaped (&a, pid, status));
    rec_fini (&r);

    /* one that ends when killed is reaped, not abandoned */
    spec_init (&s, child_sleep, NULL);
    s.stall_ms = 100;
    c = start (&a, &s, &r);
    run (&a, c, &r);
    assert_false (r.abandoned);
    assert_int_equal (r.why, ESTALE);
    assert_int_equal (child_abandoned_count (), 0);
    rec_fini (&r);
    agent_fini (&a);
}

/* Many stuck children cost a bounded table: past CHILD_ABANDONED_MAX no
 * child starts, until some end. */
static void test_abandon_bounded (void **state)
{
    static struct rec r[CHILD_ABANDONED_MAX];
    pid_t pids[CHILD_ABANDONED_MAX];
    struct agent a;
    struct child_spec s;
    tier_error_t e;
    struct child *c;
    int status;

    (void) state;
    agent_init (&a);
    for (int i = 0; i < CHILD_ABANDONED_MAX; i++) {
        spec_init (&s, child_sleep, NULL);
        s.stall_ms = 100;
        c = start (&a, &s, &r[i]);
        pids[i] = child_pid (c);
    }
    run_unreaped (&a, r, CHILD_ABANDONED_MAX);
    for (int i = 0; i < CHILD_ABANDONED_MAX; i++)
        assert_true (r[i].abandoned);
    assert_int_equal (child_count (), 0);
    assert_int_equal (child_abandoned_count (), CHILD_ABANDONED_MAX);
    spec_init (&s, child_sleep, NULL);
    errno = 0;
    assert_null (child_start (&a, &s, &e));
    assert_int_equal (errno, EAGAIN);
    assert_non_null (strstr (e.text, "stuck"));
    /* they end: each reaped and forgotten, and children start again */
    for (int i = 0; i < CHILD_ABANDONED_MAX; i++) {
        assert_int_equal (waitpid (pids[i], &status, 0), pids[i]);
        assert_true (child_reaped (&a, pids[i], status));
    }
    assert_int_equal (child_abandoned_count (), 0);
    spec_init (&s, child_exit3, NULL);
    c = start (&a, &s, &r[0]);
    run (&a, c, &r[0]);
    assert_true (WIFEXITED (r[0].status) && WEXITSTATUS (r[0].status) == 3);
    for (int i = 0; i < CHILD_ABANDONED_MAX; i++)
        rec_fini (&r[i]);
    agent_fini (&a);
}

/* run, reaping c alone (the abandoned ones stay "stuck"). */
static void run_only (struct agent *a, struct child *c, struct rec *r)
{
    int64_t deadline = tier_now_ms () + SAFETY_MS;
    pid_t pid = child_pid (c);
    int status;

    while (!r->done) {
        if (waitpid (pid, &status, WNOHANG) == pid)
            (void) child_reaped (a, pid, status);
        if (r->done)
            break;
        child_tick (a);
        assert_true (tier_now_ms () < deadline);
        dispatch (a);
    }
}

/* One user's stuck children: past CHILD_ABANDONED_PER_UID none more of
 * that user's starts, while another user's and root's still do. */
static void test_abandon_per_uid (void **state)
{
    static struct rec r[CHILD_ABANDONED_PER_UID];
    pid_t pids[CHILD_ABANDONED_PER_UID];
    struct tier_cred nobody, other;
    struct agent a;
    struct child_spec s;
    tier_error_t e;
    struct child *c;
    struct rec r2;
    int status;

    (void) state;
    if (geteuid () != 0) {
        skip ();
        return;
    }
    tier_cred_init (&nobody, 65534, 65534);
    tier_cred_init (&other, 65533, 65534);
    agent_init (&a);
    for (int i = 0; i < CHILD_ABANDONED_PER_UID; i++) {
        spec_init (&s, child_sleep, NULL);
        s.cred = &nobody;
        s.mode = TIER_CRED_OWN;
        s.stall_ms = 100;
        c = start (&a, &s, &r[i]);
        pids[i] = child_pid (c);
    }
    run_unreaped (&a, r, CHILD_ABANDONED_PER_UID);
    assert_int_equal (child_abandoned_count (), CHILD_ABANDONED_PER_UID);
    spec_init (&s, child_exit3, NULL);
    s.cred = &nobody;
    s.mode = TIER_CRED_OWN;
    errno = 0;
    assert_null (child_start (&a, &s, &e));
    assert_int_equal (errno, EAGAIN);
    assert_non_null (strstr (e.text, "children of uid 65534 are stuck"));
    /* another user's child and root's start and run */
    s.cred = &other;
    c = start (&a, &s, &r2);
    run_only (&a, c, &r2);
    assert_true (WIFEXITED (r2.status) && WEXITSTATUS (r2.status) == 3);
    rec_fini (&r2);
    s.cred = NULL;
    c = start (&a, &s, &r2);
    run_only (&a, c, &r2);
    assert_true (WIFEXITED (r2.status) && WEXITSTATUS (r2.status) == 3);
    rec_fini (&r2);
    /* one of them ends: that user's children start again */
    assert_int_equal (waitpid (pids[0], &status, 0), pids[0]);
    assert_true (child_reaped (&a, pids[0], status));
    s.cred = &nobody;
    c = start (&a, &s, &r2);
    run_only (&a, c, &r2);
    assert_true (WIFEXITED (r2.status) && WEXITSTATUS (r2.status) == 3);
    rec_fini (&r2);
    for (int i = 1; i < CHILD_ABANDONED_PER_UID; i++) {
        assert_int_equal (waitpid (pids[i], &status, 0), pids[i]);
        assert_true (child_reaped (&a, pids[i], status));
    }
    for (int i = 0; i < CHILD_ABANDONED_PER_UID; i++)
        rec_fini (&r[i]);
    agent_fini (&a);
}

/* -------------------------------------------------- child_ask */

struct heard {
    bool done;
    int n, rc, type, fd;
    json_t *body;
    char text[sizeof (((tier_error_t *) 0)->text)];
};

static void on_heard (struct agent *a, int rc, int type, json_t *body, int fd,
                      const tier_error_t *e, void *arg)
{
    struct heard *h = arg;

    (void) a;
    h->done = true;
    h->n++;
    h->rc = rc;
    h->type = type;
    h->body = body;
    h->fd = fd;
    if (e)
        (void) snprintf (h->text, sizeof (h->text), "%s", e->text);
}

/* The loop until h is answered. */
static void run_ask (struct agent *a, struct heard *h)
{
    int64_t deadline = tier_now_ms () + SAFETY_MS;

    while (!h->done) {
        int status;
        pid_t pid;

        while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
            (void) child_reaped (a, pid, status);
        if (h->done)
            break;
        child_tick (a);
        assert_true (tier_now_ms () < deadline);
        dispatch (a);
    }
}

static void test_ask_answer (void **state)
{
    struct heard h = { .fd = -1 };
    struct agent a;
    struct child_spec s;
    struct stat st;
    char *text = NULL;
    int twice = 1;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_answer, &twice);
    child_ask (&a, &s, SAFETY_MS, on_heard, &h);
    assert_false (h.done); /* from the loop, not at once */
    run_ask (&a, &h);
    assert_int_equal (h.rc, 0);
    assert_int_equal (h.type, TC_ANSWER);
    assert_int_equal (json_integer_value (json_object_get (h.body, "x")), 42);
    assert_string_equal (json_string_value (json_object_get (h.body, "s")),
                         "hi");
    assert_true (h.fd >= 0);
    assert_int_equal (fstat (h.fd, &st), 0);
    assert_int_equal (chmsg_text_read (h.fd, (uint64_t) st.st_size, 64, &text),
                      0);
    assert_string_equal (text, "payload");
    free (text);
    close (h.fd);
    json_decref (h.body);
    /* its second message is nobody's; it is reaped, and done not called
     * again */
    while (child_count () > 0) {
        int status;
        pid_t pid = waitpid (-1, &status, 0);
        assert_true (pid > 0);
        (void) child_reaped (&a, pid, status);
    }
    assert_int_equal (h.n, 1);
    agent_fini (&a);
}

static void test_ask_timeout (void **state)
{
    struct heard h = { .fd = -1 };
    struct agent a;
    struct child_spec s;
    int p[2];
    pid_t pid = -1;

    (void) state;
    agent_init (&a);
    assert_int_equal (pipe (p), 0);
    spec_init (&s, child_pid_then_sleep, &p[1]);
    s.keep[0] = p[1];
    s.nkeep = 1;
    child_ask (&a, &s, 200, on_heard, &h);
    assert_int_equal (read (p[0], &pid, sizeof (pid)), (ssize_t) sizeof (pid));
    close (p[0]);
    close (p[1]);
    run_ask (&a, &h);
    assert_int_equal (h.rc, ETIMEDOUT);
    assert_null (h.body);
    assert_non_null (strstr (h.text, "did not answer within"));
    /* killed and reaped before done heard of it */
    assert_int_equal (child_count (), 0);
    errno = 0;
    assert_int_equal (kill (pid, 0), -1);
    assert_int_equal (errno, ESRCH);
    agent_fini (&a);
}

static void test_ask_no_answer (void **state)
{
    struct heard h = { .fd = -1 };
    struct agent a;
    struct child_spec s;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_exit3, NULL);
    child_ask (&a, &s, SAFETY_MS, on_heard, &h);
    run_ask (&a, &h);
    assert_int_equal (h.rc, ENODATA);
    assert_null (h.body);
    assert_non_null (strstr (h.text, "exited without an answer (status"));
    assert_int_equal (h.n, 1);
    agent_fini (&a);
}

/* One that cannot start: done hears why before child_ask returns. */
static void test_ask_refused (void **state)
{
    static struct rec r[CHILD_ABANDONED_MAX];
    pid_t pids[CHILD_ABANDONED_MAX];
    struct heard h = { .fd = -1 };
    struct agent a;
    struct child_spec s;
    int status;

    (void) state;
    agent_init (&a);
    for (int i = 0; i < CHILD_ABANDONED_MAX; i++) {
        spec_init (&s, child_sleep, NULL);
        s.stall_ms = 100;
        pids[i] = child_pid (start (&a, &s, &r[i]));
    }
    run_unreaped (&a, r, CHILD_ABANDONED_MAX);
    spec_init (&s, child_exit3, NULL);
    child_ask (&a, &s, SAFETY_MS, on_heard, &h);
    assert_true (h.done);
    assert_int_equal (h.rc, EAGAIN);
    assert_non_null (strstr (h.text, "stuck"));
    for (int i = 0; i < CHILD_ABANDONED_MAX; i++) {
        assert_int_equal (waitpid (pids[i], &status, 0), pids[i]);
        assert_true (child_reaped (&a, pids[i], status));
        rec_fini (&r[i]);
    }
    agent_fini (&a);
}

/* -------------------------------------------------- child_send */

static void test_send_echo (void **state)
{
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;
    int n = 2, fd;

    (void) state;
    agent_init (&a);
    spec_init (&s, child_echo, &n);
    c = start (&a, &s, &r);
    assert_int_equal (child_send (c, TC_ECHO,
                                  json_pack ("{s:i, s:s}", "n", 1, "s", "abc"),
                                  NULL, 0),
                      0);
    fd = chmsg_text_fd ("t", "beside", 6);
    assert_true (fd >= 0);
    assert_int_equal (child_send (c, TC_ECHO, json_pack ("{s:i}", "n", 2), &fd,
                                  1),
                      0);
    close (fd); /* child_send sends a duplicate */
    run (&a, c, &r);
    assert_true (WIFEXITED (r.status) && WEXITSTATUS (r.status) == 0);
    assert_int_equal (r.nmsg, 2);
    assert_int_equal (r.types[0], TC_ECHO);
    assert_int_equal (json_integer_value (json_object_get (r.bodies[0], "n")),
                      1);
    assert_string_equal (json_string_value (json_object_get (r.bodies[0], "s")),
                         "abc");
    assert_null (r.texts[0]);
    assert_int_equal (r.types[1], TC_ECHO);
    assert_int_equal (json_integer_value (json_object_get (r.bodies[1], "n")),
                      2);
    assert_non_null (r.texts[1]);
    assert_string_equal (r.texts[1], "beside");
    rec_fini (&r);
    agent_fini (&a);
}

/* More than the socket holds: the rest waits for EPOLLOUT (child_event). */
static void test_send_large (void **state)
{
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;
    int n = 8;
    char *big = malloc (100001);

    (void) state;
    assert_non_null (big);
    memset (big, 'x', 100000);
    big[100000] = '\0';
    agent_init (&a);
    spec_init (&s, child_echo, &n);
    c = start (&a, &s, &r);
    for (int k = 0; k < n; k++)
        assert_int_equal (child_send (c, TC_ECHO,
                                      json_pack ("{s:i, s:s}", "n", k, "s",
                                                 big),
                                      NULL, 0),
                          0);
    run (&a, c, &r);
    assert_true (WIFEXITED (r.status) && WEXITSTATUS (r.status) == 0);
    assert_int_equal (r.nmsg, n);
    for (int k = 0; k < n; k++) {
        assert_int_equal (json_integer_value (json_object_get (r.bodies[k],
                                                               "n")),
                          k);
        assert_string_equal (json_string_value (json_object_get (r.bodies[k],
                                                                 "s")),
                             big);
    }
    free (big);
    rec_fini (&r);
    agent_fini (&a);
}

static int child_close_then_sleep (void *arg, int chan)
{
    close (chan);
    return child_sleep (arg, -1);
}

/* A child that does not read: ENOBUFS; one whose channel closed: EPIPE. */
static void test_send_refused (void **state)
{
    struct agent a;
    struct child_spec s;
    struct child *c;
    struct rec r;
    char *big = malloc (100001);
    int rc = 0, k;

    (void) state;
    assert_non_null (big);
    memset (big, 'x', 100000);
    big[100000] = '\0';
    agent_init (&a);
    spec_init (&s, child_sleep, NULL);
    c = start (&a, &s, &r);
    for (k = 0; k < 100 && rc == 0; k++)
        rc = child_send (c, TC_ECHO, json_pack ("{s:s}", "s", big), NULL, 0);
    assert_int_equal (rc, -1);
    assert_int_equal (errno, ENOBUFS);
    assert_true (k > 1);
    child_kill (c, SIGKILL);
    run (&a, c, &r);
    assert_true (killed_by_sigkill (r.status));
    assert_int_equal (r.why, 0);
    rec_fini (&r);

    spec_init (&s, child_close_then_sleep, NULL);
    c = start (&a, &s, &r);
    {
        int64_t deadline = tier_now_ms () + SAFETY_MS;
        rc = 0;
        while (rc == 0 && tier_now_ms () < deadline) {
            rc = child_send (c, TC_ECHO, json_pack ("{s:i}", "n", 1), NULL, 0);
            (void) usleep (10000);
        }
    }
    assert_int_equal (rc, -1);
    assert_int_equal (errno, EPIPE);
    errno = 0;
    assert_int_equal (child_send (c, TC_ECHO, NULL, NULL, 0), -1);
    assert_int_equal (errno, EPIPE);
    child_kill (c, SIGKILL);
    run (&a, c, &r);
    assert_true (killed_by_sigkill (r.status));
    free (big);
    rec_fini (&r);
    agent_fini (&a);
}

int main (int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_spawn_fds),
        cmocka_unit_test (test_spawn_name_signals),
        cmocka_unit_test (test_spawn_cred),
        cmocka_unit_test (test_spawn_bad_spec),
        cmocka_unit_test (test_start_messages),
        cmocka_unit_test (test_start_drain_at_exit),
        cmocka_unit_test (test_start_deadline),
        cmocka_unit_test (test_start_stall),
        cmocka_unit_test (test_start_stall_held),
        cmocka_unit_test (test_start_stopped),
        cmocka_unit_test (test_start_abandon),
        cmocka_unit_test (test_abandon_bounded),
        cmocka_unit_test (test_abandon_per_uid),
        cmocka_unit_test (test_ask_answer),
        cmocka_unit_test (test_ask_timeout),
        cmocka_unit_test (test_ask_no_answer),
        cmocka_unit_test (test_ask_refused),
        cmocka_unit_test (test_send_echo),
        cmocka_unit_test (test_send_large),
        cmocka_unit_test (test_send_refused),
    };
    char *end;

    /* as tierd's main does: the children's titles go into argv */
    test_argv0 = argv[0];
    end = argv[0] + strlen (argv[0]);
    for (int i = 1; i < argc && argv[i] == end + 1; i++)
        end = argv[i] + strlen (argv[i]);
    title_area_len = (size_t) (end - argv[0]);
    child_title_init (argc, argv);
    return UNIT_RUN (tests);
}
