/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* preload.c - libtier_preload.so: read-only opens under batch directories
 * are served from BB replicas
 *
 * The plugin preloads it into the tasks of jobs with batch directories
 * and sets TIER_BATCH_DIRS ("D1:D2:!D3": batch directories, and
 * directories inside them that are not batch) and TIER_SOCKET.  For an
 * open for reading only of a regular file under a batch directory:
 *
 *   1. a replica this process already validated within the policy's
 *      revalidate interval is opened directly (no agent, no GFS) -- if
 *      the path names the file without "." or ".." components, so that
 *      its lexical form is what the kernel resolves;
 *   2. else the source is opened as the program asked (same flags, same
 *      credentials, so the same errors), and its descriptor is passed to
 *      the node's agent (replica.open), which answers with a replica's
 *      descriptor (O_PATH) -- fetched once per file version per burst
 *      buffer -- or says to read the GFS;
 *   3. the replica is reopened through /proc/self/fd with the program's
 *      flags and put in place of the source descriptor (dup3 onto its
 *      number: the program still gets the lowest free descriptor, as
 *      open promises).
 *
 * Nobody opens a replica by name but the agent (the BB's directories are
 * root 0700): what a user may read is decided at each request, so a user
 * whose access to a source is revoked reads no replica of it once the
 * process's cache has expired.  The cache keeps the agent's descriptor
 * (at most CACHE_FDS of them, close-on-exec, numbered from CACHE_FD_BASE
 * up so that the program's own numbers do not move); an entry whose
 * number the program closed and reused is never opened: a reopened
 * descriptor must be the replica's inode, and the cache closes a number
 * only while it is that O_PATH descriptor.
 *
 * Whatever fails, the program gets the source descriptor -- as its open
 * made it: what a fetcher changed on it (O_DIRECT, readahead, offset) is
 * undone, or, when the agent did not answer and a fetcher may still hold
 * it, the source is opened afresh for the program.  The interposer never
 * changes what a program reads, only where it comes from.  What it
 * cannot see: static binaries, raw syscalls (openat2 included), Go
 * programs (their runtime makes its own syscalls), opens submitted
 * through io_uring, and files the kernel and ld.so open (executables,
 * shared libraries); those read the GFS.  fstat of a redirected
 * descriptor describes the replica (owner root, mode 0444, another
 * inode); size and times are the source's.
 *
 * Everything else passes through: a flags test and, for paths that may
 * lie under a batch directory, a prefix test -- no lock, no allocation,
 * no system call beyond getcwd for relative paths.  The redirect path
 * takes no lock either: the cache's slots are seqlocks whose writers
 * never wait (a signal handler that opens a batch file while its thread
 * writes the slot simply skips the cache), a fork in the middle of a
 * write leaves an empty slot (struct centry); it allocates only in the
 * agent client, and guards against recursion.  Links only libc.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/client.h"
#include "lib/paths.h"
#include "lib/tjson.h"
#include "wcache.h"

#define EXPORT __attribute__ ((visibility ("default")))

#define DIRS_MAX 64
#define CACHE_SLOTS 256
#define CACHE_PATH_MAX 1024
#define CACHE_FDS 64                    /* descriptors the cache holds */
#define CACHE_FD_BASE 512               /* ... numbered from here */
#define AGENT_BACKOFF_S 10              /* after the agent did not answer */

struct dir {
    char path[PATH_MAX];
    size_t len;
    bool exclude;               /* "!D": inside a batch directory, not batch */
};

/* A slot of the process's cache, guarded by its sequence count (a
 * seqlock without a lock): odd while a writer fills it.  A reader copies
 * the slot and uses the copy only if the count was even and did not move
 * meanwhile.  A writer claims the slot by making the count odd with a
 * compare-and-swap, never waiting (a slot being written is skipped), and
 * clears expires_ms first and sets it last: a slot left half-written --
 * by a thread that does not exist in a forked child, or by the thread a
 * signal handler interrupted -- is empty, never a path with another
 * file's replica.
 */
struct centry {
    unsigned seq;
    int64_t expires_ms;         /* monotonic; 0: empty slot */
    uint64_t size;
    char path[CACHE_PATH_MAX];  /* the file's path, as the kernel tells it */
    int pfd;                    /* the replica's O_PATH descriptor, or -1 */
    dev_t dev;                  /* ... its identity */
    ino_t ino;
};

static struct {
    bool enabled;
    char sock[108];
    int ndirs;
    struct dir dirs[DIRS_MAX];
    int timeout_ms;
    struct centry cache[CACHE_SLOTS];
    uint64_t cached_opens, cached_bytes;       /* not yet reported */
    int64_t agent_down_until_ms;
    bool cache_fds_ok; /* RLIMIT_NOFILE leaves room for them */
    int cache_fds;     /* held by the cache */
} st;

static __thread int in_tier __attribute__ ((tls_model ("initial-exec")));

typedef int (*openat_f) (int, const char *, int, ...);
typedef int (*chdir_f) (const char *);
typedef int (*fchdir_f) (int);
typedef FILE *(*fopen_f) (const char *, const char *);
typedef FILE *(*freopen_f) (const char *, const char *, FILE *);

static openat_f real_openat;
static chdir_f real_chdir;
static fchdir_f real_fchdir;
/* May a relative path lead under a batch directory?  The working
 * directory lies under one, or above one.  Kept by chdir and fchdir (and
 * only ever used to skip work: a wrong answer costs a cache miss, never a
 * wrong file, since a relative open that is redirected resolves the
 * working directory anew). */
static volatile int cwd_related = 1;
static fopen_f real_fopen;
static freopen_f real_freopen;

/* The real openat, even before the constructor ran (another library's
 * constructor may open files first, and dlsym itself may open).
 */
static int sys_openat (int dirfd, const char *path, int flags, mode_t mode)
{
    if (real_openat)
        return real_openat (dirfd, path, flags, mode);
    return (int) syscall (SYS_openat, dirfd, path, flags, mode);
}

/* In a forked child only the forking thread lives on: a slot another
 * thread was writing at fork time stays odd for ever; make it even again.
 * It is empty, or complete (see struct centry).  If the forking thread
 * is that writer (fork in a signal handler), it finishes the slot later
 * and stores the same even count.
 */
static void child_after_fork (void)
{
    for (int i = 0; i < CACHE_SLOTS; i++) {
        struct centry *e = &st.cache[i];
        unsigned seq = __atomic_load_n (&e->seq, __ATOMIC_RELAXED);
        if (seq & 1)
            __atomic_store_n (&e->seq, seq + 1, __ATOMIC_RELEASE);
    }
    st.cached_opens = st.cached_bytes = 0;
}

static void parse_dirs (const char *v)
{
    const char *p = v;

    while (*p && st.ndirs < DIRS_MAX) {
        const char *end = strchr (p, ':');
        size_t len = end ? (size_t) (end - p) : strlen (p);
        struct dir *d = &st.dirs[st.ndirs];
        bool ex = len > 0 && p[0] == '!';
        char raw[PATH_MAX];

        if (ex) {
            p++;
            len--;
        }
        if (len > 0 && len < sizeof (raw) && p[0] == '/') {
            memcpy (raw, p, len);
            raw[len] = '\0';
            if (tier_path_normalize (raw, d->path, sizeof (d->path)) == 0
                && strcmp (d->path, "/")) {
                d->len = strlen (d->path);
                d->exclude = ex;
                st.ndirs++;
            }
        }
        if (!end)
            break;
        p = end + 1;
    }
}

static void cwd_check (void);

__attribute__ ((constructor)) static void preload_init (void)
{
    const char *dirs = getenv ("TIER_BATCH_DIRS");
    const char *sock = getenv ("TIER_SOCKET");
    const char *to = getenv ("TIER_REPLICA_TIMEOUT");

    in_tier++;
    real_openat = (openat_f) dlsym (RTLD_NEXT, "openat");
    real_chdir = (chdir_f) dlsym (RTLD_NEXT, "chdir");
    real_fchdir = (fchdir_f) dlsym (RTLD_NEXT, "fchdir");
    real_fopen = (fopen_f) dlsym (RTLD_NEXT, "fopen");
    real_freopen = (freopen_f) dlsym (RTLD_NEXT, "freopen");
    in_tier--;
    (void) pthread_atfork (NULL, NULL, child_after_fork);
    {
        struct rlimit rl;
        st.cache_fds_ok = getrlimit (RLIMIT_NOFILE, &rl) == 0
                          && rl.rlim_cur >= 2 * CACHE_FD_BASE;
    }
    if (!dirs || !*dirs || !sock || sock[0] != '/'
        || strlen (sock) >= sizeof (st.sock))
        return;
    strcpy (st.sock, sock);
    parse_dirs (dirs);
    /* the agent answers when the replica is there: a big file on a slow
     * GFS takes a while, but never longer than reading it ourselves */
    st.timeout_ms = 600 * 1000;
    if (to && atoi (to) > 0)
        st.timeout_ms = atoi (to) * 1000;
    st.enabled = st.ndirs > 0 && real_openat;
    cwd_check ();
}

/* Only reads: no creation, truncation, directory, O_PATH or tmpfile. */
static bool wants_redirect (int flags)
{
    return st.enabled && (flags & O_ACCMODE) == O_RDONLY
           && !(flags & (O_CREAT | O_TRUNC | O_DIRECTORY | O_PATH
                         | __O_TMPFILE));
}

/* Under a batch directory (the longest match decides; of two equal, the
 * exclusion)? */
static bool in_batch (const char *norm)
{
    size_t best = 0;
    bool batch = false;

    for (int i = 0; i < st.ndirs; i++) {
        const struct dir *d = &st.dirs[i];
        if ((d->len > best || (d->len == best && d->exclude))
            && !strncmp (norm, d->path, d->len)
            && (norm[d->len] == '/' || norm[d->len] == '\0')) {
            best = d->len;
            batch = !d->exclude;
        }
    }
    return batch;
}

static void cwd_check (void)
{
    char cwd[PATH_MAX];
    int related = 1;

    if (st.enabled && getcwd (cwd, sizeof (cwd))) {
        size_t n = strlen (cwd);
        related = 0;
        for (int i = 0; i < st.ndirs && !related; i++) {
            const struct dir *d = &st.dirs[i];
            if (d->exclude)
                continue;
            /* cwd under the directory, or the directory under cwd */
            if ((!strncmp (cwd, d->path, d->len)
                 && (cwd[d->len] == '/' || cwd[d->len] == '\0'))
                || (!strncmp (d->path, cwd, n)
                    && (d->path[n] == '/' || n == 1)))
                related = 1;
        }
    }
    cwd_related = related;
}

/* A relative path that cannot lead under a batch directory: the
 * working directory is unrelated and the path never climbs ("..").
 */
static bool rel_outside (const char *path)
{
    if (cwd_related)
        return false;
    for (const char *p = path; (p = strstr (p, "..")); p += 2)
        if ((p == path || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
            return false;
    return true;
}

/* An absolute path already in normal form but perhaps for a trailing
 * '/': no "//", no "." or ".." component.  Such a path can be tested
 * against the batch directories as it is (the pass-through fast path).
 */
static bool plain (const char *path)
{
    for (const char *p = path; (p = strchr (p, '/')); p++)
        if (p[1] == '/' || (p[1] == '.' && (p[2] == '/' || p[2] == '\0'
                                           || (p[2] == '.'
                                               && (p[3] == '/'
                                                   || p[3] == '\0')))))
            return false;
    return true;
}

/* A relative path with nothing for the kernel to interpret beyond its
 * names: no "." or ".." component, no empty one ("//", a trailing '/').
 * Joined to the physical path of the directory it starts from, it names
 * exactly what the kernel will open, so the process's cache may answer
 * for it (a ".." after a symlink, or "FILE/." and "FILE/", would not).
 */
static bool exact_rel (const char *path)
{
    const char *p = path;

    if (!*p)
        return false;
    for (;;) {
        const char *start = p;
        size_t len;

        while (*p && *p != '/')
            p++;
        len = (size_t) (p - start);
        if (len == 0 || (len == 1 && start[0] == '.')
            || (len == 2 && start[0] == '.' && start[1] == '.'))
            return false;
        if (!*p)
            return true;
        p++;
    }
}

/* The absolute, lexically normalised form of (dirfd, path), or -1.
 * *exact says whether that form names what the kernel opens for
 * (dirfd, path): the path is exact (see exact_rel), and the directory
 * it is relative to is known by its physical path (getcwd and
 * /proc/self/fd give those, symlinks resolved; a deleted directory has
 * none).  Only then may the process's cache answer (cache_open): the
 * lexical form of "sub/../x" is "x" whatever sub is, the kernel's is not.
 */
static int absolute (int dirfd, const char *path, char *out, size_t size,
                     bool *exact)
{
    static const char deleted[] = " (deleted)";
    char buf[PATH_MAX * 2];
    size_t n;

    *exact = false;
    if (path[0] == '/') {
        *exact = exact_rel (path + 1);
        return tier_path_normalize (path, out, size);
    }
    if (dirfd == AT_FDCWD) {
        /* the kernel's own path of the working directory (ENOENT once it
         * is deleted or out of reach) */
        if (!getcwd (buf, PATH_MAX))
            return -1;
        n = strlen (buf);
        *exact = buf[0] == '/';
    }
    else {
        char link[64];
        ssize_t r;
        (void) snprintf (link, sizeof (link), "/proc/self/fd/%d", dirfd);
        if ((r = readlink (link, buf, PATH_MAX - 1)) <= 0 || buf[0] != '/')
            return -1;
        buf[r] = '\0';
        n = (size_t) r;
        *exact = !(n >= sizeof (deleted) - 1
                   && !strcmp (buf + n - (sizeof (deleted) - 1), deleted));
    }
    *exact = *exact && exact_rel (path);
    if (n + 1 + strlen (path) >= sizeof (buf))
        return -1;
    buf[n] = '/';
    strcpy (buf + n + 1, path);
    return tier_path_normalize (buf, out, size);
}

static unsigned slot_of (const char *path)
{
    unsigned h = 2166136261u;

    while (*path)
        h = (h ^ (unsigned char) *path++) * 16777619u;
    return h % CACHE_SLOTS;
}

/* Claim e for writing: its even count, or -1 if a writer has it. */
static int64_t slot_claim (struct centry *e)
{
    unsigned seq = __atomic_load_n (&e->seq, __ATOMIC_RELAXED);

    if ((seq & 1)
        || !__atomic_compare_exchange_n (&e->seq, &seq, seq + 1, false,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return -1;
    /* the odd count is seen before anything written after it */
    __atomic_thread_fence (__ATOMIC_RELEASE);
    return seq;
}

static void slot_release (struct centry *e, int64_t seq)
{
    __atomic_store_n (&e->seq, (unsigned) seq + 2, __ATOMIC_RELEASE);
}

#ifdef TIER_PRELOAD_TEST
/* tests/unit/test_preload.c: a fork or a signal in the middle of a put */
void tier_preload_test_mid_put (void);
#define MID_PUT() tier_preload_test_mid_put ()
#else
#define MID_PUT() do { } while (0)
#endif

/* The replica behind the O_PATH descriptor pfd, opened with the
 * program's flags (a new open file description: its own offset), if it
 * is the inode (dev, ino); else -1.  O_NOFOLLOW would refuse the
 * /proc/self/fd link itself. */
static int reopen (int pfd, int flags, dev_t dev, ino_t ino)
{
    char link[64];
    struct stat sb;
    int fd;

    (void) snprintf (link, sizeof (link), "/proc/self/fd/%d", pfd);
    fd = sys_openat (AT_FDCWD, link, flags & ~(O_CREAT | O_NOFOLLOW), 0);
    if (fd >= 0
        && (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode) || sb.st_dev != dev
            || sb.st_ino != ino)) {
        (void) close (fd);
        errno = ESTALE;
        return -1;
    }
    return fd;
}

/* pfd is still the cache's: the O_PATH descriptor of (dev, ino).  The
 * program may have closed the number and opened something else there. */
static bool cache_fd_ours (int pfd, dev_t dev, ino_t ino)
{
    struct stat sb;
    int fl;

    return (fl = fcntl (pfd, F_GETFL)) >= 0 && (fl & O_PATH)
           && fstat (pfd, &sb) == 0 && sb.st_dev == dev && sb.st_ino == ino;
}

/* A replica validated recently for path: open it (-1 if none). */
static int cache_open (const char *norm, int flags)
{
    struct centry *e = &st.cache[slot_of (norm)];
    struct centry copy;
    unsigned seq;
    int64_t seq2;
    int fd;

    seq = __atomic_load_n (&e->seq, __ATOMIC_ACQUIRE);
    if (seq & 1)
        return -1;
    memcpy (&copy, e, sizeof (copy));
    __atomic_thread_fence (__ATOMIC_ACQUIRE);
    if (__atomic_load_n (&e->seq, __ATOMIC_RELAXED) != seq)
        return -1;                      /* written meanwhile */
    copy.path[sizeof (copy.path) - 1] = '\0';
    if (!copy.expires_ms || tier_now_ms () >= copy.expires_ms
        || strcmp (copy.path, norm) || copy.pfd < CACHE_FD_BASE)
        return -1;
    fd = reopen (copy.pfd, flags, copy.dev, copy.ino);
    if (fd < 0) {
        /* its descriptor is gone (closed by the program): forget it
         * (unless rewritten), ask again */
        if ((seq2 = slot_claim (e)) >= 0) {
            if (!strcmp (e->path, norm))
                __atomic_store_n (&e->expires_ms, 0, __ATOMIC_RELAXED);
            slot_release (e, seq2);
        }
        return -1;
    }
    __atomic_add_fetch (&st.cached_opens, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch (&st.cached_bytes, copy.size, __ATOMIC_RELAXED);
    return fd;
}

/* Remember for revalidate seconds that norm's replica is the one behind
 * pfd (the caller's O_PATH descriptor: the cache holds a duplicate). */
static void cache_put (const char *norm, int pfd, uint64_t size, int revalidate)
{
    struct centry *e = &st.cache[slot_of (norm)];
    struct stat sb;
    int64_t seq;
    int old, mine;
    dev_t odev;
    ino_t oino;

    if (revalidate <= 0 || !st.cache_fds_ok || strlen (norm) >= sizeof (e->path)
        || fstat (pfd, &sb) < 0)
        return;
    if (__atomic_add_fetch (&st.cache_fds, 1, __ATOMIC_RELAXED) > CACHE_FDS
        || (mine = fcntl (pfd, F_DUPFD_CLOEXEC, CACHE_FD_BASE)) < 0) {
        __atomic_sub_fetch (&st.cache_fds, 1, __ATOMIC_RELAXED);
        return;
    }
    if ((seq = slot_claim (e)) < 0) {
        (void) close (mine);
        __atomic_sub_fetch (&st.cache_fds, 1, __ATOMIC_RELAXED);
        return;
    }
    /* empty first, valid last: a put cut short leaves no entry */
    __atomic_store_n (&e->expires_ms, 0, __ATOMIC_RELAXED);
    __atomic_signal_fence (__ATOMIC_SEQ_CST);
    old = e->pfd;
    odev = e->dev;
    oino = e->ino;
    e->pfd = -1;
    strcpy (e->path, norm);
    MID_PUT ();
    e->dev = sb.st_dev;
    e->ino = sb.st_ino;
    e->pfd = mine;
    e->size = size;
    __atomic_signal_fence (__ATOMIC_SEQ_CST);
    __atomic_store_n (&e->expires_ms, tier_now_ms () + (int64_t) revalidate * 1000,
                      __ATOMIC_RELAXED);
    slot_release (e, seq);
    if (old >= CACHE_FD_BASE) {
        /* not ours any more if the program closed it: then not closed */
        if (cache_fd_ours (old, odev, oino))
            (void) close (old);
        __atomic_sub_fetch (&st.cache_fds, 1, __ATOMIC_RELAXED);
    }
}

/* Ask the agent about the open source srcfd (at real).  0 with the
 * replica's descriptor in *rfd (O_PATH); else read the source: -1 if srcfd was never sent, -3
 * if the agent answered without a replica (then nobody uses srcfd any
 * more: a fetcher that read it has ended before its miss is answered),
 * -2 if there was no answer (timeout, the agent died, an error reply): a
 * fetcher may still hold srcfd.
 */
static int ask_agent (int srcfd, const char *real, int *rfd, uint64_t *rsize,
                      int *revalidate)
{
    char body[PATH_MAX + 256];
    struct tier_jw w;
    tier_error_t error;
    char *reply = NULL;
    size_t len = 0;
    uint64_t n, bytes;
    int64_t rv = 0;
    int fd, rc = -1, rnfds = 0;

    *rfd = -1;
    if (st.agent_down_until_ms && tier_now_ms () < st.agent_down_until_ms)
        return -1;
    n = __atomic_exchange_n (&st.cached_opens, 0, __ATOMIC_RELAXED);
    bytes = __atomic_exchange_n (&st.cached_bytes, 0, __ATOMIC_RELAXED);
    tier_jw_init (&w, body, sizeof (body));
    tier_jw_str (&w, "op", "replica.open");
    tier_jw_str (&w, "path", real);
    if (n) {
        tier_jw_uint (&w, "cached", n);
        tier_jw_uint (&w, "cached_bytes", bytes);
    }
    if (tier_jw_finish (&w) < 0)
        return -1;
    if ((fd = tier_client_connect (st.sock, 2000, &error)) < 0) {
        st.agent_down_until_ms = tier_now_ms () + AGENT_BACKOFF_S * 1000;
        return -1;
    }
    if (tier_client_call_fds (fd, body, &srcfd, 1, &reply, &len, rfd, &rnfds, 1,
                              st.timeout_ms, &error)
        < 0)
        rc = -2;
    else if (rnfds == 1) {
        if (tier_jr_get_int (reply, len, "revalidate", &rv) < 0)
            rv = 0;
        if (tier_jr_get_uint (reply, len, "size", rsize) < 0)
            *rsize = 0;
        *revalidate = (int) rv;
        rc = 0;
    }
    else {
        if (rnfds > 0)
            (void) close (*rfd);
        *rfd = -1;
        rc = -3;
    }
    free (reply);
    (void) close (fd);
    return rc;
}

/* The source descriptor as the program's open made it, after the agent
 * had it: a fetcher reads it with O_DIRECT (F_SETFL acts on the open
 * file description, which the program shares), without readahead, and
 * moves its offset.  fl: its flags before it was sent.
 */
static void source_restore (int srcfd, int fl)
{
    if (fl >= 0)
        (void) fcntl (srcfd, F_SETFL, fl);
    (void) posix_fadvise (srcfd, 0, 0, POSIX_FADV_NORMAL);
    (void) lseek (srcfd, 0, SEEK_SET);
}

/* The redirect path.  Returns the descriptor (or -1 with errno) when it
 * handled the open, or -2 when the open should pass through.
 */
static int redirect (int dirfd, const char *path, int flags, mode_t mode)
{
    char norm[PATH_MAX], real[PATH_MAX], link[64];
    uint64_t rsize = 0;
    struct stat sb, rb;
    int srcfd, fd, rfd, revalidate = 0, saved, rc, fl;
    bool exact;
    ssize_t n;

    if (!path || (path[0] != '/' && dirfd == AT_FDCWD && rel_outside (path))
        || (path[0] == '/' && plain (path) && !in_batch (path))
        || absolute (dirfd, path, norm, sizeof (norm), &exact) < 0
        || !in_batch (norm))
        return -2;
    in_tier++;
    /* the cache answers only for a path that names its file as the
     * kernel would resolve it; anything else opens the source */
    if (exact && (fd = cache_open (norm, flags)) >= 0) {
        in_tier--;
        return fd;
    }
    /* the source, as the program asked: its errors are the program's */
    if ((srcfd = sys_openat (dirfd, path, flags, mode)) < 0) {
        saved = errno;
        in_tier--;
        errno = saved;
        return -1;
    }
    (void) snprintf (link, sizeof (link), "/proc/self/fd/%d", srcfd);
    if (fstat (srcfd, &sb) < 0 || !S_ISREG (sb.st_mode)
        || (n = readlink (link, real, sizeof (real) - 1)) <= 0)
        goto out;
    real[n] = '\0';
    if (!in_batch (real))
        goto out; /* a symlink led out */
    fl = fcntl (srcfd, F_GETFL);
    rc = ask_agent (srcfd, real, &rfd, &rsize, &revalidate);
    if (rc == -1)
        goto out; /* never sent: untouched */
    if (rc == -2) {
        /* a fetcher may still hold the open file description (the agent
         * died mid-copy, or is slow): its flags and offset are not the
         * program's to share, give the program its own */
        int again = sys_openat (dirfd, path, flags, mode);
        if (again >= 0 && dup3 (again, srcfd, flags & O_CLOEXEC) >= 0)
            (void) close (again);
        else {
            if (again >= 0)
                (void) close (again);
            source_restore (srcfd, fl);
        }
        goto out;
    }
    if (rc < 0) {
        source_restore (srcfd, fl);
        goto out;
    }
    if (fstat (rfd, &rb) < 0
        || (fd = reopen (rfd, flags, rb.st_dev, rb.st_ino)) < 0) {
        (void) close (rfd);
        source_restore (srcfd, fl);
        goto out;
    }
    if (dup3 (fd, srcfd, flags & O_CLOEXEC) < 0) {
        (void) close (fd);
        (void) close (rfd);
        source_restore (srcfd, fl);
        goto out;
    }
    (void) close (fd);
    /* cache the decision under the file's own path, as the kernel tells
     * it: only when the lexical form is that path (no symlink on the way) */
    if (!strcmp (norm, real))
        cache_put (norm, rfd, rsize, revalidate);
    (void) close (rfd);
out:
    in_tier--;
    return srcfd;
}

static int do_openat (int dirfd, const char *path, int flags, mode_t mode)
{
    int fd;

    if (!in_tier && wants_redirect (flags)
        && (fd = redirect (dirfd, path, flags, mode)) != -2)
        return fd;
    if (!in_tier && path && tier_wcache_pending ()) {
        /* the block cache's records reach the file first (wcache.c) */
        char norm[PATH_MAX];
        bool exact;
        if (absolute (dirfd, path, norm, sizeof (norm), &exact) == 0)
            tier_wcache_before_open (norm);
    }
    fd = sys_openat (dirfd, path, flags, mode);
    if (fd >= 0 && !in_tier && tier_wcache_wants (flags))
        tier_wcache_opened (fd);
    return fd;
}

/* ------------------------------------------------------- entry points */

static mode_t mode_arg (int flags, va_list ap)
{
    return (flags & (O_CREAT | __O_TMPFILE)) ? (mode_t) va_arg (ap, int) : 0;
}

EXPORT int open (const char *path, int flags, ...)
{
    va_list ap;
    mode_t mode;

    va_start (ap, flags);
    mode = mode_arg (flags, ap);
    va_end (ap);
    return do_openat (AT_FDCWD, path, flags, mode);
}

EXPORT int open64 (const char *path, int flags, ...)
{
    va_list ap;
    mode_t mode;

    va_start (ap, flags);
    mode = mode_arg (flags, ap);
    va_end (ap);
    return do_openat (AT_FDCWD, path, flags | O_LARGEFILE, mode);
}

EXPORT int openat (int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    mode_t mode;

    va_start (ap, flags);
    mode = mode_arg (flags, ap);
    va_end (ap);
    return do_openat (dirfd, path, flags, mode);
}

EXPORT int openat64 (int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    mode_t mode;

    va_start (ap, flags);
    mode = mode_arg (flags, ap);
    va_end (ap);
    return do_openat (dirfd, path, flags | O_LARGEFILE, mode);
}

/* _FORTIFY_SOURCE variants: no mode (O_CREAT is not allowed there) */
EXPORT int __open_2 (const char *path, int flags);
EXPORT int __open64_2 (const char *path, int flags);
EXPORT int __openat_2 (int dirfd, const char *path, int flags);
EXPORT int __openat64_2 (int dirfd, const char *path, int flags);

EXPORT int __open_2 (const char *path, int flags)
{
    return do_openat (AT_FDCWD, path, flags, 0);
}

EXPORT int __open64_2 (const char *path, int flags)
{
    return do_openat (AT_FDCWD, path, flags | O_LARGEFILE, 0);
}

EXPORT int __openat_2 (int dirfd, const char *path, int flags)
{
    return do_openat (dirfd, path, flags, 0);
}

EXPORT int __openat64_2 (int dirfd, const char *path, int flags)
{
    return do_openat (dirfd, path, flags | O_LARGEFILE, 0);
}

/* fopen modes that only read: "r", with 'b', 'e', 'm', 'c' flags and no
 * '+', 'w', 'a', 'x'.
 */
static bool mode_read_only (const char *m, int *oflags)
{
    if (!m || m[0] != 'r')
        return false;
    *oflags = O_RDONLY;
    for (const char *p = m + 1; *p && *p != ','; p++) {
        if (*p == '+' || *p == 'w' || *p == 'a' || *p == 'x')
            return false;
        if (*p == 'e')
            *oflags |= O_CLOEXEC;
    }
    return true;
}

static FILE *do_fopen (const char *path, const char *mode)
{
    int oflags, fd, saved;
    FILE *f;

    if (!real_fopen)
        real_fopen = (fopen_f) dlsym (RTLD_NEXT, "fopen");
    if (in_tier || !mode_read_only (mode, &oflags)
        || !wants_redirect (oflags))
        return real_fopen (path, mode);
    if ((fd = redirect (AT_FDCWD, path, oflags, 0)) == -2)
        return real_fopen (path, mode);
    if (fd < 0)
        return NULL;
    if (!(f = fdopen (fd, mode))) {
        saved = errno;
        (void) close (fd);
        errno = saved;
    }
    return f;
}

EXPORT FILE *fopen (const char *path, const char *mode)
{
    return do_fopen (path, mode);
}

EXPORT FILE *fopen64 (const char *path, const char *mode)
{
    return do_fopen (path, mode);
}

static FILE *do_freopen (const char *path, const char *mode, FILE *stream)
{
    char proc[64];
    int oflags, fd;
    FILE *f;

    if (!real_freopen)
        real_freopen = (freopen_f) dlsym (RTLD_NEXT, "freopen");
    if (in_tier || !path || !mode_read_only (mode, &oflags)
        || !wants_redirect (oflags))
        return real_freopen (path, mode, stream);
    if ((fd = redirect (AT_FDCWD, path, oflags | O_CLOEXEC, 0)) == -2)
        return real_freopen (path, mode, stream);
    if (fd < 0) {
        /* freopen closes the stream whatever happens */
        int saved = errno;
        (void) fclose (stream);
        errno = saved;
        return NULL;
    }
    /* reopen through the descriptor: freopen keeps the stream's number */
    (void) snprintf (proc, sizeof (proc), "/proc/self/fd/%d", fd);
    in_tier++;
    f = real_freopen (proc, mode, stream);
    in_tier--;
    (void) close (fd);
    return f;
}

EXPORT FILE *freopen (const char *path, const char *mode, FILE *stream)
{
    return do_freopen (path, mode, stream);
}

EXPORT FILE *freopen64 (const char *path, const char *mode, FILE *stream)
{
    return do_freopen (path, mode, stream);
}

/* The working directory, for rel_outside. */
EXPORT int chdir (const char *path)
{
    int rc;

    if (!real_chdir)
        real_chdir = (chdir_f) dlsym (RTLD_NEXT, "chdir");
    if ((rc = real_chdir (path)) == 0 && st.enabled) {
        int saved = errno;
        cwd_check ();
        errno = saved;
    }
    return rc;
}

EXPORT int fchdir (int fd)
{
    int rc;

    if (!real_fchdir)
        real_fchdir = (fchdir_f) dlsym (RTLD_NEXT, "fchdir");
    if ((rc = real_fchdir (fd)) == 0 && st.enabled) {
        int saved = errno;
        cwd_check ();
        errno = saved;
    }
    return rc;
}

/* Opens served from the cache are reported at exit (best effort: a
 * process that ends with _exit or a signal does not report them).
 */
__attribute__ ((destructor)) static void preload_fini (void)
{
    char body[128];
    struct tier_jw w;
    tier_error_t error;
    char *reply = NULL;
    size_t len;
    uint64_t n = st.cached_opens, bytes = st.cached_bytes;
    int fd;

    if (!st.enabled || n == 0)
        return;
    in_tier++;
    tier_jw_init (&w, body, sizeof (body));
    tier_jw_str (&w, "op", "replica.report");
    tier_jw_uint (&w, "cached", n);
    tier_jw_uint (&w, "cached_bytes", bytes);
    if (tier_jw_finish (&w) >= 0
        && (fd = tier_client_connect (st.sock, 1000, &error)) >= 0) {
        (void) tier_client_call (fd, body, NULL, 0, &reply, &len, 2000,
                                 &error);
        free (reply);
        (void) close (fd);
    }
    st.cached_opens = st.cached_bytes = 0;
    in_tier--;
}
