/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_bdrain.c - the block cache's drain against real files: a random
 * workload of writes and truncates over three files ends with each file
 * as the same operations applied directly would make it, though the
 * drain is killed at hundreds of points (after a pwrite, after a record,
 * after the sync and before the tail moves); a failing file keeps its
 * records and names itself; records for unknown files are passed over;
 * the byte budget and a damaged log stop a pass
 *
 * The drain is compiled into this program with a hook that kills it on
 * its nth pass through a point.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

static void test_hook (const char *point);
#define BDRAIN_HOOK(point) test_hook (point)
#include "lib/bdrain.c"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

static int die_after; /* 0: never */

static void test_hook (const char *point)
{
    (void) point;
    if (die_after && --die_after == 0)
        raise (SIGKILL);
}

#define NFILES 3
#define FMAX (64 * 1024)

static char dir[PATH_MAX];
static int logfd = -1;
static int fds[80];
static int nfds;

struct model {
    unsigned char data[FMAX + 8192];
    uint64_t size;
};
static struct model model[NFILES];

static int fd_of (void *arg, uint32_t file)
{
    (void) arg;
    return file < (uint32_t) nfds ? fds[file] : -1;
}

static int open_file (int i)
{
    char p[PATH_MAX + 32];

    snprintf (p, sizeof (p), "%s/f%d", dir, i);
    return open (p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

static int setup (void **state)
{
    char p[PATH_MAX + 32];

    (void) state;
    snprintf (dir, sizeof (dir), "%s/test_bdrain.XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if (!mkdtemp (dir))
        return -1;
    snprintf (p, sizeof (p), "%s/log", dir);
    if ((logfd = open (p, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
        return -1;
    nfds = NFILES;
    for (int i = 0; i < NFILES; i++)
        if ((fds[i] = open_file (i)) < 0)
            return -1;
    memset (model, 0, sizeof (model));
    die_after = 0;
    return 0;
}

static int teardown (void **state)
{
    char cmd[PATH_MAX + 16];

    (void) state;
    close (logfd);
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0)
            close (fds[i]);
    snprintf (cmd, sizeof (cmd), "rm -rf %s", dir);
    return system (cmd) == 0 ? 0 : -1;
}

static struct blog *new_log (uint64_t cap)
{
    tier_error_t e;
    struct blog *b;

    assert_int_equal (blog_format (logfd, cap, &e), 0);
    assert_non_null ((b = blog_open (logfd, 0, &e)));
    return b;
}

/* One operation, logged and applied to the model (a cancelled one only
 * logged). */
static void op (struct blog *b, unsigned *seed)
{
    uint32_t f = (uint32_t) (rand_r (seed) % NFILES);
    struct model *m = &model[f];
    struct blog_txn t;

    if (rand_r (seed) % 20 == 0) {
        uint64_t size = (uint64_t) (rand_r (seed) % FMAX);
        assert_int_equal (blog_reserve (b, BLOG_TRUNCATE, f, size, 0, &t), 0);
        assert_int_equal (blog_commit (b, &t), 0);
        if (size < m->size)
            memset (m->data + size, 0, m->size - size);
        m->size = size;
        return;
    }
    {
        uint64_t off = (uint64_t) (rand_r (seed) % (FMAX - 4096));
        uint64_t len = 1 + (uint64_t) (rand_r (seed) % 4096);
        unsigned char c = (unsigned char) rand_r (seed);
        assert_int_equal (blog_reserve (b, BLOG_WRITE, f, off, len, &t), 0);
        memset (t.payload, c, len);
        if (rand_r (seed) % 25 == 0) {
            blog_cancel (b, &t); /* never acknowledged */
            return;
        }
        assert_int_equal (blog_commit (b, &t), 0);
        memset (m->data + off, c, len);
        if (off + len > m->size)
            m->size = off + len;
    }
}

static void check_files (void)
{
    static unsigned char buf[FMAX + 8192];

    for (int i = 0; i < NFILES; i++) {
        struct stat st;
        assert_int_equal (fstat (fds[i], &st), 0);
        assert_int_equal ((uint64_t) st.st_size, model[i].size);
        assert_int_equal (pread (fds[i], buf, sizeof (buf), 0),
                          (ssize_t) model[i].size);
        assert_memory_equal (buf, model[i].data, model[i].size);
    }
}

/* Drain to the end in a child killed at its kth hook; 1 if it was. */
static int drain_killed_at (struct blog *b, int k)
{
    int status;
    pid_t pid = fork ();

    assert_true (pid >= 0);
    if (pid == 0) {
        struct bdrain_result r;
        tier_error_t e;
        die_after = k;
        do {
            if (bdrain_pass (b, fd_of, NULL, 8192, &r, &e) < 0)
                _exit (2);
        } while (r.stopped != BLOG_EMPTY);
        _exit (0);
    }
    assert_int_equal (waitpid (pid, &status, 0), pid);
    if (WIFSIGNALED (status)) {
        assert_int_equal (WTERMSIG (status), SIGKILL);
        return 1;
    }
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    return 0;
}

static void test_killed_anywhere (void **state)
{
    unsigned seed = 42;
    int kills = 0, rounds = 0;

    (void) state;
    while (kills < 250) {
        struct blog *b = new_log (256 * 1024);
        for (int i = 0; i < NFILES; i++) {
            assert_int_equal (ftruncate (fds[i], 0), 0);
            memset (&model[i], 0, sizeof (model[i]));
        }
        for (int i = 0; i < 40; i++)
            op (b, &seed);
        /* killed at hook 1, 2, ... until a drain gets through: every
         * point of every pass is hit once */
        for (int k = 1; drain_killed_at (b, k); k++)
            kills++;
        assert_int_equal (blog_used (b), 0);
        check_files ();
        blog_close (b);
        rounds++;
    }
    print_message ("# %d drains killed over %d workloads\n", kills, rounds);
}

static void test_failure_kept (void **state)
{
    struct blog *b = new_log (65536);
    struct bdrain_result r;
    struct blog_txn t;
    tier_error_t e;
    int good, full;

    (void) state;
    for (uint32_t f = 0; f < 3; f++) {
        assert_int_equal (blog_reserve (b, BLOG_WRITE, f, 0, 5, &t), 0);
        memcpy (t.payload, "hello", 5);
        assert_int_equal (blog_commit (b, &t), 0);
    }
    /* file 1 on a full file system */
    assert_true ((full = open ("/dev/full", O_WRONLY | O_CLOEXEC)) >= 0);
    good = fds[1];
    fds[1] = full;
    assert_int_equal (bdrain_pass (b, fd_of, NULL, 0, &r, &e), -1);
    assert_int_equal (r.err, ENOSPC);
    assert_int_equal (r.err_file, 1);
    assert_int_equal (r.records, 1); /* file 0's, freed */
    assert_non_null (strstr (e.text, "file 1"));
    assert_non_null (strstr (e.text, strerror (ENOSPC)));
    assert_int_equal (blog_used (b), 2 * 128); /* file 1's and 2's kept */
    /* again: the same */
    assert_int_equal (bdrain_pass (b, fd_of, NULL, 0, &r, &e), -1);
    assert_int_equal (r.err_file, 1);
    /* the fault gone, both drain */
    fds[1] = good;
    close (full);
    assert_int_equal (bdrain_pass (b, fd_of, NULL, 0, &r, &e), 0);
    assert_int_equal (r.records, 2);
    assert_int_equal (r.stopped, BLOG_EMPTY);
    for (int i = 0; i < 3; i++) {
        char buf[8] = { 0 };
        assert_int_equal (pread (fds[i], buf, sizeof (buf), 0), 5);
        assert_string_equal (buf, "hello");
    }
    blog_close (b);
}

static void test_refused_budget_damage (void **state)
{
    struct blog *b = new_log (65536);
    struct bdrain_result r;
    struct blog_view v;
    struct blog_txn t;
    tier_error_t e;

    (void) state;
    /* a record for a file the job never opened: passed over */
    assert_int_equal (blog_reserve (b, BLOG_WRITE, 7, 0, 5, &t), 0);
    assert_int_equal (blog_commit (b, &t), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal (blog_reserve (b, BLOG_WRITE, 0, (uint64_t) i * 100,
                                        100, &t),
                          0);
        memset (t.payload, 'a' + i, 100);
        assert_int_equal (blog_commit (b, &t), 0);
    }
    /* a budget of 150 bytes: two records a pass */
    assert_int_equal (bdrain_pass (b, fd_of, NULL, 150, &r, &e), 0);
    assert_int_equal (r.refused, 1);
    assert_int_equal (r.records, 2);
    assert_int_equal (r.stopped, BLOG_READY);
    /* a pending record stops a pass; what is before it drains */
    assert_int_equal (blog_reserve (b, BLOG_WRITE, 0, 1000, 10, &t), 0);
    assert_int_equal (bdrain_pass (b, fd_of, NULL, 0, &r, &e), 0);
    assert_int_equal (r.records, 2);
    assert_int_equal (r.stopped, BLOG_PENDING);
    assert_int_equal (blog_commit (b, &t), 0);
    /* a damaged header stops it, saying so */
    assert_int_equal (blog_reserve (b, BLOG_WRITE, 0, 2000, 10, &t), 0);
    assert_int_equal (blog_commit (b, &t), 0);
    ((unsigned char *) t.rec)[20] ^= 0xff;
    assert_int_equal (bdrain_pass (b, fd_of, NULL, 0, &r, &e), -1);
    assert_int_equal (r.stopped, BLOG_DAMAGED);
    assert_int_equal (r.records, 1); /* the one before it */
    assert_non_null (strstr (e.text, "damaged"));
    assert_int_equal (blog_peek (b, blog_tail (b), &v, &e), BLOG_DAMAGED);
    blog_close (b);
}

/* More files in one pass than it syncs at once: the rest next pass. */
static void test_many_files (void **state)
{
    struct blog *b = new_log (65536);
    struct bdrain_result r;
    struct blog_txn t;
    tier_error_t e;

    (void) state;
    for (int i = NFILES; i < 70; i++)
        assert_true ((fds[i] = open_file (i)) >= 0);
    nfds = 70;
    for (uint32_t f = 0; f < 70; f++) {
        assert_int_equal (blog_reserve (b, BLOG_WRITE, f, 0, 1, &t), 0);
        assert_int_equal (blog_commit (b, &t), 0);
    }
    assert_int_equal (bdrain_pass (b, fd_of, NULL, 0, &r, &e), 0);
    assert_int_equal (r.records, TOUCHED_MAX);
    assert_int_equal (r.stopped, BLOG_READY);
    assert_int_equal (bdrain_pass (b, fd_of, NULL, 0, &r, &e), 0);
    assert_int_equal (r.records, 70 - TOUCHED_MAX);
    assert_int_equal (r.stopped, BLOG_EMPTY);
    blog_close (b);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_killed_anywhere, setup, teardown),
        cmocka_unit_test_setup_teardown (test_failure_kept, setup, teardown),
        cmocka_unit_test_setup_teardown (test_refused_budget_damage, setup,
                                         teardown),
        cmocka_unit_test_setup_teardown (test_many_files, setup, teardown),
    };
    return UNIT_RUN (tests);
}
