/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_blog.c - the block cache's write log: format, the commit rule,
 * wrap-around, replay after writers die (between reserve and commit,
 * and holding the lock), checksums, bounds against a scribbled log, and
 * allocation and I/O failures
 *
 * The log is compiled into this program (its internals are looked at and
 * scribbled on), with a hook that kills a writer at a chosen point;
 * msync and calloc are wrapped to fail on demand.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>

static void test_hook (const char *point);
#define BLOG_HOOK(point) test_hook (point)
#include "lib/blog.c"

#include "failalloc.h"
#include "unit.h"

FAILALLOC_DEFINE

int __real_msync (void *addr, size_t len, int flags);
int __wrap_msync (void *addr, size_t len, int flags);
static int msync_fail_at = -1, msync_count;

int __wrap_msync (void *addr, size_t len, int flags)
{
    if (++msync_count == msync_fail_at) {
        errno = EIO;
        return -1;
    }
    return __real_msync (addr, len, flags);
}

/* die at the hook point named, on its nth pass (in a child writer) */
static const char *die_point;
static int die_after;

static void test_hook (const char *point)
{
    if (die_point && !strcmp (point, die_point) && --die_after == 0)
        raise (SIGKILL);
}

static char path[PATH_MAX];
static int fd = -1;

static int setup (void **state)
{
    (void) state;
    snprintf (path, sizeof (path), "%s/test_blog.XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if ((fd = mkstemp (path)) < 0)
        return -1;
    msync_fail_at = -1;
    die_point = NULL;
    return 0;
}

static int teardown (void **state)
{
    (void) state;
    close (fd);
    unlink (path);
    return 0;
}

static struct blog *make (uint64_t cap, unsigned flags)
{
    tier_error_t e;
    struct blog *b;

    assert_int_equal (blog_format (fd, cap, &e), 0);
    b = blog_open (fd, flags, &e);
    assert_non_null (b);
    return b;
}

/* one record, committed: payload bytes are (seq + i) & 0xff */
static uint64_t put (struct blog *b, uint32_t file, uint64_t off, uint64_t len)
{
    struct blog_txn t;

    assert_int_equal (blog_reserve (b, BLOG_WRITE, file, off, len, &t), 0);
    for (uint64_t i = 0; i < len; i++)
        ((unsigned char *) t.payload)[i] = (unsigned char) (off + i);
    assert_int_equal (blog_commit (b, &t), 0);
    return t.seq;
}

static void take (struct blog *b, uint32_t file, uint64_t off, uint64_t len)
{
    struct blog_view v;
    tier_error_t e;

    assert_int_equal (blog_next (b, &v, &e), BLOG_READY);
    assert_int_equal (v.type, BLOG_WRITE);
    assert_int_equal (v.file, file);
    assert_int_equal (v.offset, off);
    assert_int_equal (v.length, len);
    for (uint64_t i = 0; i < len; i++)
        assert_int_equal (((const unsigned char *) v.payload)[i],
                          (unsigned char) (off + i));
    assert_int_equal (blog_consume (b, &v), 0);
}

static void test_format_refused (void **state)
{
    tier_error_t e;
    int p[2];

    (void) state;
    assert_int_equal (blog_format (fd, 4096 + 1, &e), -1);
    assert_int_equal (errno, EINVAL);
    assert_non_null (strstr (e.text, "multiple of 64"));
    assert_int_equal (blog_format (fd, 1024, &e), -1);
    assert_int_equal (pipe (p), 0);
    assert_int_equal (blog_format (p[0], 4096, &e), -1);
    assert_non_null (strstr (e.text, "regular file"));
    assert_null (blog_open (p[0], 0, &e));
    close (p[0]);
    close (p[1]);
    /* a file of zeros is no log; a log cut short is refused */
    assert_int_equal (ftruncate (fd, 8192), 0);
    assert_null (blog_open (fd, 0, &e));
    assert_int_equal (errno, EINVAL);
    assert_non_null (strstr (e.text, "not a write log"));
    assert_int_equal (blog_format (fd, 8192, &e), 0);
    assert_int_equal (ftruncate (fd, 4096 + 4096), 0);
    assert_null (blog_open (fd, 0, &e));
    assert_non_null (strstr (e.text, "does not match"));
}

static void test_append_drain (void **state)
{
    struct blog *b = make (65536, 0);
    struct blog_view v;
    struct blog_txn t;
    tier_error_t e;

    (void) state;
    assert_int_equal (blog_next (b, &v, &e), BLOG_EMPTY);
    assert_int_equal (put (b, 1, 0, 100), 0);
    assert_int_equal (put (b, 2, 4096, 1), 64 + 128);
    assert_int_equal (put (b, 1, 100, 0), 64 + 128 + 128);
    assert_int_equal (blog_reserve (b, BLOG_TRUNCATE, 3, 77, 0, &t), 0);
    assert_int_equal (blog_commit (b, &t), 0);
    assert_int_equal (blog_used (b), 64 + 128 + 128 + 64 + 64);
    take (b, 1, 0, 100);
    take (b, 2, 4096, 1);
    take (b, 1, 100, 0);
    assert_int_equal (blog_next (b, &v, &e), BLOG_READY);
    assert_int_equal (v.type, BLOG_TRUNCATE);
    assert_int_equal (v.offset, 77);
    /* only the record at tail may be consumed, and only once */
    assert_int_equal (blog_consume (b, &v), 0);
    assert_int_equal (blog_consume (b, &v), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (blog_next (b, &v, &e), BLOG_EMPTY);
    assert_int_equal (blog_used (b), 0);
    /* too large for one record; an unknown type */
    assert_int_equal (blog_reserve (b, BLOG_WRITE, 1, 0,
                                    blog_max_payload (b) + 1, &t),
                      -1);
    assert_int_equal (errno, EMSGSIZE);
    assert_int_equal (blog_reserve (b, BLOG_PAD, 1, 0, 0, &t), -1);
    assert_int_equal (errno, EINVAL);
    blog_close (b);
}

/* Laps of the ring with sizes that do not divide it: pads at its end,
 * a full ring says EAGAIN, and what comes out is what went in, in order
 * (a model queue of what is in the ring). */
static void test_wrap (void **state)
{
    struct blog *b = make (4096, 0);
    uint64_t q_off[64], q_len[64], off = 0;
    unsigned seed = 7, qh = 0, qt = 0, pads = 0;
    struct blog_txn t;

    (void) state;
    for (int round = 0; round < 3000; round++) {
        uint64_t len = rand_r (&seed) % (blog_max_payload (b) + 1);
        uint64_t before = blog_used (b), total = 64 + align_up (len);
        uint64_t phys = super_of (b)->head % 4096;
        uint64_t gap = phys + total > 4096 ? 4096 - phys : 0;
        if (rand_r (&seed) % 3 && qh - qt < 64) {
            if (blog_reserve (b, BLOG_WRITE, 9, off, len, &t) < 0) {
                assert_int_equal (errno, EAGAIN);
                assert_true (before + gap + total > 4096);
                continue;
            }
            assert_true (before + gap + total <= 4096);
            for (uint64_t i = 0; i < len; i++)
                ((unsigned char *) t.payload)[i] = (unsigned char) (off + i);
            assert_int_equal (blog_commit (b, &t), 0);
            if (blog_used (b) - before > 64 + align_up (len))
                pads++;
            q_off[qh % 64] = off;
            q_len[qh % 64] = len;
            qh++;
            off += len + 1;
        }
        else if (qt < qh) {
            take (b, 9, q_off[qt % 64], q_len[qt % 64]);
            qt++;
        }
    }
    while (qt < qh) {
        take (b, 9, q_off[qt % 64], q_len[qt % 64]);
        qt++;
    }
    assert_int_equal (blog_used (b), 0);
    assert_true (super_of (b)->head > 10 * 4096); /* many laps */
    assert_true (pads > 10);
    blog_close (b);
}

static bool dead (pid_t pid, uint64_t start)
{
    (void) pid;
    (void) start;
    return false;
}

/* The commit rule: a reserved record is waited for while its writer
 * lives, passed over once it died or gave up, never applied. */
static void test_uncommitted (void **state)
{
    struct blog *b = make (65536, 0), *r;
    struct blog_view v;
    struct blog_txn t;
    tier_error_t e;

    (void) state;
    assert_int_equal (blog_reserve (b, BLOG_WRITE, 1, 0, 10, &t), 0);
    put (b, 1, 10, 10);
    assert_int_equal (blog_next (b, &v, &e), BLOG_PENDING);
    assert_int_equal (v.writer, getpid ());
    assert_int_equal (blog_next (b, &v, &e), BLOG_PENDING); /* stays */
    blog_set_alive (b, dead);
    assert_int_equal (blog_next (b, &v, &e), BLOG_ABANDONED);
    assert_int_equal (blog_consume (b, &v), 0);
    take (b, 1, 10, 10);
    blog_set_alive (b, NULL);
    /* cancelled: passed over though its writer lives */
    assert_int_equal (blog_reserve (b, BLOG_WRITE, 1, 20, 10, &t), 0);
    blog_cancel (b, &t);
    assert_int_equal (blog_next (b, &v, &e), BLOG_ABANDONED);
    assert_int_equal (blog_consume (b, &v), 0);
    /* after a crash (BLOG_RECOVER: no writer is left) */
    assert_int_equal (blog_reserve (b, BLOG_WRITE, 1, 30, 10, &t), 0);
    put (b, 1, 40, 10);
    assert_non_null ((r = blog_open (fd, BLOG_RECOVER, &e)));
    assert_int_equal (blog_next (r, &v, &e), BLOG_ABANDONED);
    assert_int_equal (blog_consume (r, &v), 0);
    take (r, 1, 40, 10);
    assert_int_equal (blog_next (r, &v, &e), BLOG_EMPTY);
    blog_close (r);
    blog_close (b);
}

static struct rec *rec_at (struct blog *b, uint64_t seq)
{
    return (struct rec *) (void *) (ring (b) + seq % b->cap);
}

/* A torn header, a commit word from an earlier lap, and fields a user
 * scribbled (with a checksum that matches) are never applied. */
static void test_damage (void **state)
{
    struct blog *b = make (4096, 0);
    struct blog_view v;
    struct blog_txn t;
    tier_error_t e;
    struct rec *r;
    uint64_t seq, old, h;

    (void) state;
    seq = put (b, 1, 0, 100);
    r = rec_at (b, seq);
    r->offset ^= 1; /* torn */
    assert_int_equal (blog_next (b, &v, &e), BLOG_DAMAGED);
    assert_non_null (strstr (e.text, "checksum"));
    r->offset ^= 1;
    old = r->commit;
    take (b, 1, 0, 100);
    /* a lap later, at the same place, a record whose commit was not
     * written but the old word survived (a power failure) */
    while (super_of (b)->head % 4096) {
        put (b, 1, 0, 0);
        take (b, 1, 0, 0);
    }
    assert_int_equal (blog_reserve (b, BLOG_WRITE, 1, 0, 100, &t), 0);
    assert_int_equal (t.seq % 4096, seq % 4096);
    rec_at (b, t.seq)->commit = old;
    blog_set_alive (b, dead);
    assert_int_equal (blog_next (b, &v, &e), BLOG_ABANDONED);
    assert_int_equal (blog_consume (b, &v), 0);
    /* a length that leaves the ring, its checksum made to match */
    seq = put (b, 1, 0, 10);
    r = rec_at (b, seq);
    r->length = 1ull << 39;
    r->sum = rec_sum (r);
    r->commit = commit_word (r->seq, r->sum);
    assert_int_equal (blog_next (b, &v, &e), BLOG_DAMAGED);
    assert_non_null (strstr (e.text, "leaves the ring"));
    r->length = 10;
    r->sum = rec_sum (r);
    r->commit = commit_word (r->seq, r->sum);
    r->seq += 64;
    r->sum = rec_sum (r);
    assert_int_equal (blog_next (b, &v, &e), BLOG_DAMAGED);
    assert_non_null (strstr (e.text, "another position"));
    /* head and tail that do not add up */
    h = super_of (b)->head;
    super_of (b)->head = super_of (b)->tail + 4096 + 64;
    assert_int_equal (blog_next (b, &v, &e), BLOG_DAMAGED);
    assert_non_null (strstr (e.text, "do not add up"));
    assert_int_equal (blog_reserve (b, BLOG_WRITE, 1, 0, 1, &t), -1);
    assert_int_equal (errno, EPROTO);
    super_of (b)->head = h;
    blog_close (b);
}

/* An msync that fails: the record is cancelled and not acknowledged. */
static void test_io_failure (void **state)
{
    struct blog *b = make (65536, 0);
    struct blog_view v;
    struct blog_txn t;
    tier_error_t e;

    (void) state;
    for (int n = 1; n <= 4; n++) {
        msync_count = 0;
        msync_fail_at = n;
        if (blog_reserve (b, BLOG_WRITE, 1, (uint64_t) n, 10, &t) == 0) {
            assert_true (n >= 3); /* the header and head persisted */
            memset (t.payload, 1, 10);
            assert_int_equal (blog_commit (b, &t), -1);
            assert_int_equal (errno, EIO);
        }
        else
            assert_int_equal (errno, EIO);
        msync_fail_at = -1;
        if (super_of (b)->head != super_of (b)->tail) {
            assert_int_equal (blog_next (b, &v, &e), BLOG_ABANDONED);
            assert_int_equal (blog_consume (b, &v), 0);
        }
        assert_int_equal (blog_next (b, &v, &e), BLOG_EMPTY);
    }
    /* an allocation that fails */
    failalloc_arm (1);
    assert_null (blog_open (fd, 0, &e));
    assert_int_equal (errno, ENOMEM);
    failalloc_arm (-1);
    blog_close (b);
}

/* On persistent memory the same, by cache-line flushes. */
static void test_pmem (void **state)
{
    struct blog *b;
    tier_error_t e;

    (void) state;
    assert_int_equal (blog_format (fd, 65536, &e), 0);
    assert_non_null ((b = blog_open (fd, BLOG_PMEM, &e)));
    msync_count = 0;
    put (b, 5, 0, 1000);
    take (b, 5, 0, 1000);
    assert_int_equal (msync_count, 0);
    blog_close (b);
}

/* Writers in four processes at once, the drain meanwhile; one writer is
 * killed between reserve and commit, one while it holds the lock.  What
 * comes out is every committed record exactly once, each writer's in its
 * order, nothing of the killed reservations. */
#define WRITERS 4
#define PER 300

static void writer (struct blog *b, int w)
{
    if (w == 1) {
        die_point = "reserved";
        die_after = 100;
    }
    else if (w == 2) {
        die_point = "locked";
        die_after = 150;
    }
    for (int i = 0; i < PER; i++) {
        struct blog_txn t;
        while (blog_reserve (b, BLOG_WRITE, (uint32_t) w, (uint64_t) i, 48, &t)
               < 0) {
            if (errno != EAGAIN)
                _exit (2);
            usleep (100);
        }
        memset (t.payload, w * 16 + i % 16, 48);
        if (blog_commit (b, &t) < 0)
            _exit (3);
    }
    _exit (0);
}

static void test_processes (void **state)
{
    struct blog *b = make (16384, 0);
    int next[WRITERS] = { 0 }, live = WRITERS, abandoned = 0, status;
    pid_t pids[WRITERS];
    struct blog_view v;
    tier_error_t e;

    (void) state;
    alarm (120); /* a lock its dead holder left would hang the others */
    for (int w = 0; w < WRITERS; w++) {
        assert_true ((pids[w] = fork ()) >= 0);
        if (pids[w] == 0)
            writer (b, w);
    }
    for (;;) {
        enum blog_state st = blog_next (b, &v, &e);
        if (st == BLOG_DAMAGED)
            fail_msg ("%s", e.text);
        if (st == BLOG_READY) {
            const unsigned char *p = v.payload;
            assert_true (v.file < WRITERS);
            /* in order, none twice, none missing */
            assert_int_equal ((int) v.offset, next[v.file]);
            next[v.file] = (int) v.offset + 1;
            for (int i = 0; i < 48; i++)
                assert_int_equal (p[i], v.file * 16 + v.offset % 16);
        }
        if (st == BLOG_ABANDONED)
            abandoned++;
        if (st == BLOG_READY || st == BLOG_ABANDONED) {
            assert_int_equal (blog_consume (b, &v), 0);
            continue;
        }
        while (live && waitpid (-1, &status, WNOHANG) > 0)
            live--;
        if (!live && st == BLOG_EMPTY)
            break;
        usleep (50);
    }
    /* writer 2 died at its 150th lock, retries (EAGAIN) counted */
    for (int w = 0; w < WRITERS; w++)
        if (w == 2)
            assert_true (next[w] >= 1 && next[w] <= 149);
        else
            assert_int_equal (next[w], w == 1 ? 99 : PER);
    assert_int_equal (abandoned, 1); /* writer 1's last reservation */
    alarm (0);
    blog_close (b);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_format_refused, setup, teardown),
        cmocka_unit_test_setup_teardown (test_append_drain, setup, teardown),
        cmocka_unit_test_setup_teardown (test_wrap, setup, teardown),
        cmocka_unit_test_setup_teardown (test_uncommitted, setup, teardown),
        cmocka_unit_test_setup_teardown (test_damage, setup, teardown),
        cmocka_unit_test_setup_teardown (test_io_failure, setup, teardown),
        cmocka_unit_test_setup_teardown (test_pmem, setup, teardown),
        cmocka_unit_test_setup_teardown (test_processes, setup, teardown),
    };
    return UNIT_RUN (tests);
}
