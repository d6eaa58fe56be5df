/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_bblock.c - the cross-node lock of a fetch: a free lock is taken
 * and released; a live holder (this node's live process, or another
 * node's moving heartbeat) blocks until the wait runs out; a dead one (a
 * gone pid, a reused pid, another boot, a heartbeat that stopped for
 * BBLockStale) is broken and taken over; a lock whose text cannot be
 * written is removed at once; release leaves another
 * holder's lock alone; the heartbeat thread moves the mtime.
 *
 * The waiter's clock and sleeps are faked (-Wl,--wrap=tier_now_ms,
 * --wrap=nanosleep): on the main thread a sleep only advances the clock
 * and runs the test's hook (another node's heartbeat); the heartbeat
 * thread sleeps for real.  Lock files live in a real temp directory.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/bblock.h"
#include "agent/holder.h"
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NODE "n1"
#define BOOT "boot-1"
#define LOCK "KEY.lock"

static int64_t fake_ms = 1000000;
static pthread_t main_thread;
static void (*sleep_hook) (void);
static int sleeps;

int64_t __wrap_tier_now_ms (void);
int __wrap_nanosleep (const struct timespec *req, struct timespec *rem);
int __real_nanosleep (const struct timespec *req, struct timespec *rem);

int64_t __wrap_tier_now_ms (void)
{
    return fake_ms;
}

int __wrap_nanosleep (const struct timespec *req, struct timespec *rem)
{
    if (!pthread_equal (pthread_self (), main_thread))
        return __real_nanosleep (req, rem);
    fake_ms += (int64_t) req->tv_sec * 1000 + req->tv_nsec / 1000000;
    sleeps++;
    if (sleep_hook)
        sleep_hook ();
    return 0;
}

static char dir[64];
static int dfd = -1;

static int setup (void **state)
{
    (void) state;
    main_thread = pthread_self ();
    (void) snprintf (dir, sizeof (dir), "/tmp/test_bblock.XXXXXX");
    assert_non_null (mkdtemp (dir));
    assert_true ((dfd = open (dir, O_RDONLY | O_DIRECTORY)) >= 0);
    sleep_hook = NULL;
    sleeps = 0;
    return 0;
}

static int teardown (void **state)
{
    char path[128];

    (void) state;
    (void) unlinkat (dfd, LOCK, 0);
    close (dfd);
    (void) snprintf (path, sizeof (path), "%s", dir);
    assert_int_equal (rmdir (path), 0); /* nothing else was left */
    return 0;
}

static void write_holder (const char *text)
{
    int fd = openat (dfd, LOCK, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    assert_true (fd >= 0);
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
}

static char *read_lock (void)
{
    static char buf[BBLOCK_HOLDER_MAX];
    int fd = openat (dfd, LOCK, O_RDONLY);
    ssize_t n;

    if (fd < 0)
        return NULL;
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* This process as a holder text, with start time start. */
static void me_as_holder (char *buf, size_t size, const char *node,
                          const char *boot, pid_t pid, unsigned long long start)
{
    (void) snprintf (buf, size, "node=%s boot=%s pid=%ld start=%llu\n", node,
                     boot, (long) pid, start);
}

static void lock_init (struct bblock *l, uint64_t stale_s, uint64_t wait_s)
{
    bblock_init (l, dfd, LOCK, NODE, BOOT, stale_s, wait_s);
}

static void test_proc_start (void **state)
{
    pid_t pid;

    (void) state;
    assert_true (tier_proc_start (getpid ()) > 0);
    assert_true (tier_proc_start (getpid ()) == tier_proc_start (getpid ()));
    assert_true ((pid = fork ()) >= 0);
    if (pid == 0)
        _exit (0);
    assert_int_equal (waitpid (pid, NULL, 0), pid);
    assert_true (tier_proc_start (pid) == 0);
}

static void test_free_lock (void **state)
{
    char want[BBLOCK_HOLDER_MAX], err[256] = "";
    struct bblock l;
    struct bblock_holder h;
    struct timespec mt;
    char raw[BBLOCK_HOLDER_MAX];

    (void) state;
    lock_init (&l, 10, 10);
    assert_int_equal (bblock_take (&l, err, sizeof (err)), 0);
    assert_true (l.fd >= 0);
    assert_int_equal (sleeps, 0); /* at once */
    me_as_holder (want, sizeof (want), NODE, BOOT, getpid (),
                  tier_proc_start (getpid ()));
    assert_string_equal (read_lock (), want);
    assert_int_equal (bblock_holder_read (dfd, LOCK, &h, &mt, raw,
                                          sizeof (raw)),
                      0);
    assert_string_equal (h.node, NODE);
    assert_string_equal (h.boot, BOOT);
    assert_int_equal (h.pid, getpid ());
    assert_true (h.start == tier_proc_start (getpid ()));
    assert_string_equal (raw, want);
    /* a second taker of this process waits: it holds no lock twice */
    {
        struct bblock l2;
        lock_init (&l2, 100, 3);
        assert_int_equal (bblock_take (&l2, err, sizeof (err)), -1);
        assert_int_equal (errno, ETIMEDOUT);
        assert_true (l2.fd < 0);
    }
    bblock_release (&l);
    assert_true (l.fd < 0);
    assert_null (read_lock ());
    assert_int_equal (faccessat (dfd, LOCK, F_OK, 0), -1);
}

/* A holder of this node that lives (this very process) blocks the
 * waiter until its wait runs out; the lock stays as it was. */
static void test_live_holder_blocks (void **state)
{
    char text[BBLOCK_HOLDER_MAX], err[256] = "";
    int64_t t0 = fake_ms;
    struct bblock l;

    (void) state;
    me_as_holder (text, sizeof (text), NODE, BOOT, getpid (),
                  tier_proc_start (getpid ()));
    write_holder (text);
    lock_init (&l, 100, 5);
    errno = 0;
    assert_int_equal (bblock_take (&l, err, sizeof (err)), -1);
    assert_int_equal (errno, ETIMEDOUT);
    assert_true (fake_ms - t0 > 5000);
    assert_true (fake_ms - t0 < 7000); /* backoff at most 1 s */
    assert_non_null (strstr (err, "waited 5 s for the copy by n1"));
    assert_string_equal (read_lock (), text);
    assert_true (l.fd < 0);
}

/* The lock's text cannot be written (a full BB; here RLIMIT_FSIZE 0,
 * whose EFBIG stands for ENOSPC): the empty lock, which release would
 * not know as ours, is removed at once and the take fails naming it. */
static void test_text_unwritable (void **state)
{
    struct rlimit old, none = { 0, 0 };
    char err[256] = "";
    struct bblock l;
    void (*oldsig) (int);

    (void) state;
    assert_int_equal (getrlimit (RLIMIT_FSIZE, &old), 0);
    none.rlim_max = old.rlim_max;
    oldsig = signal (SIGXFSZ, SIG_IGN);
    assert_int_equal (setrlimit (RLIMIT_FSIZE, &none), 0);
    lock_init (&l, 10, 10);
    errno = 0;
    assert_int_equal (bblock_take (&l, err, sizeof (err)), -1);
    assert_int_equal (errno, EFBIG);
    assert_int_equal (setrlimit (RLIMIT_FSIZE, &old), 0);
    (void) signal (SIGXFSZ, oldsig);
    assert_non_null (strstr (err, "lock " LOCK ": "));
    assert_true (l.fd < 0);
    assert_null (read_lock ()); /* no empty lock left behind */
    bblock_release (&l);        /* harmless */
    /* the next take finds the lock free */
    assert_int_equal (bblock_take (&l, err, sizeof (err)), 0);
    bblock_release (&l);
    assert_null (read_lock ());
}

/* Another node's holder whose heartbeat moves blocks too, however long
 * BBLockStale is exceeded in all. */
static struct timespec beat = { 5000, 0 };

static void heartbeat_hook (void)
{
    struct timespec ts[2];

    beat.tv_nsec += 1000;
    ts[0] = ts[1] = beat;
    assert_int_equal (utimensat (dfd, LOCK, ts, 0), 0);
}

static void test_moving_heartbeat_blocks (void **state)
{
    const char *text = "node=n2 boot=other pid=1 start=1\n";
    char err[256] = "";
    struct bblock l;

    (void) state;
    write_holder (text);
    lock_init (&l, 2, 10);
    sleep_hook = heartbeat_hook;
    assert_int_equal (bblock_take (&l, err, sizeof (err)), -1);
    assert_int_equal (errno, ETIMEDOUT);
    assert_non_null (strstr (err, "by n2"));
    assert_string_equal (read_lock (), text);
    sleep_hook = NULL;
}

/* Take over the lock from text: at once (after no sleep) if immediate,
 * else after stale_s of the waiter's clock. */
static void taken_over (const char *text, uint64_t stale_s, bool immediate)
{
    char want[BBLOCK_HOLDER_MAX], err[256] = "";
    int64_t t0 = fake_ms;
    struct bblock l;
    DIR *d;

    write_holder (text);
    lock_init (&l, stale_s, 30);
    sleeps = 0;
    assert_int_equal (bblock_take (&l, err, sizeof (err)), 0);
    if (immediate)
        assert_int_equal (sleeps, 0);
    else {
        assert_true (fake_ms - t0 >= (int64_t) stale_s * 1000);
        assert_true (fake_ms - t0 < (int64_t) (stale_s + 2) * 1000);
    }
    me_as_holder (want, sizeof (want), NODE, BOOT, getpid (),
                  tier_proc_start (getpid ()));
    assert_string_equal (read_lock (), want);
    bblock_release (&l);
    /* nothing left: the broken lock was removed too */
    assert_non_null ((d = fdopendir (dup (dfd))));
    for (struct dirent *de; (de = readdir (d));)
        assert_true (de->d_name[0] == '.');
    closedir (d);
}

static void test_dead_pid (void **state)
{
    char text[BBLOCK_HOLDER_MAX];
    pid_t pid;

    (void) state;
    assert_true ((pid = fork ()) >= 0);
    if (pid == 0)
        _exit (0);
    assert_int_equal (waitpid (pid, NULL, 0), pid);
    me_as_holder (text, sizeof (text), NODE, BOOT, pid, 12345);
    taken_over (text, 100, true);
}

static void test_reused_pid (void **state)
{
    char text[BBLOCK_HOLDER_MAX];

    (void) state;
    /* this process's pid, but not its start time: another process */
    me_as_holder (text, sizeof (text), NODE, BOOT, getpid (),
                  tier_proc_start (getpid ()) + 1);
    taken_over (text, 100, true);
}

static void test_other_boot (void **state)
{
    char text[BBLOCK_HOLDER_MAX];

    (void) state;
    me_as_holder (text, sizeof (text), NODE, "boot-0", getpid (),
                  tier_proc_start (getpid ()));
    taken_over (text, 100, true);
}

static void test_stale_heartbeat (void **state)
{
    (void) state;
    /* another node: only its heartbeat tells, and it stopped */
    taken_over ("node=n2 boot=other pid=1 start=1\n", 3, false);
    /* a text tier did not write: the same */
    taken_over ("garbage", 2, false);
}

/* The replica appeared (another node published it): no lock. */
static int done_after;

static bool done_cb (void *arg)
{
    (void) arg;
    return sleeps >= done_after;
}

static void test_done_meanwhile (void **state)
{
    const char *text = "node=n2 boot=other pid=1 start=1\n";
    char err[256] = "";
    struct bblock l;

    (void) state;
    write_holder (text);
    lock_init (&l, 100, 30);
    l.done = done_cb;
    sleeps = 0;
    done_after = 3;
    assert_int_equal (bblock_take (&l, err, sizeof (err)), 1);
    assert_int_equal (sleeps, 3);
    assert_true (l.fd < 0);
    assert_string_equal (read_lock (), text);
    /* done before anything: the lock is not even tried */
    (void) unlinkat (dfd, LOCK, 0);
    done_after = 0;
    assert_int_equal (bblock_take (&l, err, sizeof (err)), 1);
    assert_null (read_lock ());
}

/* A holder whose lock was broken and taken by another leaves it. */
static void test_release_not_ours (void **state)
{
    const char *other = "node=n2 boot=other pid=7 start=7\n";
    char err[256] = "";
    struct bblock l;

    (void) state;
    lock_init (&l, 10, 10);
    assert_int_equal (bblock_take (&l, err, sizeof (err)), 0);
    assert_int_equal (unlinkat (dfd, LOCK, 0), 0);
    write_holder (other);
    bblock_release (&l);
    assert_string_equal (read_lock (), other);
}

/* The heartbeat thread refreshes the lock's mtime while it is held (the
 * period is at least 1 s: real time). */
static void test_heartbeat_thread (void **state)
{
    struct timespec old[2] = { { 1000, 0 }, { 1000, 0 } };
    char err[256] = "";
    struct bblock l;
    struct stat st;
    bool moved = false;

    (void) state;
    lock_init (&l, 1, 10);
    assert_int_equal (bblock_take (&l, err, sizeof (err)), 0);
    assert_int_equal (utimensat (dfd, LOCK, old, 0), 0);
    assert_int_equal (bblock_beat (&l), 0);
    assert_int_equal (bblock_beat (&l), -1); /* one thread only */
    for (int i = 0; i < 60 && !moved; i++) {
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        assert_int_equal (fstatat (dfd, LOCK, &st, 0), 0);
        moved = st.st_mtim.tv_sec != 1000;
        (void) __real_nanosleep (&ts, NULL);
    }
    assert_true (moved);
    bblock_release (&l);
    assert_false (l.beating);
    assert_null (read_lock ());
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_proc_start, setup, teardown),
        cmocka_unit_test_setup_teardown (test_free_lock, setup, teardown),
        cmocka_unit_test_setup_teardown (test_live_holder_blocks, setup,
                                         teardown),
        cmocka_unit_test_setup_teardown (test_text_unwritable, setup, teardown),
        cmocka_unit_test_setup_teardown (test_moving_heartbeat_blocks, setup,
                                         teardown),
        cmocka_unit_test_setup_teardown (test_dead_pid, setup, teardown),
        cmocka_unit_test_setup_teardown (test_reused_pid, setup, teardown),
        cmocka_unit_test_setup_teardown (test_other_boot, setup, teardown),
        cmocka_unit_test_setup_teardown (test_stale_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown (test_done_meanwhile, setup, teardown),
        cmocka_unit_test_setup_teardown (test_release_not_ours, setup,
                                         teardown),
        cmocka_unit_test_setup_teardown (test_heartbeat_thread, setup,
                                         teardown),
    };
    return UNIT_RUN (tests);
}
