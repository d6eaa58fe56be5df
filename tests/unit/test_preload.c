/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_preload.c - the interposer's per-process cache: across fork, a
 * fork while a slot is half-written must leave no entry that opens
 * another file's replica, and the slot must work again in the child; a
 * cached descriptor's number that the program closed and reused opens
 * nothing and is never closed by the cache
 *
 * The interposer is compiled into this program, with a hook in the
 * middle of a put (TIER_PRELOAD_TEST); the program's own opens pass
 * through it (no TIER_BATCH_DIRS), as in any process it is preloaded in.
 */
#define TIER_PRELOAD_TEST 1
#include "agent/preload/preload.c"

/* the block cache's write path (wcache.c) is t/0150's: off here */
bool tier_wcache_wants (int flags)
{
    (void) flags;
    return false;
}
bool tier_wcache_pending (void)
{
    return false;
}
void tier_wcache_before_open (const char *norm)
{
    (void) norm;
}
void tier_wcache_opened (int fd)
{
    (void) fd;
}
#include "unit.h"

#include <sys/wait.h>

static char tmpdir[PATH_MAX];
static char rep_p[PATH_MAX + 16], rep_q[PATH_MAX + 16];
static char path_p[64], path_q[64];     /* two paths of one slot */
static int fd_p = -1, fd_q = -1;        /* the replicas, O_PATH */

enum hook_mode { HOOK_OFF, HOOK_OTHER_THREAD, HOOK_SAME_THREAD };

static volatile int hook_mode;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase;
static pid_t same_thread_child;         /* 0 in that child */

/* What path opens through the cache: its replica's first byte, '-' if
 * the cache does not answer, '?' if unreadable. */
static char cached_byte (const char *path)
{
    char c = '?';
    int fd = cache_open (path, O_RDONLY);

    if (fd < 0)
        return '-';
    if (read (fd, &c, 1) != 1)
        c = '?';
    close (fd);
    return c;
}

/* In the child: the half-written slot is no entry (1 if it served a
 * replica: Q's bytes for P), and puts work again (2 if one was lost). */
static int child_checks (void)
{
    if (cached_byte (path_p) != '-')
        return 1;
    cache_put (path_p, fd_p, 1, 30);
    if (cached_byte (path_p) != 'P')
        return 2;
    return 0;
}

void tier_preload_test_mid_put (void)
{
    int mode = hook_mode;

    hook_mode = HOOK_OFF;
    if (mode == HOOK_OTHER_THREAD) {
        /* another thread forks while this one is in the middle */
        pthread_mutex_lock (&mu);
        phase = 1;
        pthread_cond_broadcast (&cv);
        while (phase != 2)
            pthread_cond_wait (&cv, &mu);
        pthread_mutex_unlock (&mu);
    }
    else if (mode == HOOK_SAME_THREAD) {
        /* as a signal handler of this thread would: fork, and in the
         * child look up the slot before the put resumes */
        if ((same_thread_child = fork ()) == 0 && cached_byte (path_p) != '-')
            _exit (1);
    }
}

static void *forker (void *arg)
{
    int *status = arg;
    pid_t pid;

    pthread_mutex_lock (&mu);
    while (phase != 1)
        pthread_cond_wait (&cv, &mu);
    pthread_mutex_unlock (&mu);
    if ((pid = fork ()) == 0)
        _exit (child_checks ());
    if (pid < 0 || waitpid (pid, status, 0) != pid)
        *status = -1;
    pthread_mutex_lock (&mu);
    phase = 2;
    pthread_cond_broadcast (&cv);
    pthread_mutex_unlock (&mu);
    return NULL;
}

static void write_file (const char *path, const char *text)
{
    FILE *f = fopen (path, "w");

    assert_non_null (f);
    assert_int_equal (fputs (text, f) >= 0, 1);
    assert_int_equal (fclose (f), 0);
}

static int setup (void **state)
{
    unsigned want;

    (void) state;
    snprintf (tmpdir, sizeof (tmpdir), "%s/test_preload.XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if (!mkdtemp (tmpdir))
        return -1;
    snprintf (rep_p, sizeof (rep_p), "%s/replica-p", tmpdir);
    snprintf (rep_q, sizeof (rep_q), "%s/replica-q", tmpdir);
    write_file (rep_p, "P");
    write_file (rep_q, "Q");
    fd_p = open (rep_p, O_PATH | O_CLOEXEC);
    fd_q = open (rep_q, O_PATH | O_CLOEXEC);
    if (fd_p < 0 || fd_q < 0 || !st.cache_fds_ok)
        return -1;
    snprintf (path_q, sizeof (path_q), "/gfs/db/q");
    want = slot_of (path_q);
    for (int i = 0;; i++) {
        snprintf (path_p, sizeof (path_p), "/gfs/db/p%d", i);
        if (slot_of (path_p) == want)
            break;
    }
    memset (st.cache, 0, sizeof (st.cache));
    st.cache_fds = 0;
    return 0;
}

static int teardown (void **state)
{
    (void) state;
    close (fd_p);
    close (fd_q);
    unlink (rep_p);
    unlink (rep_q);
    rmdir (tmpdir);
    return 0;
}

static void test_put_open (void **state)
{
    (void) state;
    cache_put (path_q, fd_q, 1, 30);
    assert_int_equal (cached_byte (path_q), 'Q');
    assert_int_equal (cached_byte (path_p), '-');       /* same slot */
    cache_put (path_p, fd_p, 1, 30);
    assert_int_equal (cached_byte (path_p), 'P');
    assert_int_equal (cached_byte (path_q), '-');
    cache_put (path_q, fd_q, 1, 0); /* revalidate 0 */
    assert_int_equal (cached_byte (path_q), '-');
    assert_int_equal (cached_byte (path_p), 'P');
}

static void test_fork_by_another_thread (void **state)
{
    pthread_t th;
    int status = -1;

    (void) state;
    cache_put (path_q, fd_q, 1, 30);
    assert_int_equal (cached_byte (path_q), 'Q');
    phase = 0;
    hook_mode = HOOK_OTHER_THREAD;
    assert_int_equal (pthread_create (&th, NULL, forker, &status), 0);
    cache_put (path_p, fd_p, 1, 30); /* the child forks in the middle */
    pthread_join (th, NULL);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    assert_int_equal (cached_byte (path_p), 'P');       /* the parent's */
}

static void test_fork_by_the_writer (void **state)
{
    int status = -1;

    (void) state;
    cache_put (path_q, fd_q, 1, 30);
    hook_mode = HOOK_SAME_THREAD;
    cache_put (path_p, fd_p, 1, 30);
    if (same_thread_child == 0)         /* the child: the put resumed */
        _exit (cached_byte (path_p) == 'P' ? 0 : 2);
    assert_true (same_thread_child > 0);
    assert_int_equal (waitpid (same_thread_child, &status, 0),
                      same_thread_child);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    assert_int_equal (cached_byte (path_p), 'P');
}

/* The program closes the cache's descriptor and opens another file at
 * its number: the cache does not open that file, and replacing the entry
 * does not close it. */
static void test_number_reused (void **state)
{
    struct centry *e = &st.cache[slot_of (path_p)];
    int n;

    (void) state;
    cache_put (path_p, fd_p, 1, 30);
    assert_int_equal (cached_byte (path_p), 'P');
    n = e->pfd;
    assert_true (n >= CACHE_FD_BASE);
    assert_int_equal (close (n), 0);
    assert_int_equal (cached_byte (path_p), '-'); /* gone */
    cache_put (path_p, fd_p, 1, 30);
    n = e->pfd;
    assert_int_equal (dup2 (fd_q, n), n);         /* Q at the cache's number */
    assert_int_equal (cached_byte (path_p), '-'); /* not Q's bytes */
    cache_put (path_q, fd_q, 1, 30);              /* replaces the entry */
    assert_true (fcntl (n, F_GETFD) >= 0);        /* the program's, still */
    assert_int_equal (cached_byte (path_q), 'Q');
    close (n);
    /* the cache holds at most CACHE_FDS descriptors */
    for (int i = 0; i < 2 * CACHE_FDS; i++) {
        char p[64];
        snprintf (p, sizeof (p), "/gfs/db/many%d", i);
        cache_put (p, fd_p, 1, 30);
    }
    assert_true (st.cache_fds <= CACHE_FDS);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_put_open, setup, teardown),
        cmocka_unit_test_setup_teardown (test_fork_by_another_thread, setup,
                                         teardown),
        cmocka_unit_test_setup_teardown (test_fork_by_the_writer, setup,
                                         teardown),
        cmocka_unit_test_setup_teardown (test_number_reused, setup, teardown),
    };
    return UNIT_RUN (tests);
}
