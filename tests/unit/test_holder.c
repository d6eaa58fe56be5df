/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_holder.c - one writer per file: a free OFD lock is taken with our
 * record; a holder that is a child of ours is waited for, never ended;
 * a holder left by an "earlier agent" (an orphan of our comm, here the
 * grandchild of a subreaper child) is ended by pidfd and the lock taken;
 * an orphan of another comm or another start time is left alone; the
 * BB lock of a fetch (bblock.h) ends such an orphan holder too; and a
 * record that a full file system does not take leaves the lock held.
 *
 * Processes are real: forked children hold the locks.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/bblock.h"
#include "agent/holder.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static int dfd = -1;

static int setup (void **state)
{
    (void) state;
    (void) snprintf (dir, sizeof (dir), "/tmp/test_holder.XXXXXX");
    if (!mkdtemp (dir) || (dfd = open (dir, O_RDONLY | O_DIRECTORY)) < 0)
        return -1;
    return 0;
}

static int teardown (void **state)
{
    (void) state;
    (void) unlinkat (dfd, "lock", 0);
    (void) unlinkat (dfd, "KEY.lock", 0);
    close (dfd);
    return rmdir (dir);
}

static int open_lock (void)
{
    return openat (dfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

/* What a holder process does before it waits to be killed. */
enum hold { HOLD_OFD, HOLD_BBLOCK };

static void hold (enum hold how, const char *comm)
{
    pid_t holder, ended;

    if (how == HOLD_OFD) {
        int fd = open_lock ();
        if (fd < 0 || holder_lock (fd, "none", 0, &holder, &ended) < 0)
            _exit (1);
    }
    else {
        struct bblock l;
        char err[256];
        bblock_init (&l, dfd, "KEY.lock", "n1", "boot1", 60, 1);
        if (bblock_take (&l, err, sizeof (err)) != 0)
            _exit (1);
    }
    if (comm)
        (void) prctl (PR_SET_NAME, comm);
}

/* A holder that is our child: its pid, once it holds. */
static pid_t child_holder (enum hold how, const char *comm)
{
    int p[2];
    pid_t pid;
    char c;

    assert_int_equal (pipe (p), 0);
    assert_true ((pid = fork ()) >= 0);
    if (pid == 0) {
        hold (how, comm);
        (void) write (p[1], "x", 1);
        for (;;)
            pause ();
    }
    close (p[1]);
    assert_int_equal (read (p[0], &c, 1), 1);
    close (p[0]);
    return pid;
}

/* A holder that an earlier agent left: the grandchild of a subreaper
 * child (*keeper), which reaps it and then exits.  Its pid. */
static pid_t orphan_holder (enum hold how, const char *comm, pid_t *keeper)
{
    int p[2];
    pid_t pid;

    assert_int_equal (pipe (p), 0);
    assert_true ((*keeper = fork ()) >= 0);
    if (*keeper == 0) {
        pid_t mid;
        (void) prctl (PR_SET_CHILD_SUBREAPER, 1);
        if ((mid = fork ()) == 0) {
            pid_t c = fork ();
            if (c == 0) {
                hold (how, comm);
                pid = getpid ();
                (void) write (p[1], &pid, sizeof (pid));
                for (;;)
                    pause ();
            }
            _exit (c > 0 ? 0 : 1); /* the orphan's agent ends */
        }
        close (p[1]);
        while (wait (NULL) > 0 || errno == EINTR)
            ;
        _exit (0);
    }
    close (p[1]);
    assert_int_equal (read (p[0], &pid, sizeof (pid)), sizeof (pid));
    close (p[0]);
    return pid;
}

static void reap (pid_t pid)
{
    int status;

    assert_int_equal (waitpid (pid, &status, 0), pid);
}

static void test_free_lock (void **state)
{
    char buf[128], want[128];
    pid_t holder, ended;
    int fd = open_lock ();
    ssize_t n;

    (void) state;
    assert_true (fd >= 0);
    assert_int_equal (holder_lock (fd, "tierd-mig", 0, &holder, &ended), 0);
    assert_int_equal (holder, 0);
    assert_int_equal (ended, 0);
    n = pread (fd, buf, sizeof (buf) - 1, 0);
    assert_true (n > 0);
    buf[n] = '\0';
    (void) snprintf (want, sizeof (want), "pid=%d start=%llu\n",
                     (int) getpid (), tier_proc_start (getpid ()));
    assert_string_equal (buf, want);
    close (fd);
}

/* Our own child holds: waited for, never ended. */
static void test_child_waited (void **state)
{
    pid_t pid = child_holder (HOLD_OFD, "tierd-mig"), holder, ended;
    int fd = open_lock ();

    (void) state;
    assert_int_equal (holder_lock (fd, "tierd-mig", 300, &holder, &ended), -1);
    assert_int_equal (errno, EWOULDBLOCK);
    assert_int_equal (holder, pid);
    assert_int_equal (ended, 0);
    assert_int_equal (kill (pid, 0), 0);
    /* gone: the lock is free at once */
    assert_int_equal (kill (pid, SIGKILL), 0);
    reap (pid);
    assert_int_equal (holder_lock (fd, "tierd-mig", 0, &holder, &ended), 0);
    close (fd);
}

/* An earlier agent's holder of our comm: ended by pidfd, lock taken. */
static void test_orphan_ended (void **state)
{
    pid_t keeper, pid = orphan_holder (HOLD_OFD, "tierd-mig", &keeper);
    pid_t holder, ended;
    int fd = open_lock ();

    (void) state;
    assert_int_equal (holder_lock (fd, "tierd-mig", 10000, &holder, &ended), 0);
    assert_int_equal (ended, pid);
    reap (keeper); /* it reaped the orphan */
    assert_true (tier_proc_start (pid) == 0);
    close (fd);
}

/* Another name, or another start time: not that process; left alone. */
static void test_orphan_not_ours (void **state)
{
    pid_t keeper, pid = orphan_holder (HOLD_OFD, "other", &keeper);
    pid_t holder, ended;
    unsigned long long start = tier_proc_start (pid);
    int fd = open_lock ();

    (void) state;
    assert_int_equal (holder_lock (fd, "tierd-mig", 300, &holder, &ended), -1);
    assert_int_equal (errno, EWOULDBLOCK);
    assert_int_equal (holder, pid);
    assert_int_equal (ended, 0);
    assert_int_equal (holder_end_orphan (pid, start + 1, "other"), -1);
    assert_int_equal (errno, ESRCH);
    assert_int_equal (holder_end_orphan (pid, start, "tierd-mig"), -1);
    assert_int_equal (errno, ESRCH);
    assert_int_equal (kill (pid, 0), 0);
    assert_int_equal (kill (pid, SIGKILL), 0);
    reap (keeper);
    close (fd);
}

/* The BB lock of a fetch: a live holder of our name on this node that
 * an earlier agent left is ended, and the lock taken long before
 * BBLockStale (60 s) would break it; the wait is 10 s. */
static void test_bblock_orphan (void **state)
{
    pid_t keeper, pid = orphan_holder (HOLD_BBLOCK, NULL, &keeper);
    struct bblock l;
    char err[256];

    (void) state;
    bblock_init (&l, dfd, "KEY.lock", "n1", "boot1", 60, 10);
    assert_int_equal (bblock_take (&l, err, sizeof (err)), 0);
    reap (keeper);
    assert_true (tier_proc_start (pid) == 0);
    bblock_release (&l);
}

/* Our record cannot be written (a full file system; here RLIMIT_FSIZE
 * 0, whose EFBIG stands for ENOSPC): the lock is ours all the same, the
 * old record is gone, and a later writer waits for us (no record: no
 * one to end) instead of failing us or ending anyone. */
static void test_record_unwritable (void **state)
{
    struct rlimit old, none = { 0, 0 };
    pid_t holder, ended, pid;
    void (*oldsig) (int);
    struct stat st;
    int fd = open_lock (), status;

    (void) state;
    assert_true (fd >= 0);
    assert_int_equal (pwrite (fd, "pid=1 start=1\n", 14, 0), 14);
    assert_int_equal (getrlimit (RLIMIT_FSIZE, &old), 0);
    none.rlim_max = old.rlim_max;
    oldsig = signal (SIGXFSZ, SIG_IGN);
    assert_int_equal (setrlimit (RLIMIT_FSIZE, &none), 0);
    assert_int_equal (holder_lock (fd, "tierd-mig", 0, &holder, &ended), 0);
    assert_int_equal (setrlimit (RLIMIT_FSIZE, &old), 0);
    (void) signal (SIGXFSZ, oldsig);
    assert_int_equal (fstat (fd, &st), 0);
    assert_int_equal (st.st_size, 0);
    assert_true ((pid = fork ()) >= 0);
    if (pid == 0) {
        int f = open_lock ();
        _exit (f >= 0 && holder_lock (f, "tierd-mig", 200, &holder, &ended) < 0
                       && errno == EWOULDBLOCK && holder == 0 && ended == 0
                   ? 0
                   : 1);
    }
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    close (fd);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_free_lock, setup, teardown),
        cmocka_unit_test_setup_teardown (test_child_waited, setup, teardown),
        cmocka_unit_test_setup_teardown (test_orphan_ended, setup, teardown),
        cmocka_unit_test_setup_teardown (test_orphan_not_ours, setup, teardown),
        cmocka_unit_test_setup_teardown (test_bblock_orphan, setup, teardown),
        cmocka_unit_test_setup_teardown (test_record_unwritable, setup,
                                         teardown),
    };
    return UNIT_RUN (tests);
}
