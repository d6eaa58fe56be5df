/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_copy.c - the copy engine: files, holes, fallbacks, changes, ENOSPC,
 * cancellation, publication rules and trees
 *
 * Linked with -Wl,--wrap= for copy_file_range, sendfile, renameat2 and
 * fsync (see copy.mk), so that the fallbacks and failures of the engine
 * can be forced and its concurrency observed; and for clock_gettime and
 * clock_nanosleep, so that the rate limit's accounting runs on a virtual
 * clock (a loaded machine oversleeps, which changes the figures).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/copy.h"
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KiB 1024ull
#define MiB (1024ull * 1024)

/*
 * Wrappers: failures and delays on demand.
 */

static int wrap_cfr_errno;              /* copy_file_range fails with it */
static int wrap_cfr_zero;               /* copy_file_range returns 0 */
static int wrap_sendfile_errno;
static size_t wrap_sendfile_short;      /* sendfile moves at most this */
static int wrap_renameat2_errno;
static int wrap_fsync_errno;            /* the next fsync fails with it */
static atomic_int wrap_delay_us;        /* copy_file_range sleeps */
static atomic_int inflight, max_inflight;
static atomic_int cfr_calls;

ssize_t __real_copy_file_range (int, loff_t *, int, loff_t *, size_t,
                                unsigned int);
ssize_t __wrap_copy_file_range (int in, loff_t *oin, int out, loff_t *oout,
                                size_t n, unsigned int flags);
ssize_t __real_sendfile (int, int, off_t *, size_t);
ssize_t __wrap_sendfile (int out, int in, off_t *off, size_t n);
int __real_renameat2 (int, const char *, int, const char *, unsigned int);
int __real_clock_gettime (clockid_t, struct timespec *);
int __wrap_clock_gettime (clockid_t id, struct timespec *ts);
int __real_clock_nanosleep (clockid_t, int, const struct timespec *,
                            struct timespec *);
int __wrap_clock_nanosleep (clockid_t id, int flags, const struct timespec *req,
                            struct timespec *rem);
int __wrap_renameat2 (int ofd, const char *o, int nfd, const char *n,
                      unsigned int flags);
int __real_fsync (int);
int __wrap_fsync (int fd);

/* The virtual monotonic clock: while *vclock is non-zero, CLOCK_MONOTONIC
 * reads it and an absolute sleep moves it to the deadline plus
 * vclock_oversleep (a process that wakes late); it lives in shared memory
 * so that forked children share it. */
static _Atomic uint64_t *vclock;
static uint64_t vclock_oversleep;

int __wrap_clock_gettime (clockid_t id, struct timespec *ts)
{
    uint64_t now;

    if (id != CLOCK_MONOTONIC || !vclock || !(now = atomic_load (vclock)))
        return __real_clock_gettime (id, ts);
    ts->tv_sec = (time_t) (now / 1000000000ull);
    ts->tv_nsec = (long) (now % 1000000000ull);
    return 0;
}

int __wrap_clock_nanosleep (clockid_t id, int flags, const struct timespec *req,
                            struct timespec *rem)
{
    uint64_t want, now;

    if (id != CLOCK_MONOTONIC || !(flags & TIMER_ABSTIME) || !vclock
        || !(now = atomic_load (vclock)))
        return __real_clock_nanosleep (id, flags, req, rem);
    want = (uint64_t) req->tv_sec * 1000000000ull + (uint64_t) req->tv_nsec
           + vclock_oversleep;
    while (now < want && !atomic_compare_exchange_weak (vclock, &now, want))
        ;
    return 0;
}

static void vclock_start (uint64_t oversleep_ns)
{
    if (!vclock) {
        vclock = mmap (NULL, sizeof *vclock, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_true (vclock != MAP_FAILED);
    }
    atomic_store (vclock, 1000000000ull);
    vclock_oversleep = oversleep_ns;
}

static void vclock_stop (void)
{
    atomic_store (vclock, 0);
}

ssize_t __wrap_copy_file_range (int in, loff_t *oin, int out, loff_t *oout,
                                size_t n, unsigned int flags)
{
    ssize_t r;
    int now, max;

    atomic_fetch_add (&cfr_calls, 1);
    if (wrap_cfr_errno) {
        errno = wrap_cfr_errno;
        return -1;
    }
    if (wrap_cfr_zero)
        return 0;
    now = atomic_fetch_add (&inflight, 1) + 1;
    max = atomic_load (&max_inflight);
    while (now > max && !atomic_compare_exchange_weak (&max_inflight, &max,
                                                       now))
        ;
    if (atomic_load (&wrap_delay_us))
        usleep (atomic_load (&wrap_delay_us));
    r = __real_copy_file_range (in, oin, out, oout, n, flags);
    atomic_fetch_sub (&inflight, 1);
    return r;
}

ssize_t __wrap_sendfile (int out, int in, off_t *off, size_t n)
{
    if (wrap_sendfile_errno) {
        errno = wrap_sendfile_errno;
        return -1;
    }
    if (wrap_sendfile_short && n > wrap_sendfile_short)
        n = wrap_sendfile_short;
    return __real_sendfile (out, in, off, n);
}

int __wrap_renameat2 (int ofd, const char *o, int nfd, const char *n,
                      unsigned int flags)
{
    if (wrap_renameat2_errno) {
        errno = wrap_renameat2_errno;
        return -1;
    }
    return __real_renameat2 (ofd, o, nfd, n, flags);
}

int __wrap_fsync (int fd)
{
    if (wrap_fsync_errno) {
        errno = wrap_fsync_errno;
        wrap_fsync_errno = 0;
        return -1;
    }
    return __real_fsync (fd);
}

static void wrap_reset (void)
{
    wrap_cfr_errno = wrap_cfr_zero = wrap_sendfile_errno = 0;
    wrap_sendfile_short = 0;
    wrap_renameat2_errno = wrap_fsync_errno = 0;
    atomic_store (&wrap_delay_us, 0);
    atomic_store (&inflight, 0);
    atomic_store (&max_inflight, 0);
    atomic_store (&cfr_calls, 0);
}

/*
 * Helpers.
 */

static char root[PATH_MAX];             /* on /tmp (ext4 here) */
static char shm[PATH_MAX];              /* on /dev/shm (tmpfs) */

static int setup (void **state)
{
    snprintf (root, sizeof (root), "/tmp/test_copy.XXXXXX");
    if (!mkdtemp (root))
        return -1;
    snprintf (shm, sizeof (shm), "/dev/shm/test_copy.XXXXXX");
    if (!mkdtemp (shm))
        shm[0] = '\0';
    wrap_reset ();
    return 0;
}

static int teardown (void **state)
{
    char cmd[3 * PATH_MAX + 64];

    wrap_reset ();
    snprintf (cmd, sizeof (cmd), "chmod -R u+rwx '%s' 2>/dev/null;"
              " rm -rf '%s' '%s'", root, root, shm[0] ? shm : root);
    return system (cmd) == 0 ? 0 : -1;
}

static char *pathf (char *buf, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
static char *pathf (char *buf, const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (buf, PATH_MAX, fmt, ap);
    va_end (ap);
    return buf;
}

static void mkdir_p (const char *path, mode_t mode)
{
    assert_int_equal (mkdir (path, mode), 0);
}

static void fill (unsigned char *buf, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char) x;
    }
}

/* Write n pseudo-random bytes at off. */
static void write_at (int fd, off_t off, size_t n, uint64_t seed)
{
    unsigned char *buf = malloc (n ? n : 1);

    assert_non_null (buf);
    fill (buf, n, seed);
    assert_int_equal (pwrite (fd, buf, n, off), (ssize_t) n);
    free (buf);
}

static void make_file (const char *path, size_t size, mode_t mode,
                       uint64_t seed)
{
    int fd = open (path, O_CREAT | O_TRUNC | O_WRONLY, 0600);

    assert_true (fd >= 0);
    if (size)
        write_at (fd, 0, size, seed);
    assert_int_equal (fchmod (fd, mode), 0);
    assert_int_equal (close (fd), 0);
}

static void set_times (const char *path, time_t asec, long ansec,
                       time_t msec, long mnsec)
{
    struct timespec ts[2] = { { asec, ansec }, { msec, mnsec } };

    assert_int_equal (utimensat (AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static unsigned char *slurp (const char *path, size_t *len)
{
    struct stat st;
    unsigned char *buf;
    int fd = open (path, O_RDONLY);

    assert_true (fd >= 0);
    assert_int_equal (fstat (fd, &st), 0);
    buf = malloc (st.st_size ? st.st_size : 1);
    assert_non_null (buf);
    for (off_t off = 0; off < st.st_size;) {
        ssize_t r = pread (fd, buf + off, st.st_size - off, off);
        assert_true (r > 0);
        off += r;
    }
    close (fd);
    *len = st.st_size;
    return buf;
}

static void assert_same_content (const char *a, const char *b)
{
    size_t la, lb;
    unsigned char *ba = slurp (a, &la), *bb = slurp (b, &lb);

    assert_int_equal (la, lb);
    assert_memory_equal (ba, bb, la);
    free (ba);
    free (bb);
}

static void assert_same_meta (const char *a, const char *b)
{
    struct stat sa, sb;

    assert_int_equal (lstat (a, &sa), 0);
    assert_int_equal (lstat (b, &sb), 0);
    assert_int_equal (sa.st_mode, sb.st_mode);
    assert_int_equal (sa.st_size, sb.st_size);
    assert_int_equal (sa.st_mtim.tv_sec, sb.st_mtim.tv_sec);
    assert_int_equal (sa.st_mtim.tv_nsec, sb.st_mtim.tv_nsec);
}

/* The copy gets the source's atime from before the copy (reading the
 * source, ours or the test's, may change the source's own). */
static void assert_atime (const char *path, time_t sec, long nsec)
{
    struct stat st;

    assert_int_equal (lstat (path, &st), 0);
    assert_int_equal (st.st_atim.tv_sec, sec);
    assert_int_equal (st.st_atim.tv_nsec, nsec);
}

/* Entries of a directory (without . and ..); temporaries counted in
 * *temps, recursively. */
static int count_entries (const char *path, int *temps)
{
    DIR *d = opendir (path);
    struct dirent *de;
    int n = 0;

    assert_non_null (d);
    while ((de = readdir (d))) {
        char sub[PATH_MAX];

        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        n++;
        if (tier_copy_is_temp_name (de->d_name) && temps)
            (*temps)++;
        if (de->d_type == DT_DIR && temps)
            count_entries (pathf (sub, "%s/%s", path, de->d_name), temps);
    }
    closedir (d);
    return n;
}

static void assert_dir_empty (const char *path)
{
    int temps = 0;

    assert_int_equal (count_entries (path, &temps), 0);
}

static void assert_no_temps (const char *path)
{
    int temps = 0;

    count_entries (path, &temps);
    assert_int_equal (temps, 0);
}

static int opendir_path (const char *path)
{
    int fd = open (path, O_PATH | O_DIRECTORY);

    assert_true (fd >= 0);
    return fd;
}

/* Copy the file src into the directory dir as name. */
static int copy_path (const char *src, const char *dir, const char *name,
                      const struct tier_copy_opts *opts,
                      struct tier_copy_result *res, tier_error_t *error)
{
    int sfd = open (src, O_RDONLY), dfd = opendir_path (dir), rc, saved;

    assert_true (sfd >= 0);
    rc = tier_copy_fd (sfd, dfd, name, opts, res, error);
    saved = errno;
    close (sfd);
    close (dfd);
    errno = saved;
    return rc;
}

/* Progress recorder, with an action at a given call. */
enum prog_action { ACT_NONE, ACT_APPEND, ACT_OVERWRITE, ACT_TRUNCATE,
                   ACT_CANCEL };

struct prog {
    int calls;
    uint64_t last_done, last_total;
    bool decreased;
    int at;                             /* act at this call (1-based) */
    enum prog_action action;
    const char *path;
    atomic_int *cancel;
};

static void prog_cb (uint64_t done, uint64_t total, void *arg)
{
    struct prog *p = arg;
    int fd;

    if (done < p->last_done)
        p->decreased = true;
    p->last_done = done;
    p->last_total = total;
    if (++p->calls != p->at)
        return;
    switch (p->action) {
        case ACT_APPEND:
            fd = open (p->path, O_WRONLY | O_APPEND);
            assert_true (fd >= 0);
            assert_int_equal (write (fd, "x", 1), 1);
            close (fd);
            break;
        case ACT_OVERWRITE:             /* same size, new mtime/ctime */
            fd = open (p->path, O_WRONLY);
            assert_true (fd >= 0);
            assert_int_equal (pwrite (fd, "y", 1, 5), 1);
            close (fd);
            break;
        case ACT_TRUNCATE:
            assert_int_equal (truncate (p->path, 1000), 0);
            break;
        case ACT_CANCEL:
            atomic_store (p->cancel, 1);
            break;
        default:
            break;
    }
}

/*
 * Single files.
 */

static void test_plain (void **state)
{
    char src[PATH_MAX], dst[PATH_MAX], dir[PATH_MAX];
    struct tier_copy_result res;
    struct tier_copy_opts opts = { 0 };
    tier_error_t error;
    struct stat st;

    mkdir_p (pathf (dir, "%s/plain", root), 0755);
    pathf (src, "%s/src.dat", root);
    make_file (src, 3 * MiB + 17, 0640, 1);
    set_times (src, 1000000000, 987654321, 1000000001, 123456789);
    assert_int_equal (copy_path (src, dir, "copy.dat", NULL, &res, &error), 0);
    pathf (dst, "%s/copy.dat", dir);
    assert_atime (dst, 1000000000, 987654321);      /* before reading it */
    assert_same_content (src, dst);
    assert_same_meta (src, dst);
    assert_int_equal (res.files, 1);
    assert_int_equal (res.bytes, 3 * MiB + 17);
    assert_int_equal (res.bytes_total, 3 * MiB + 17);
    assert_int_equal (res.methods, TIER_COPY_CFR);      /* same ext4 */
    assert_int_equal (res.threads, 1);
    assert_int_equal (stat (src, &st), 0);
    assert_int_equal (res.src.st_ino, st.st_ino);
    assert_int_equal (count_entries (dir, NULL), 1);

    /* set-id bits are dropped unless the owner is kept */
    make_file (src, 1000, 06755, 2);
    assert_int_equal (copy_path (src, dir, "suid", NULL, NULL, &error), 0);
    assert_int_equal (stat (pathf (dst, "%s/suid", dir), &st), 0);
    assert_int_equal (st.st_mode & 07777, 0755);

    /* an explicit mode for the copies */
    opts.flags = TIER_COPY_MODE;
    opts.mode = 0444;
    assert_int_equal (copy_path (src, dir, "ro", &opts, NULL, &error), 0);
    assert_int_equal (stat (pathf (dst, "%s/ro", dir), &st), 0);
    assert_int_equal (st.st_mode & 07777, 0444);

    /* replacing an existing file is the default */
    make_file (src, 5000, 0600, 3);
    assert_int_equal (copy_path (src, dir, "copy.dat", NULL, NULL, &error),
                      0);
    assert_same_content (src, pathf (dst, "%s/copy.dat", dir));
    assert_int_equal (count_entries (dir, NULL), 3);
    assert_string_equal (tier_copy_method_name (TIER_COPY_CFR),
                         "copy_file_range");
    assert_string_equal (tier_copy_method_name (TIER_COPY_SENDFILE
                                                | TIER_COPY_RW),
                         "sendfile+read/write");
}

static void test_owner (void **state)
{
    char src[PATH_MAX], dst[PATH_MAX], dir[PATH_MAX];
    struct tier_copy_opts opts = { .flags = TIER_COPY_OWNER };
    tier_error_t error;
    struct stat st;

    if (geteuid () != 0)
        skip ();
    mkdir_p (pathf (dir, "%s/owner", root), 0755);
    pathf (src, "%s/owned", root);
    make_file (src, 4096, 0600, 4);
    assert_int_equal (chown (src, 1234, 5678), 0);
    assert_int_equal (chmod (src, 06750), 0);
    assert_int_equal (copy_path (src, dir, "kept", &opts, NULL, &error), 0);
    assert_int_equal (stat (pathf (dst, "%s/kept", dir), &st), 0);
    assert_int_equal (st.st_uid, 1234);
    assert_int_equal (st.st_gid, 5678);
    assert_int_equal (st.st_mode & 07777, 06750);
    assert_int_equal (copy_path (src, dir, "mine", NULL, NULL, &error), 0);
    assert_int_equal (stat (pathf (dst, "%s/mine", dir), &st), 0);
    assert_int_equal (st.st_uid, 0);
    assert_int_equal (st.st_mode & 07777, 0750);
}

static void test_empty (void **state)
{
    char src[PATH_MAX], dst[PATH_MAX], dir[PATH_MAX];
    struct prog p = { 0 };
    struct tier_copy_opts opts = { .progress = prog_cb, .progress_arg = &p };
    struct tier_copy_result res;
    tier_error_t error;

    mkdir_p (pathf (dir, "%s/empty", root), 0755);
    pathf (src, "%s/empty.src", root);
    make_file (src, 0, 0604, 0);
    set_times (src, 5, 6, 7, 8);
    assert_int_equal (copy_path (src, dir, "e", &opts, &res, &error), 0);
    pathf (dst, "%s/e", dir);
    assert_same_meta (src, dst);
    assert_atime (dst, 5, 6);
    assert_int_equal (res.files, 1);
    assert_int_equal (res.bytes, 0);
    assert_int_equal (p.calls, 1);          /* the last call */
    assert_int_equal (p.last_done, 0);
    assert_int_equal (p.last_total, 0);
}

/* A 64 MiB file with 3 data extents and a hole at the end. */
static uint64_t make_sparse (const char *path)
{
    int fd = open (path, O_CREAT | O_TRUNC | O_WRONLY, 0644);

    assert_true (fd >= 0);
    write_at (fd, 0, 1 * MiB, 10);
    write_at (fd, 20 * MiB, 512 * KiB, 11);
    write_at (fd, 40 * MiB + 4 * KiB, 256 * KiB, 12);
    assert_int_equal (ftruncate (fd, 64 * MiB), 0);
    assert_int_equal (fsync (fd), 0);
    close (fd);
    return 1 * MiB + 512 * KiB + 256 * KiB;
}

static void check_sparse (const char *src, const char *dir,
                          const struct tier_copy_opts *opts, unsigned methods)
{
    char dst[PATH_MAX];
    struct tier_copy_result res;
    tier_error_t error;
    struct stat ss, ds;
    uint64_t data = 1 * MiB + 512 * KiB + 256 * KiB;

    assert_int_equal (copy_path (src, dir, "sparse", opts, &res, &error), 0);
    pathf (dst, "%s/sparse", dir);
    assert_same_content (src, dst);
    assert_same_meta (src, dst);
    assert_int_equal (stat (src, &ss), 0);
    assert_int_equal (stat (dst, &ds), 0);
    /* sparse: about as many blocks as the source, far less than 64 MiB */
    assert_true ((uint64_t) ds.st_blocks * 512 <= data + 1 * MiB);
    assert_true ((uint64_t) ds.st_blocks <= (uint64_t) ss.st_blocks + 2048);
    assert_int_equal (res.bytes, data);
    assert_int_equal (res.hole_bytes, 64 * MiB - data);
    assert_true (res.holes >= 3);
    assert_int_equal (res.methods, methods);
    assert_int_equal (unlink (dst), 0);
}

static void test_sparse (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX], sdir[PATH_MAX];
    struct tier_copy_opts par = { .threads = 4, .split_size = 8 * MiB };
    struct tier_copy_opts dense = { .flags = TIER_COPY_NOSPARSE };
    struct tier_copy_result res;
    tier_error_t error;
    struct stat st;

    mkdir_p (pathf (dir, "%s/sparse", root), 0755);
    pathf (src, "%s/sparse.src", root);
    make_sparse (src);
    set_times (src, 1, 2, 3, 4);
    assert_int_equal (stat (src, &st), 0);
    assert_true ((uint64_t) st.st_blocks * 512 < 4 * MiB);

    check_sparse (src, dir, NULL, TIER_COPY_CFR);
    check_sparse (src, dir, &par, TIER_COPY_CFR);       /* split in 8 */
    wrap_cfr_errno = EXDEV;
    check_sparse (src, dir, NULL, TIER_COPY_SENDFILE);
    check_sparse (src, dir, &par, TIER_COPY_RW);
    wrap_reset ();
    if (shm[0])                         /* ext4 to tmpfs */
        check_sparse (src, shm, NULL, TIER_COPY_SENDFILE);

    /* without holes on request */
    assert_int_equal (copy_path (src, dir, "dense", &dense, &res, &error), 0);
    assert_same_content (src, pathf (sdir, "%s/dense", dir));
    assert_int_equal (stat (sdir, &st), 0);
    assert_true ((uint64_t) st.st_blocks * 512 >= 64 * MiB);
    assert_int_equal (res.holes, 0);
}

static void test_chunks (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX], dst[PATH_MAX];
    struct prog p = { 0 };
    struct tier_copy_opts opts = { .chunk_size = 256 * KiB,
                                   .progress = prog_cb, .progress_arg = &p };
    struct tier_copy_result res;
    tier_error_t error;
    uint64_t size = 5 * MiB + 1;

    mkdir_p (pathf (dir, "%s/chunks", root), 0755);
    pathf (src, "%s/chunks.src", root);
    make_file (src, size, 0644, 20);
    assert_int_equal (copy_path (src, dir, "c", &opts, &res, &error), 0);
    assert_same_content (src, pathf (dst, "%s/c", dir));
    assert_true (p.calls >= 21);                    /* 21 chunks + last */
    assert_true (atomic_load (&cfr_calls) >= 21);
    assert_false (p.decreased);
    assert_int_equal (p.last_done, size);
    assert_int_equal (p.last_total, size);
    assert_int_equal (res.bytes, size);
}

static void test_parallel_file (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX], dst[PATH_MAX];
    struct prog p = { 0 };
    struct tier_copy_opts opts = { .threads = 4, .split_size = 2 * MiB,
                                   .chunk_size = 512 * KiB,
                                   .progress = prog_cb, .progress_arg = &p };
    struct tier_copy_result res;
    tier_error_t error;
    uint64_t size = 20 * MiB + 4321;

    mkdir_p (pathf (dir, "%s/par", root), 0755);
    pathf (src, "%s/par.src", root);
    make_file (src, size, 0644, 30);
    set_times (src, 11, 12, 13, 14);
    atomic_store (&wrap_delay_us, 2000);
    assert_int_equal (copy_path (src, dir, "p", &opts, &res, &error), 0);
    pathf (dst, "%s/p", dir);
    assert_atime (dst, 11, 12);      /* before reading it */
    assert_same_content (src, dst);
    assert_same_meta (src, dst);
    assert_int_equal (res.threads, 4);
    assert_true (atomic_load (&max_inflight) >= 2);
    assert_false (p.decreased);
    assert_int_equal (p.last_done, size);
    assert_int_equal (count_entries (dir, NULL), 1);
}

static void test_fallback (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX], dst[PATH_MAX];
    struct tier_copy_opts opts = { .chunk_size = 1 * MiB };
    struct tier_copy_opts par = { .threads = 3, .split_size = 1 * MiB,
                                  .chunk_size = 256 * KiB };
    struct tier_copy_result res;
    tier_error_t error;

    mkdir_p (pathf (dir, "%s/fallback", root), 0755);
    pathf (dst, "%s/f", dir);
    pathf (src, "%s/fallback.src", root);
    make_file (src, 4 * MiB + 3, 0644, 40);

    /* copy_file_range refused: sendfile */
    wrap_cfr_errno = EXDEV;
    assert_int_equal (copy_path (src, dir, "f", &opts, &res, &error), 0);
    assert_same_content (src, dst);
    assert_int_equal (res.methods, TIER_COPY_SENDFILE);
    /* and sendfile too: read/write */
    wrap_sendfile_errno = EINVAL;
    assert_int_equal (copy_path (src, dir, "f", &opts, &res, &error), 0);
    assert_same_content (src, dst);
    assert_int_equal (res.methods, TIER_COPY_RW);
    /* split files skip sendfile (it writes at the file offset) */
    wrap_sendfile_errno = 0;
    assert_int_equal (copy_path (src, dir, "f", &par, &res, &error), 0);
    assert_same_content (src, dst);
    assert_int_equal (res.methods, TIER_COPY_RW);
    /* a copy_file_range that stops short falls back as well */
    wrap_cfr_errno = 0;
    wrap_cfr_zero = 1;
    assert_int_equal (copy_path (src, dir, "f", &opts, &res, &error), 0);
    assert_same_content (src, dst);
    assert_int_equal (res.methods, TIER_COPY_SENDFILE);
    wrap_reset ();
    /* forced by the options */
    opts.methods = TIER_COPY_RW;
    assert_int_equal (copy_path (src, dir, "f", &opts, &res, &error), 0);
    assert_same_content (src, dst);
    assert_int_equal (res.methods, TIER_COPY_RW);
    assert_int_equal (atomic_load (&cfr_calls), 0);
    opts.methods = TIER_COPY_SENDFILE;
    assert_int_equal (copy_path (src, dir, "f", &opts, &res, &error), 0);
    assert_int_equal (res.methods, TIER_COPY_SENDFILE);
    /* no method left: the error, and nothing published */
    assert_int_equal (unlink (dst), 0);
    opts.methods = TIER_COPY_CFR;
    wrap_cfr_errno = EXDEV;
    errno = 0;
    assert_int_equal (copy_path (src, dir, "f", &opts, &res, &error), -1);
    assert_int_equal (errno, EXDEV);
    assert_non_null (strstr (error.text, "copy_file_range"));
    assert_dir_empty (dir);
}

static void test_changed (void **state)
{
    static const enum prog_action actions[] = { ACT_APPEND, ACT_OVERWRITE,
                                                ACT_TRUNCATE };
    char src[PATH_MAX], dir[PATH_MAX], dst[PATH_MAX];
    struct prog p;
    struct tier_copy_opts opts = { .chunk_size = 64 * KiB,
                                   .progress = prog_cb, .progress_arg = &p };
    tier_error_t error;

    mkdir_p (pathf (dir, "%s/changed", root), 0755);
    pathf (src, "%s/changed.src", root);
    pathf (dst, "%s/c", dir);
    for (size_t i = 0; i < sizeof (actions) / sizeof (actions[0]); i++) {
        for (int threads = 1; threads <= 2; threads++) {
            memset (&p, 0, sizeof (p));
            p.at = 2;
            p.action = actions[i];
            p.path = src;
            opts.threads = threads;
            opts.split_size = threads > 1 ? 256 * KiB : 0;
            make_file (src, 1 * MiB, 0644, 50 + i);
            /* an old mtime: a same-size write is seen even on file systems
             * with coarse timestamps */
            set_times (src, 100, 0, 100, 0);
            errno = 0;
            assert_int_equal (copy_path (src, dir, "c", &opts, NULL, &error),
                              -1);
            assert_int_equal (errno, ESTALE);
            assert_non_null (strstr (error.text, "changed"));
            assert_dir_empty (dir);
        }
    }
    /* an existing copy stays as it was */
    make_file (dst, 100, 0644, 59);
    memset (&p, 0, sizeof (p));
    p.at = 1;
    p.action = ACT_APPEND;
    p.path = src;
    opts.threads = 1;
    make_file (src, 1 * MiB, 0644, 58);
    assert_int_equal (copy_path (src, dir, "c", &opts, NULL, &error), -1);
    assert_int_equal (errno, ESTALE);
    assert_int_equal (count_entries (dir, NULL), 1);
    make_file (src, 100, 0644, 59);
    assert_same_content (src, dst);
}

/* opts->expect: the copy is of the version the caller keyed it by, or
 * ESTALE (a replica key taken when the open was asked for, a copy that
 * starts later, after the file changed). */
static void test_expect (void **state)
{
    char src[PATH_MAX], other[PATH_MAX], dir[PATH_MAX], dst[PATH_MAX];
    struct tier_copy_opts opts = { .threads = 1 };
    struct stat seen, elsewhere;
    tier_error_t error;
    int fd;

    mkdir_p (pathf (dir, "%s/expect", root), 0755);
    pathf (src, "%s/expect.src", root);
    pathf (other, "%s/expect.other", root);
    pathf (dst, "%s/e", dir);
    make_file (src, 256 * KiB, 0644, 90);
    make_file (other, 256 * KiB, 0644, 90);
    assert_int_equal (stat (src, &seen), 0);
    assert_int_equal (stat (other, &elsewhere), 0);
    /* unchanged: copied; st_dev is not part of the version */
    opts.expect = &seen;
    seen.st_dev++;
    assert_int_equal (copy_path (src, dir, "e", &opts, NULL, &error), 0);
    assert_same_content (src, dst);
    assert_int_equal (unlink (dst), 0);
    seen.st_dev--;
    /* grown since it was seen: refused before anything is written */
    assert_true ((fd = open (src, O_WRONLY | O_APPEND)) >= 0);
    assert_int_equal (write (fd, "x", 1), 1);
    assert_int_equal (close (fd), 0);
    errno = 0;
    assert_int_equal (copy_path (src, dir, "e", &opts, NULL, &error), -1);
    assert_int_equal (errno, ESTALE);
    assert_non_null (strstr (error.text, "changed"));
    assert_dir_empty (dir);
    /* another file (inode) with the same size and times */
    set_times (other, 100, 0, 100, 0);
    assert_int_equal (stat (other, &elsewhere), 0);
    seen = elsewhere;
    seen.st_ino++;
    errno = 0;
    assert_int_equal (copy_path (other, dir, "e", &opts, NULL, &error), -1);
    assert_int_equal (errno, ESTALE);
    assert_dir_empty (dir);
    /* and the file it was keyed by is copied */
    assert_int_equal (copy_path (other, dir, "e", &(struct tier_copy_opts) {
                          .threads = 1, .expect = &elsewhere }, NULL, &error),
                      0);
    assert_same_content (other, dst);
}

static void *cancel_later (void *arg)
{
    usleep (200000);
    atomic_store ((atomic_int *) arg, 1);
    return NULL;
}

/* before_publish: called with the complete temporary, whose inode the
 * final name then has; an errno it returns stops the copy, nothing
 * published, no temporary left. */
struct publish_seen {
    int calls;
    struct stat tmp;
    int answer;
};

static int on_publish (const struct stat *tmp, void *arg)
{
    struct publish_seen *ps = arg;

    ps->calls++;
    ps->tmp = *tmp;
    return ps->answer;
}

static void test_before_publish (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX], dst[PATH_MAX];
    struct publish_seen ps = { 0 };
    struct tier_copy_opts opts = { .threads = 1,
                                   .before_publish = on_publish,
                                   .publish_arg = &ps };
    tier_error_t error;
    struct stat st;

    (void) state;
    mkdir_p (pathf (dir, "%s/publish", root), 0755);
    pathf (src, "%s/publish.src", root);
    pathf (dst, "%s/p", dir);
    make_file (src, 300 * KiB, 0640, 17);
    assert_int_equal (copy_path (src, dir, "p", &opts, NULL, &error), 0);
    assert_int_equal (ps.calls, 1);
    assert_int_equal (stat (dst, &st), 0);
    assert_int_equal (ps.tmp.st_ino, st.st_ino);
    assert_int_equal (ps.tmp.st_size, 300 * KiB);
    assert_same_content (src, dst);
    assert_int_equal (unlink (dst), 0);
    /* refused: the errno comes back, nothing is left */
    ps.answer = ETIMEDOUT;
    errno = 0;
    assert_int_equal (copy_path (src, dir, "p", &opts, NULL, &error), -1);
    assert_int_equal (errno, ETIMEDOUT);
    assert_int_equal (ps.calls, 2);
    assert_dir_empty (dir);
}

static void test_cancel (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX];
    atomic_int cancel = 0;
    struct prog p = { .at = 2, .action = ACT_CANCEL, .cancel = &cancel };
    struct tier_copy_opts opts = { .chunk_size = 64 * KiB, .cancel = &cancel,
                                   .progress = prog_cb, .progress_arg = &p };
    struct tier_copy_result res;
    struct tier_copy_limit *lim;
    tier_error_t error;
    struct timespec t0, t1;
    pthread_t tid;

    mkdir_p (pathf (dir, "%s/cancel", root), 0755);
    pathf (src, "%s/cancel.src", root);
    make_file (src, 2 * MiB, 0644, 60);

    /* from the progress callback, in the middle */
    errno = 0;
    assert_int_equal (copy_path (src, dir, "c", &opts, &res, &error), -1);
    assert_int_equal (errno, ECANCELED);
    assert_true (res.bytes < 2 * MiB);
    assert_int_equal (res.files, 0);
    assert_dir_empty (dir);
    /* split over threads */
    atomic_store (&cancel, 0);
    memset (&p, 0, sizeof (p));
    p.at = 3;
    p.action = ACT_CANCEL;
    p.cancel = &cancel;
    opts.threads = 4;
    opts.split_size = 256 * KiB;
    errno = 0;
    assert_int_equal (copy_path (src, dir, "c", &opts, &res, &error), -1);
    assert_int_equal (errno, ECANCELED);
    assert_dir_empty (dir);
    /* before it starts */
    opts.progress = NULL;
    atomic_store (&cancel, 1);
    errno = 0;
    assert_int_equal (copy_path (src, dir, "c", &opts, &res, &error), -1);
    assert_int_equal (errno, ECANCELED);
    assert_int_equal (res.bytes, 0);
    assert_dir_empty (dir);
    /* from another thread while the copy waits for bandwidth: it returns
     * at once (2 MiB at 64 KiB/s would take 30 s) */
    assert_non_null ((lim = tier_copy_limit_create (64 * KiB, 64 * KiB)));
    atomic_store (&cancel, 0);
    opts.threads = 1;
    opts.limit = lim;
    assert_int_equal (pthread_create (&tid, NULL, cancel_later, &cancel), 0);
    clock_gettime (CLOCK_MONOTONIC, &t0);
    errno = 0;
    assert_int_equal (copy_path (src, dir, "c", &opts, &res, &error), -1);
    assert_int_equal (errno, ECANCELED);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    pthread_join (tid, NULL);
    assert_true ((t1.tv_sec - t0.tv_sec) * 1000
                 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 1000);
    assert_int_equal (res.bytes, 64 * KiB);     /* the burst */
    assert_dir_empty (dir);
    tier_copy_limit_destroy (lim);
}

static void test_noreplace (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX], dst[PATH_MAX], old[PATH_MAX];
    struct tier_copy_opts opts = { .flags = TIER_COPY_NOREPLACE };
    tier_error_t error;
    struct stat st;

    mkdir_p (pathf (dir, "%s/noreplace", root), 0755);
    pathf (src, "%s/noreplace.src", root);
    pathf (old, "%s/noreplace.old", root);
    pathf (dst, "%s/t", dir);
    make_file (src, 300 * KiB, 0644, 70);
    make_file (old, 10, 0644, 71);
    make_file (dst, 10, 0644, 71);
    for (int fallback = 0; fallback <= 1; fallback++) {
        /* without RENAME_NOREPLACE: link + unlink */
        wrap_renameat2_errno = fallback ? EINVAL : 0;
        errno = 0;
        assert_int_equal (copy_path (src, dir, "t", &opts, NULL, &error), -1);
        assert_int_equal (errno, EEXIST);
        assert_same_content (old, dst);
        assert_int_equal (count_entries (dir, NULL), 1);
        /* a new name is fine */
        assert_int_equal (copy_path (src, dir, "n", &opts, NULL, &error), 0);
        assert_same_content (src, pathf (old, "%s/n", dir));
        assert_int_equal (stat (old, &st), 0);
        assert_int_equal (st.st_nlink, 1);
        assert_int_equal (count_entries (dir, NULL), 2);
        assert_int_equal (unlink (old), 0);
        pathf (old, "%s/noreplace.old", root);
    }
}

static void test_fsync_fails (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX];
    tier_error_t error;

    mkdir_p (pathf (dir, "%s/fsync", root), 0755);
    pathf (src, "%s/fsync.src", root);
    make_file (src, 100 * KiB, 0644, 80);
    wrap_fsync_errno = EIO;                 /* the file's fsync */
    errno = 0;
    assert_int_equal (copy_path (src, dir, "f", NULL, NULL, &error), -1);
    assert_int_equal (errno, EIO);
    assert_non_null (strstr (error.text, "fsync"));
    assert_dir_empty (dir);
}

static void test_limit (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX], dst[PATH_MAX];
    struct tier_copy_limit *lim;
    struct tier_copy_opts opts = { .chunk_size = 256 * KiB };
    tier_error_t error;
    uint64_t t0, t1;

    mkdir_p (pathf (dir, "%s/limit", root), 0755);
    pathf (src, "%s/limit.src", root);
    make_file (src, 3 * MiB, 0644, 90);
    /* 8 MiB/s with a 1 MiB burst: 3 MiB take at least 0.25 s */
    vclock_start (0);
    assert_non_null ((lim = tier_copy_limit_create (8 * MiB, 1 * MiB)));
    opts.limit = lim;
    t0 = atomic_load (vclock);
    assert_int_equal (copy_path (src, dir, "l", &opts, NULL, &error), 0);
    t1 = atomic_load (vclock);
    vclock_stop ();
    assert_true (t1 - t0 >= 250000000ull - 1000);
    assert_true (t1 - t0 <= 250000000ull + 1000);
    assert_same_content (src, pathf (dst, "%s/l", dir));
    /* unlimited after a change of rate */
    tier_copy_limit_set (lim, 0, 0);
    assert_int_equal (tier_copy_limit_take (lim, 1ull << 40, NULL), 0);
    tier_copy_limit_destroy (lim);
    assert_int_equal (tier_copy_limit_take (NULL, 1, NULL), 0);
}

/* The limit's own accounting, every take counted and the waits computed
 * from the bucket, on the virtual clock: moving X bytes at R with burst C
 * in back-to-back takes stalls exactly (X - C) / R (+1 ns of rounding per
 * take); a taker that wakes D late finds D * R more tokens, and each of
 * its later waits is D shorter. */
static void limit_stats_run (uint64_t oversleep_ns,
                             struct tier_copy_limit_stats *st)
{
    struct tier_copy_limit *lim;
    const uint64_t rate = 16 * MiB, burst = 256 * KiB, x = 4 * MiB;

    vclock_start (oversleep_ns);
    assert_non_null ((lim = tier_copy_limit_create (rate, burst)));
    for (uint64_t done = 0; done < x; done += 512 * KiB)
        assert_int_equal (tier_copy_limit_take (lim, 512 * KiB, NULL), 0);
    tier_copy_limit_stats (lim, st);
    assert_int_equal (st->bytes, x);
    assert_int_equal (st->ops, 8);
    assert_int_equal (st->rate, rate);
    assert_int_equal (st->burst, burst);
    assert_int_equal (st->delayed_ops, 8);
    assert_int_equal (st->delayed_bytes, x);
    assert_true (st->wait_ns >= st->stall_ns);
    /* unlimited: still counted, never delayed */
    tier_copy_limit_set (lim, 0, 0);
    assert_int_equal (tier_copy_limit_take (lim, 1ull << 40, NULL), 0);
    {
        struct tier_copy_limit_stats after;

        tier_copy_limit_stats (lim, &after);
        assert_int_equal (after.bytes, x + (1ull << 40));
        assert_int_equal (after.ops, 9);
        assert_int_equal (after.rate, 0);
        assert_int_equal (after.delayed_ops, 8);
        assert_int_equal (after.stall_ns, st->stall_ns);
    }
    tier_copy_limit_destroy (lim);
    vclock_stop ();
}

/* |a - b| <= 1 us: what rounding allows */
static bool near_ns (uint64_t a, double b)
{
    double d = (double) a - b;

    return d <= 1000 && d >= -1000;
}

static void test_limit_stats (void **state)
{
    struct tier_copy_limit_stats st;
    const double exact = (double) (4 * MiB - 256 * KiB) * 1e9 / (16 * MiB);

    limit_stats_run (0, &st);
    assert_true (near_ns (st.stall_ns, exact));
    /* one taker: the waits never overlap */
    assert_true (near_ns (st.wait_ns, exact));
    /* each of the 7 takes after a late wake-up waits 10 ms less */
    limit_stats_run (10000000, &st);
    assert_true (near_ns (st.stall_ns, exact - 7 * 10e6));
    tier_copy_limit_stats (NULL, &st);
    assert_int_equal (st.bytes, 0);
}

/* A copy is charged what it moves, however its transfers are cut
 * (short sendfiles, a fallback from copy_file_range). */
static void test_limit_charge (void **state)
{
    char src[PATH_MAX], dir[PATH_MAX];
    struct tier_copy_opts opts = { .chunk_size = 256 * KiB,
                                   .methods = TIER_COPY_SENDFILE
                                              | TIER_COPY_RW };
    struct tier_copy_limit *big = tier_copy_limit_create (1ull << 40, 0);
    struct tier_copy_limit_stats st;
    tier_error_t error;

    mkdir_p (pathf (dir, "%s/limitcharge", root), 0755);
    pathf (src, "%s/limitcharge.src", root);
    make_file (src, 1 * MiB + 4321, 0644, 91);
    opts.limit = big;
    wrap_sendfile_short = 1000;         /* every sendfile moves 1000 B */
    assert_int_equal (copy_path (src, dir, "s", &opts, NULL, &error), 0);
    wrap_sendfile_short = 0;
    wrap_cfr_errno = EXDEV;             /* falls back at once */
    opts.methods = 0;
    assert_int_equal (copy_path (src, dir, "t", &opts, NULL, &error), 0);
    wrap_cfr_errno = 0;
    tier_copy_limit_stats (big, &st);
    assert_int_equal (st.bytes, 2 * (1 * MiB + 4321));
    tier_copy_limit_destroy (big);
}

/* A shared limit is one bucket for the processes forked after it was
 * made: two children moving 2 MiB each at 8 MiB/s are held back as one
 * stream of 4 MiB, so that their waits, overlapping, add up to more than
 * their union, which is exactly (4 MiB - burst) / R on the virtual clock;
 * and the parent sees their accounting. */
static void test_limit_shared (void **state)
{
    struct tier_copy_limit *lim;
    struct tier_copy_limit_stats st;
    const uint64_t rate = 8 * MiB, burst = 128 * KiB;
    const double exact = (double) (4 * MiB - burst) * 1e9 / (double) rate;
    pid_t pids[2];
    int status;

    vclock_start (0);
    assert_non_null ((lim = tier_copy_limit_create_shared (rate, burst)));
    for (int i = 0; i < 2; i++) {
        assert_true ((pids[i] = fork ()) >= 0);
        if (pids[i] == 0) {
            for (int k = 0; k < 16; k++)
                if (tier_copy_limit_take (lim, 128 * KiB, NULL) < 0)
                    _exit (1);
            _exit (0);
        }
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal (waitpid (pids[i], &status, 0), pids[i]);
        assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    }
    tier_copy_limit_stats (lim, &st);
    vclock_stop ();
    assert_int_equal (st.bytes, 4 * MiB);
    assert_int_equal (st.ops, 32);
    assert_int_equal (st.delayed_ops, 31); /* the first fits the burst */
    assert_true (near_ns (st.stall_ns, exact));
    assert_true ((double) st.wait_ns > exact);
    tier_copy_limit_destroy (lim);
}

static void test_bad_args (void **state)
{
    static const char *bad[] = { "", ".", "..", "a/b", "/x" };
    char src[PATH_MAX], dir[PATH_MAX], name[NAME_MAX + 2];
    tier_error_t error;
    int sfd, dfd;

    mkdir_p (pathf (dir, "%s/bad", root), 0755);
    pathf (src, "%s/bad.src", root);
    make_file (src, 10, 0644, 100);
    dfd = opendir_path (dir);
    sfd = open (src, O_RDONLY);
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        errno = 0;
        assert_int_equal (tier_copy_fd (sfd, dfd, bad[i], NULL, NULL,
                                        &error), -1);
        assert_int_equal (errno, EINVAL);
    }
    assert_int_equal (tier_copy_fd (sfd, dfd, NULL, NULL, NULL, &error), -1);
    memset (name, 'n', NAME_MAX + 1);
    name[NAME_MAX + 1] = '\0';
    assert_int_equal (tier_copy_fd (sfd, dfd, name, NULL, NULL, &error), -1);
    /* the longest name works: its temporary is shortened */
    name[NAME_MAX] = '\0';
    assert_int_equal (tier_copy_fd (sfd, dfd, name, NULL, NULL, &error), 0);
    close (sfd);
    /* a directory is not a regular file; write-only is not readable */
    errno = 0;
    assert_int_equal (tier_copy_fd (dfd, dfd, "x", NULL, NULL, &error), -1);
    assert_int_equal (errno, EINVAL);
    sfd = open (src, O_WRONLY);
    errno = 0;
    assert_int_equal (tier_copy_fd (sfd, dfd, "x", NULL, NULL, &error), -1);
    assert_int_equal (errno, EBADF);
    close (sfd);
    assert_int_equal (count_entries (dir, NULL), 1);
    close (dfd);
}

static void test_temp_name (void **state)
{
    assert_true (tier_copy_is_temp_name (".a.tier-Ab3xYz.part"));
    assert_true (tier_copy_is_temp_name ("..tier-000000.part"));
    assert_false (tier_copy_is_temp_name ("a.tier-Ab3xYz.part"));
    assert_false (tier_copy_is_temp_name (".a.tier-Ab3xY.part"));
    assert_false (tier_copy_is_temp_name (".a.tier-Ab3x-z.part"));
    assert_false (tier_copy_is_temp_name (".a.tier-Ab3xYz.parts"));
    assert_false (tier_copy_is_temp_name (".tier-Ab3xYz.part"));
    assert_false (tier_copy_is_temp_name (""));
    assert_false (tier_copy_is_temp_name (NULL));
}

/*
 * A full destination: a 1 MiB tmpfs in a private mount namespace, in a
 * child process (cmocka's assertions are not used there).
 */

#define CHILD_CHECK(c) do { \
        if (!(c)) { \
            fprintf (stderr, "# %s:%d: %s\n", __FILE__, __LINE__, #c); \
            _exit (1); \
        } \
    } while (0)

static int child_entries (const char *path, int *temps)
{
    DIR *d = opendir (path);
    struct dirent *de;
    int n = 0;

    if (!d)
        return -1;
    while ((de = readdir (d))) {
        char sub[PATH_MAX];

        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        n++;
        if (tier_copy_is_temp_name (de->d_name))
            (*temps)++;
        if (de->d_type == DT_DIR)
            child_entries (pathf (sub, "%s/%s", path, de->d_name), temps);
    }
    closedir (d);
    return n;
}

static int child_same (const char *a, const char *b)
{
    char ba[4096], bb[4096];
    int fa = open (a, O_RDONLY), fb = open (b, O_RDONLY);
    ssize_t ra, rb;
    int same = fa >= 0 && fb >= 0;

    while (same) {
        ra = read (fa, ba, sizeof (ba));
        rb = read (fb, bb, sizeof (bb));
        if (ra != rb || ra < 0 || memcmp (ba, bb, ra) != 0)
            same = 0;
        if (ra <= 0)
            break;
    }
    close (fa);
    close (fb);
    return same;
}

static void enospc_child (const char *mnt)
{
    char big[PATH_MAX], small[PATH_MAX], old[PATH_MAX], p[PATH_MAX];
    struct tier_copy_opts opts = { .threads = 2 };
    tier_error_t error;
    int temps = 0, dfd, sfd;

    if (unshare (CLONE_NEWNS) < 0
        || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0
        || mount ("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV,
                  "size=1m,mode=0755") < 0) {
        fprintf (stderr, "# no private tmpfs: %s\n", strerror (errno));
        _exit (77);
    }
    CHILD_CHECK ((dfd = open (mnt, O_PATH | O_DIRECTORY)) >= 0);
    pathf (big, "%s/big.src", root);

    /* from ext4 (sendfile): ENOSPC, nothing under the name, no temporary */
    CHILD_CHECK ((sfd = open (big, O_RDONLY)) >= 0);
    errno = 0;
    CHILD_CHECK (tier_copy_fd (sfd, dfd, "big", NULL, NULL, &error) == -1);
    CHILD_CHECK (errno == ENOSPC);
    CHILD_CHECK (strstr (error.text, "big: ") == error.text);
    CHILD_CHECK (child_entries (mnt, &temps) == 0);

    /* an existing file under the name is kept as it was */
    pathf (old, "%s/old.src", root);
    pathf (p, "%s/big", mnt);
    CHILD_CHECK ((sfd = open (old, O_RDONLY)) >= 0);
    CHILD_CHECK (tier_copy_fd (sfd, dfd, "big", NULL, NULL, &error) == 0);
    close (sfd);
    CHILD_CHECK ((sfd = open (big, O_RDONLY)) >= 0);
    errno = 0;
    CHILD_CHECK (tier_copy_fd (sfd, dfd, "big", NULL, NULL, &error) == -1);
    CHILD_CHECK (errno == ENOSPC);
    CHILD_CHECK (child_entries (mnt, &temps) == 1 && temps == 0);
    CHILD_CHECK (child_same (old, p));
    close (sfd);

    /* within the tmpfs (copy_file_range), split over threads */
    pathf (small, "%s/small", mnt);
    CHILD_CHECK ((sfd = open (small, O_CREAT | O_WRONLY, 0644)) >= 0);
    for (int i = 0; i < 150; i++)
        CHILD_CHECK (write (sfd, big, 4096) == 4096);   /* 600 KiB */
    close (sfd);
    CHILD_CHECK ((sfd = open (small, O_RDONLY)) >= 0);
    opts.split_size = 128 * KiB;
    opts.chunk_size = 64 * KiB;
    errno = 0;
    CHILD_CHECK (tier_copy_fd (sfd, dfd, "small2", &opts, NULL, &error) == -1);
    CHILD_CHECK (errno == ENOSPC);
    CHILD_CHECK (child_entries (mnt, &temps) == 2 && temps == 0);
    close (sfd);
    CHILD_CHECK (unlink (small) == 0);
    CHILD_CHECK (unlink (p) == 0);

    /* a tree: the first files fit, then ENOSPC; no temporary anywhere */
    pathf (p, "%s/tree", root);
    CHILD_CHECK ((sfd = open (p, O_PATH | O_DIRECTORY)) >= 0);
    errno = 0;
    CHILD_CHECK (tier_copy_tree (sfd, dfd, &opts, NULL, &error) == -1);
    CHILD_CHECK (errno == ENOSPC);
    temps = 0;
    child_entries (mnt, &temps);
    CHILD_CHECK (temps == 0);
    close (sfd);
    close (dfd);
    _exit (0);
}

static void test_enospc (void **state)
{
    char mnt[PATH_MAX], p[PATH_MAX];
    struct stat st;
    pid_t pid;
    int status;

    if (geteuid () != 0) {
        fprintf (stderr, "# not root: no tmpfs, ENOSPC test skipped\n");
        skip ();
    }
    mkdir_p (pathf (mnt, "%s/full", root), 0755);
    make_file (pathf (p, "%s/big.src", root), 2 * MiB, 0644, 110);
    make_file (pathf (p, "%s/old.src", root), 10 * KiB, 0644, 111);
    mkdir_p (pathf (p, "%s/tree", root), 0755);
    mkdir_p (pathf (p, "%s/tree/sub", root), 0755);
    for (int i = 0; i < 6; i++)
        make_file (pathf (p, "%s/tree/%s%d", root, i % 2 ? "sub/" : "", i),
                   300 * KiB, 0644, 120 + i);
    fflush (NULL);
    assert_true ((pid = fork ()) >= 0);
    if (pid == 0)
        enospc_child (mnt);
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status));
    if (WEXITSTATUS (status) == 77)
        skip ();
    assert_int_equal (WEXITSTATUS (status), 0);
    /* the mount stayed in the child's namespace */
    assert_int_equal (stat (mnt, &st), 0);
    assert_dir_empty (mnt);
}

/*
 * Trees.
 */

struct reports {
    int skipped, failed;
    char last[PATH_MAX];
};

static void report_cb (enum tier_copy_event ev, const char *path, int errnum,
                       const char *text, void *arg)
{
    struct reports *r = arg;

    if (ev == TIER_COPY_SKIPPED)
        r->skipped++;
    else
        r->failed++;
    snprintf (r->last, sizeof (r->last), "%s", path);
}

#define TREE_FILES 12

static void make_tree (const char *t)
{
    char p[PATH_MAX], q[PATH_MAX];

    mkdir_p (t, 0755);
    make_file (pathf (p, "%s/a.txt", t), 1000, 0640, 200);
    make_sparse (pathf (p, "%s/holes", t));
    mkdir_p (pathf (p, "%s/sub", t), 0750);
    mkdir_p (pathf (p, "%s/sub/deeper", t), 0755);
    make_file (pathf (p, "%s/sub/deeper/c.bin", t), 70 * KiB, 0600, 201);
    make_file (pathf (p, "%s/sub/.hidden", t), 0, 0644, 0);
    for (int i = 0; i < TREE_FILES; i++)
        make_file (pathf (p, "%s/sub/f%02d", t, i), 256 * KiB + i, 0644,
                   210 + i);
    mkdir_p (pathf (p, "%s/sub/ro", t), 0755);
    make_file (pathf (p, "%s/sub/ro/r", t), 5000, 0444, 230);
    /* symlinks: out of the tree (relative, absolute, to a directory), and
     * one inside */
    mkdir_p (pathf (p, "%s/outside", root), 0755);
    make_file (pathf (p, "%s/outside/secret", root), 100, 0600, 240);
    assert_int_equal (symlink ("../outside/secret",
                               pathf (p, "%s/link-out", t)), 0);
    assert_int_equal (symlink (pathf (q, "%s/outside/secret", root),
                               pathf (p, "%s/link-abs", t)), 0);
    assert_int_equal (symlink ("../../outside", pathf (p, "%s/sub/dirlink",
                                                        t)), 0);
    assert_int_equal (symlink ("a.txt", pathf (p, "%s/link-in", t)), 0);
    assert_int_equal (mkfifo (pathf (p, "%s/sub/fifo", t), 0644), 0);
    /* times last (creating entries changes the directories' mtimes) */
    set_times (pathf (p, "%s/link-out", t), 1, 0, 2, 3);
    set_times (pathf (p, "%s/sub/ro/r", t), 4, 5, 6, 7);
    set_times (pathf (p, "%s/sub/deeper", t), 8, 9, 10, 11);
    set_times (pathf (p, "%s/sub/ro", t), 12, 13, 14, 15);
    assert_int_equal (chmod (pathf (p, "%s/sub/ro", t), 0555), 0);
    set_times (pathf (p, "%s/sub", t), 16, 17, 18, 19);
}

static void check_tree (const char *s, const char *d, bool dir_times)
{
    static const char *files[] = { "a.txt", "holes", "sub/deeper/c.bin",
                                    "sub/.hidden", "sub/ro/r" };
    static const char *dirs[] = { "sub", "sub/deeper", "sub/ro" };
    static const char *links[] = { "link-out", "link-abs", "sub/dirlink",
                                   "link-in" };
    char a[PATH_MAX], b[PATH_MAX], la[PATH_MAX], lb[PATH_MAX];
    struct stat st;
    ssize_t na, nb;

    if (dir_times) {                    /* before reading them */
        assert_atime (pathf (b, "%s/sub/ro/r", d), 4, 5);
        assert_atime (pathf (b, "%s/sub/deeper", d), 8, 9);
    }
    for (size_t i = 0; i < sizeof (files) / sizeof (files[0]); i++) {
        pathf (a, "%s/%s", s, files[i]);
        pathf (b, "%s/%s", d, files[i]);
        assert_same_content (a, b);
        assert_same_meta (a, b);
    }
    for (int i = 0; i < TREE_FILES; i++) {
        pathf (a, "%s/sub/f%02d", s, i);
        pathf (b, "%s/sub/f%02d", d, i);
        assert_same_content (a, b);
        assert_same_meta (a, b);
    }
    for (size_t i = 0; dir_times && i < sizeof (dirs) / sizeof (dirs[0]);
         i++) {
        pathf (a, "%s/%s", s, dirs[i]);
        pathf (b, "%s/%s", d, dirs[i]);
        assert_same_meta (a, b);
    }
    for (size_t i = 0; i < sizeof (links) / sizeof (links[0]); i++) {
        pathf (a, "%s/%s", s, links[i]);
        pathf (b, "%s/%s", d, links[i]);
        assert_int_equal (lstat (b, &st), 0);
        assert_true (S_ISLNK (st.st_mode));
        assert_true ((na = readlink (a, la, sizeof (la))) > 0);
        assert_true ((nb = readlink (b, lb, sizeof (lb))) > 0);
        assert_int_equal (na, nb);
        assert_memory_equal (la, lb, na);
        if (i == 0) {
            assert_int_equal (st.st_mtim.tv_sec, 2);
            assert_int_equal (st.st_mtim.tv_nsec, 3);
        }
    }
    /* the holes stayed holes; the fifo was not made */
    assert_int_equal (stat (pathf (b, "%s/holes", d), &st), 0);
    assert_true ((uint64_t) st.st_blocks * 512 < 4 * MiB);
    assert_int_equal (lstat (pathf (b, "%s/sub/fifo", d), &st), -1);
    assert_no_temps (d);
}

static void test_tree (void **state)
{
    char s[PATH_MAX], d[PATH_MAX], p[PATH_MAX];
    struct reports r = { 0 };
    struct prog pr = { 0 };
    struct tier_copy_opts opts = { .threads = 4, .chunk_size = 64 * KiB,
                                   .report = report_cb, .report_arg = &r,
                                   .progress = prog_cb, .progress_arg = &pr };
    struct tier_copy_result res;
    tier_error_t error;
    struct stat st0, st1;
    int sfd, dfd;

    make_tree (pathf (s, "%s/tree", root));
    mkdir_p (pathf (d, "%s/tree-copy", root), 0711);
    assert_int_equal (stat (d, &st0), 0);
    sfd = opendir_path (s);
    dfd = opendir_path (d);
    atomic_store (&wrap_delay_us, 2000);
    assert_int_equal (tier_copy_tree (sfd, dfd, &opts, &res, &error), 0);
    check_tree (s, d, true);
    /* several files at once on the pool */
    assert_true (atomic_load (&max_inflight) >= 2);
    assert_int_equal (res.threads, 5);
    assert_int_equal (res.files, 5 + TREE_FILES);
    assert_int_equal (res.dirs, 3);
    assert_int_equal (res.symlinks, 4);
    assert_int_equal (res.skipped, 1);
    assert_int_equal (res.errors, 0);
    assert_int_equal (r.skipped, 1);
    assert_string_equal (r.last, "sub/fifo");
    assert_false (pr.decreased);
    assert_int_equal (pr.last_done, res.bytes_total);
    assert_int_equal (res.bytes + res.hole_bytes, res.bytes_total);
    /* nothing outside was copied; the root kept its own mode and times */
    assert_int_equal (count_entries (d, NULL), 6);
    assert_int_equal (stat (d, &st1), 0);
    assert_int_equal (st1.st_mode, st0.st_mode);

    /* again, into the same tree, in the calling thread only: merged */
    atomic_store (&wrap_delay_us, 0);
    opts.threads = 1;
    opts.progress = NULL;
    assert_int_equal (tier_copy_tree (sfd, dfd, &opts, &res, &error), 0);
    assert_int_equal (res.threads, 1);
    assert_int_equal (res.dirs, 0);
    assert_int_equal (res.files, 5 + TREE_FILES);
    check_tree (s, d, false);           /* our renames changed their mtimes */

    /* symlinks skipped on request */
    pathf (p, "%s/tree-nolinks", root);
    mkdir_p (p, 0755);
    close (dfd);
    dfd = opendir_path (p);
    opts.flags = TIER_COPY_SKIP_SYMLINKS;
    assert_int_equal (tier_copy_tree (sfd, dfd, &opts, &res, &error), 0);
    assert_int_equal (res.symlinks, 0);
    assert_int_equal (res.skipped, 5);
    assert_int_equal (lstat (pathf (p, "%s/tree-nolinks/link-in", root),
                             &st1), -1);
    close (dfd);
    close (sfd);
}

static void test_tree_errors (void **state)
{
    char s[PATH_MAX], d[PATH_MAX], p[PATH_MAX];
    struct reports r = { 0 };
    struct tier_copy_opts opts = { .threads = 3,
                                   .flags = TIER_COPY_NOREPLACE,
                                   .report = report_cb, .report_arg = &r };
    struct tier_copy_result res;
    tier_error_t error;
    int sfd, dfd;

    pathf (s, "%s/etree", root);
    mkdir_p (s, 0755);
    mkdir_p (pathf (p, "%s/sub", s), 0755);
    for (int i = 0; i < 8; i++)
        make_file (pathf (p, "%s/sub/f%d", s, i), 10 * KiB, 0644, 300 + i);
    pathf (d, "%s/etree-copy", root);
    mkdir_p (d, 0755);
    mkdir_p (pathf (p, "%s/sub", d), 0755);
    make_file (pathf (p, "%s/sub/f3", d), 3, 0644, 399);
    sfd = opendir_path (s);
    dfd = opendir_path (d);

    /* an existing file and NOREPLACE: EEXIST, the file is kept */
    errno = 0;
    assert_int_equal (tier_copy_tree (sfd, dfd, &opts, &res, &error), -1);
    assert_int_equal (errno, EEXIST);
    assert_non_null (strstr (error.text, "sub/f3"));
    assert_int_equal (r.failed, 0);
    assert_no_temps (d);
    /* keep going: everything else is copied, the failure reported */
    opts.flags |= TIER_COPY_KEEP_GOING;
    assert_int_equal (system (pathf (p, "rm -f %s/sub/f[0124-7]", d)), 0);
    errno = 0;
    assert_int_equal (tier_copy_tree (sfd, dfd, &opts, &res, &error), -1);
    assert_int_equal (errno, EEXIST);
    assert_int_equal (res.errors, 1);
    assert_int_equal (res.files, 7);
    assert_int_equal (r.failed, 1);
    assert_string_equal (r.last, "sub/f3");
    assert_int_equal (count_entries (pathf (p, "%s/sub", d), NULL), 8);
    assert_no_temps (d);
    close (dfd);

    /* the destination inside the source is skipped, not recursed into */
    dfd = opendir_path (pathf (p, "%s/sub", s));
    opts.flags = 0;
    r.skipped = 0;
    assert_int_equal (tier_copy_tree (sfd, dfd, &opts, &res, &error), 0);
    assert_int_equal (res.skipped, 1);
    assert_int_equal (r.skipped, 1);
    assert_int_equal (res.files, 0);
    assert_int_equal (count_entries (pathf (p, "%s/sub", s), NULL), 8);
    close (dfd);
    /* the same directory, and not directories */
    errno = 0;
    assert_int_equal (tier_copy_tree (sfd, sfd, &opts, &res, &error), -1);
    assert_int_equal (errno, EINVAL);
    dfd = open (pathf (p, "%s/sub/f0", s), O_RDONLY);
    errno = 0;
    assert_int_equal (tier_copy_tree (sfd, dfd, &opts, &res, &error), -1);
    assert_int_equal (errno, ENOTDIR);
    close (dfd);
    close (sfd);
}

static void test_tree_cancel (void **state)
{
    char s[PATH_MAX], d[PATH_MAX], p[PATH_MAX];
    atomic_int cancel = 0;
    struct prog pr = { .at = 5, .action = ACT_CANCEL, .cancel = &cancel };
    struct tier_copy_opts opts = { .threads = 4, .chunk_size = 16 * KiB,
                                   .cancel = &cancel,
                                   .progress = prog_cb, .progress_arg = &pr };
    struct tier_copy_result res;
    tier_error_t error;
    int sfd, dfd;

    pathf (s, "%s/ctree", root);
    mkdir_p (s, 0755);
    for (int i = 0; i < 40; i++)
        make_file (pathf (p, "%s/f%02d", s, i), 64 * KiB, 0644, 400 + i);
    pathf (d, "%s/ctree-copy", root);
    mkdir_p (d, 0755);
    sfd = opendir_path (s);
    dfd = opendir_path (d);
    errno = 0;
    assert_int_equal (tier_copy_tree (sfd, dfd, &opts, &res, &error), -1);
    assert_int_equal (errno, ECANCELED);
    assert_true (res.files < 40);
    assert_int_equal (res.errors, 0);
    /* what was published is complete; nothing else is there */
    assert_int_equal (count_entries (d, NULL), (int) res.files);
    assert_no_temps (d);
    for (int i = 0; i < 40; i++) {
        struct stat st;

        if (stat (pathf (p, "%s/f%02d", d, i), &st) == 0)
            assert_same_content (p, pathf (p, "%s/f%02d", s, i));
    }
    close (dfd);
    close (sfd);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_plain, setup, teardown),
        cmocka_unit_test_setup_teardown (test_owner, setup, teardown),
        cmocka_unit_test_setup_teardown (test_empty, setup, teardown),
        cmocka_unit_test_setup_teardown (test_sparse, setup, teardown),
        cmocka_unit_test_setup_teardown (test_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown (test_parallel_file, setup, teardown),
        cmocka_unit_test_setup_teardown (test_fallback, setup, teardown),
        cmocka_unit_test_setup_teardown (test_changed, setup, teardown),
        cmocka_unit_test_setup_teardown (test_expect, setup, teardown),
        cmocka_unit_test_setup_teardown (test_before_publish, setup, teardown),
        cmocka_unit_test_setup_teardown (test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown (test_noreplace, setup, teardown),
        cmocka_unit_test_setup_teardown (test_fsync_fails, setup, teardown),
        cmocka_unit_test_setup_teardown (test_limit, setup, teardown),
        cmocka_unit_test (test_limit_stats),
        cmocka_unit_test (test_limit_shared),
        cmocka_unit_test_setup_teardown (test_limit_charge, setup, teardown),
        cmocka_unit_test_setup_teardown (test_bad_args, setup, teardown),
        cmocka_unit_test (test_temp_name),
        cmocka_unit_test_setup_teardown (test_enospc, setup, teardown),
        cmocka_unit_test_setup_teardown (test_tree, setup, teardown),
        cmocka_unit_test_setup_teardown (test_tree_errors, setup, teardown),
        cmocka_unit_test_setup_teardown (test_tree_cancel, setup, teardown),
    };
    return UNIT_RUN (tests);
}
