/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* wcache.c - the interposer's write path into the block cache (issue 18)
 *
 * For jobs with block cache directories (endpoint, window: the plugin
 * sets TIER_WINDOW_DIRS "D1:D2"), a file opened for writing under one --
 * not O_APPEND, O_DIRECT, O_SYNC or O_DSYNC -- is registered with the
 * node's agent (blog.open, with its descriptor): the answer is the
 * file's id and the job's write log, mapped here once per process.
 * From then on, the descriptor is tracked (a table by number, copied by
 * dup, dup2, dup3 and F_DUPFD, inherited by fork, emptied by close):
 *
 *   write, pwrite   a committed record in the log, acknowledged at once;
 *                   the file offset stays the kernel's (lseek before and
 *                   after), so descriptors shared by dup and fork keep
 *                   POSIX offsets; a write larger than a record is split
 *   fsync, fdatasync, ftruncate, read, pread, fstat, lseek(SEEK_END,
 *   SEEK_DATA, SEEK_HOLE)
 *                   first wait until the log has drained everything
 *                   committed so far (the drain writes the file in
 *                   order), then go to the GFS: what they see is what a
 *                   direct write would have left; fsync fails with the
 *                   drain's errno while the GFS refuses the file's writes
 *   writev, pwritev, fdopen, a writable shared mmap, fcntl locks and
 *   F_SETFL
 *                   wait the same way, then the descriptor is no longer
 *                   tracked (it writes to the GFS directly from then on)
 *   execve and its kin, posix_spawn, system, popen
 *                   wait: a new image knows nothing of the table
 *   close           forgets the descriptor at once (the paper's close)
 *
 * A full window makes a write wait for room.  Anything that goes wrong
 * with the log (the agent refused the file, a persist failed) makes the
 * descriptor write directly, after the log has drained.  The agent
 * checks everything it is sent (agent/bcache.c); what a user can do to
 * the log (theirs, mapped writable) damages only their own job's writes.
 *
 * An open of any file under a block cache directory while the log holds
 * records waits for them first: a reader, or a truncating open, sees
 * the file as direct writes would have left it.
 *
 * Not seen: static binaries, raw system calls, io_uring, sendfile and
 * copy_file_range onto a tracked descriptor, stat by name of a file
 * with writes pending (it shows the GFS's size until they drain), and
 * writes through stdio streams that glibc opened itself (fopen "w"
 * writes directly, uncached), execl, execlp and execle (glibc's own
 * execve: they do not wait for the log).  A bad buffer faults in the copy instead
 * of failing with EFAULT.  Links only libc.
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
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "lib/blog.h"
#include "lib/client.h"
#include "lib/clock.h"
#include "lib/paths.h"
#include "lib/tjson.h"
#include "wcache.h"

#define EXPORT __attribute__ ((visibility ("default")))
#define WDIRS_MAX 32
#define FDT_MAX 4096          /* descriptors tracked: below this number */
#define FLUSH_ASK_MS 1000     /* blog.flush again while waiting */
#define STUCK_MS (300 * 1000) /* no progress for this long: EIO */

static struct {
    bool enabled;
    char sock[108];
    int ndirs;
    char dirs[WDIRS_MAX][PATH_MAX];
    size_t lens[WDIRS_MAX];
    pthread_mutex_t lock; /* the log's mapping, made once */
    struct blog *b;
    int logino_ok;
    dev_t logdev;
    ino_t logino;
} w = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* file id + 1 of each tracked descriptor, 0 for the others; and the
 * file's identity, checked before each write (a descriptor closed where
 * the layer does not see it -- close_range, glibc's own -- and its
 * number reused must never write another file's records) */
static uint32_t fdt[FDT_MAX];
static struct {
    dev_t dev;
    ino_t ino;
} fdid[FDT_MAX];
static __thread int in_w __attribute__ ((tls_model ("initial-exec")));

#define REAL(name) static __typeof__ (name) *real_##name
REAL (write);
REAL (pwrite);
REAL (read);
REAL (pread);
REAL (pread64);
REAL (writev);
REAL (pwritev);
REAL (close);
REAL (dup);
REAL (dup2);
REAL (dup3);
REAL (fcntl);
REAL (fsync);
REAL (fdatasync);
REAL (ftruncate);
REAL (ftruncate64);
REAL (fstat);
REAL (fstat64);
REAL (lseek);
REAL (lseek64);
REAL (mmap);
REAL (mmap64);
REAL (fdopen);
REAL (execve);
REAL (execv);
REAL (execvp);
REAL (execvpe);
REAL (fexecve);
REAL (posix_spawn);
REAL (posix_spawnp);
REAL (system);
REAL (popen);

#define RESOLVE(name) \
    do { \
        if (!real_##name) \
            real_##name = (__typeof__ (real_##name)) dlsym (RTLD_NEXT, #name); \
    } while (0)

static inline uint32_t tracked (int fd)
{
    return fd >= 0 && fd < FDT_MAX
               ? __atomic_load_n (&fdt[fd], __ATOMIC_RELAXED)
               : 0;
}

static inline void set_tracked (int fd, uint32_t v)
{
    if (fd >= 0 && fd < FDT_MAX)
        __atomic_store_n (&fdt[fd], v, __ATOMIC_RELAXED);
}

/* A copy of descriptor fd as to (dup and the like). */
static inline void copy_tracked (int fd, int to)
{
    if (to >= 0 && to < FDT_MAX) {
        uint32_t v = tracked (fd);
        if (v)
            fdid[to] = fdid[fd];
        set_tracked (to, v);
    }
}

__attribute__ ((constructor)) static void wcache_init (void)
{
    const char *dirs = getenv ("TIER_WINDOW_DIRS");
    const char *sock = getenv ("TIER_SOCKET");
    const char *p = dirs;

    if (!dirs || !*dirs || !sock || sock[0] != '/'
        || strlen (sock) >= sizeof (w.sock))
        return;
    strcpy (w.sock, sock);
    while (*p && w.ndirs < WDIRS_MAX) {
        size_t len = strcspn (p, ":");
        char raw[PATH_MAX];
        if (len > 0 && len < sizeof (raw) && p[0] == '/') {
            memcpy (raw, p, len);
            raw[len] = '\0';
            if (tier_path_normalize (raw, w.dirs[w.ndirs], PATH_MAX) == 0
                && strcmp (w.dirs[w.ndirs], "/")) {
                w.lens[w.ndirs] = strlen (w.dirs[w.ndirs]);
                w.ndirs++;
            }
        }
        p += len + (p[len] == ':');
    }
    w.enabled = w.ndirs > 0;
}

static bool in_window (const char *real)
{
    for (int i = 0; i < w.ndirs; i++)
        if (!strncmp (real, w.dirs[i], w.lens[i])
            && (real[w.lens[i]] == '/' || real[w.lens[i]] == '\0'))
            return true;
    return false;
}

static int drained (int64_t file);

bool tier_wcache_pending (void)
{
    struct blog *b = __atomic_load_n (&w.b, __ATOMIC_ACQUIRE);

    return b && !in_w && blog_used (b) > 0;
}

void tier_wcache_before_open (const char *norm)
{
    if (in_window (norm)) {
        int saved = errno;
        (void) drained (-1);
        errno = saved;
    }
}

bool tier_wcache_wants (int flags)
{
    return w.enabled && !in_w && (flags & O_ACCMODE) != O_RDONLY
           && !(flags
                & (O_APPEND | O_DIRECT | O_SYNC | O_DSYNC | O_PATH | O_DIRECTORY
                   | __O_TMPFILE));
}

/* One request to the agent; the reply body (malloc'd) or NULL. */
static char *ask (const char *body, int sendfd, int *rfd)
{
    tier_error_t e;
    char *reply = NULL;
    size_t len;
    int c, n = 0;

    if ((c = tier_client_connect (w.sock, 2000, &e)) < 0)
        return NULL;
    if (tier_client_call_fds (c, body, sendfd >= 0 ? &sendfd : NULL,
                              sendfd >= 0, &reply, &len, rfd, &n, rfd ? 1 : 0,
                              30000, &e)
        < 0)
        reply = NULL;
    else if (rfd && n != 1) {
        free (reply);
        reply = NULL;
    }
    if (!reply && rfd && n == 1)
        (void) close (*rfd);
    RESOLVE (close);
    real_close (c);
    return reply;
}

/* The job's log, mapped once; logfd is the agent's answer (closed). */
static struct blog *log_map (int logfd)
{
    struct blog *b;
    tier_error_t e;
    struct stat sb;

    pthread_mutex_lock (&w.lock);
    if (!w.b && fstat (logfd, &sb) == 0 && (b = blog_open (logfd, 0, &e))) {
        w.logdev = sb.st_dev;
        w.logino = sb.st_ino;
        __atomic_store_n (&w.b, b, __ATOMIC_RELEASE);
    }
    b = w.b;
    pthread_mutex_unlock (&w.lock);
    real_close (logfd);
    return b;
}

void tier_wcache_opened (int fd)
{
    char link[64], real[PATH_MAX], body[PATH_MAX + 64], *reply;
    struct tier_jw jw;
    struct stat sb;
    int64_t id = -1;
    int logfd = -1, saved = errno;
    ssize_t n;

    if (fd < 0 || fd >= FDT_MAX)
        return;
    in_w++;
    RESOLVE (close);
    (void) snprintf (link, sizeof (link), "/proc/self/fd/%d", fd);
    if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode)
        || (n = readlink (link, real, sizeof (real) - 1)) <= 0)
        goto out;
    real[n] = '\0';
    if (!in_window (real))
        goto out;
    tier_jw_init (&jw, body, sizeof (body));
    tier_jw_str (&jw, "op", "blog.open");
    tier_jw_str (&jw, "path", real);
    if (tier_jw_finish (&jw) < 0 || !(reply = ask (body, fd, &logfd)))
        goto out;
    if (tier_jr_get_int (reply, strlen (reply), "file", &id) < 0 || id < 0
        || id >= UINT32_MAX)
        id = -1;
    free (reply);
    if (!log_map (logfd) || id < 0)
        goto out;
    fdid[fd].dev = sb.st_dev;
    fdid[fd].ino = sb.st_ino;
    set_tracked (fd, (uint32_t) id + 1);
out:
    in_w--;
    errno = saved;
}

/* Until the log's tail passes what is committed now (the drain wrote
 * it to the GFS, durably).  0, or -1 with errno: the drain's failure
 * (file: whose failure counts; -1 any), or EIO when nothing moves for
 * STUCK_MS. */
static int drained (int64_t file)
{
    struct blog *b = __atomic_load_n (&w.b, __ATOMIC_ACQUIRE);
    uint64_t upto, last;
    int64_t asked = 0, moved;
    useconds_t nap = 100;

    if (!b || (upto = blog_head (b)) <= blog_tail (b))
        return 0;
    in_w++;
    last = blog_tail (b);
    moved = tier_now_ms ();
    while (blog_tail (b) < upto) {
        int64_t now = tier_now_ms ();
        if (now - asked >= FLUSH_ASK_MS) {
            char body[96], *reply;
            int64_t ferr = 0;
            (void) snprintf (body, sizeof (body),
                             "{\"op\":\"blog.flush\",\"file\":%lld}",
                             (long long) file);
            if ((reply = ask (body, -1, NULL))) {
                (void) tier_jr_get_int (reply, strlen (reply), "fail_errno",
                                        &ferr);
                free (reply);
                if (ferr > 0 && ferr < 4096) {
                    in_w--;
                    errno = (int) ferr;
                    return -1;
                }
            }
            asked = now;
        }
        if (blog_tail (b) != last) {
            last = blog_tail (b);
            moved = now;
        }
        else if (now - moved >= STUCK_MS) {
            in_w--;
            errno = EIO;
            return -1;
        }
        usleep (nap);
        if (nap < 5000)
            nap *= 2;
    }
    in_w--;
    return 0;
}

/* fd stops being tracked, once what it wrote is on the GFS. */
static void untrack (int fd)
{
    if (tracked (fd)) {
        int saved = errno;
        (void) drained (-1);
        set_tracked (fd, 0);
        errno = saved;
    }
}

/* length bytes of buf at off of file id: records.  0, or -1 (write
 * directly instead: the log refused, after it drained). */
static int put (uint32_t id, const void *buf, size_t length, off_t off)
{
    struct blog *b = w.b;
    const char *p = buf;

    while (length > 0) {
        uint64_t part = length < blog_max_payload (b) ? length
                                                      : blog_max_payload (b);
        struct blog_txn t;
        if (blog_reserve (b, BLOG_WRITE, id, (uint64_t) off, part, &t) < 0) {
            if (errno == EAGAIN) {
                /* the window is full: wait for room */
                if (drained (id) < 0)
                    return -1;
                continue;
            }
            return -1;
        }
        memcpy (t.payload, p, part);
        if (blog_commit (b, &t) < 0)
            return -1;
        p += part;
        off += (off_t) part;
        length -= part;
    }
    return 0;
}

static ssize_t cached_pwrite (int fd, uint32_t v, const void *buf, size_t n,
                              off_t off, bool move)
{
    struct stat sb;

    if ((ssize_t) n < 0)
        n = SSIZE_MAX;
    if (syscall (SYS_fstat, fd, &sb) < 0 || sb.st_dev != fdid[fd].dev
        || sb.st_ino != fdid[fd].ino) {
        set_tracked (fd, 0); /* another file now: not ours */
        return move ? real_write (fd, buf, n) : real_pwrite (fd, buf, n, off);
    }
    if (n == 0 || off < 0)
        return move ? real_write (fd, buf, n) : real_pwrite (fd, buf, n, off);
    in_w++;
    if (put (v - 1, buf, n, off) < 0) {
        in_w--;
        /* the log will not take it: what it holds first, then directly */
        untrack (fd);
        return move ? real_write (fd, buf, n) : real_pwrite (fd, buf, n, off);
    }
    in_w--;
    if (move)
        (void) real_lseek (fd, off + (off_t) n, SEEK_SET);
    return (ssize_t) n;
}

EXPORT ssize_t write (int fd, const void *buf, size_t n)
{
    uint32_t v = tracked (fd);
    off_t off;

    RESOLVE (write);
    if (!v || in_w)
        return real_write (fd, buf, n);
    RESOLVE (lseek);
    RESOLVE (pwrite);
    if ((off = real_lseek (fd, 0, SEEK_CUR)) < 0)
        return real_write (fd, buf, n);
    return cached_pwrite (fd, v, buf, n, off, true);
}

EXPORT ssize_t pwrite (int fd, const void *buf, size_t n, off_t off)
{
    uint32_t v = tracked (fd);

    RESOLVE (pwrite);
    if (!v || in_w)
        return real_pwrite (fd, buf, n, off);
    RESOLVE (write);
    RESOLVE (lseek);
    return cached_pwrite (fd, v, buf, n, off, false);
}

EXPORT ssize_t pwrite64 (int fd, const void *buf, size_t n, off_t off)
{
    return pwrite (fd, buf, n, off);
}

/* Calls that see the file as the GFS has it: after the drain. */
#define SEE_GFS(fd) \
    do { \
        if (tracked (fd) && !in_w && drained (tracked (fd) - 1) < 0) \
            return -1; \
    } while (0)

EXPORT ssize_t read (int fd, void *buf, size_t n)
{
    RESOLVE (read);
    SEE_GFS (fd);
    return real_read (fd, buf, n);
}

EXPORT ssize_t pread (int fd, void *buf, size_t n, off_t off)
{
    RESOLVE (pread);
    SEE_GFS (fd);
    return real_pread (fd, buf, n, off);
}

EXPORT ssize_t pread64 (int fd, void *buf, size_t n, off_t off)
{
    RESOLVE (pread64);
    SEE_GFS (fd);
    return real_pread64 (fd, buf, n, off);
}

EXPORT int fsync (int fd)
{
    RESOLVE (fsync);
    SEE_GFS (fd);
    return real_fsync (fd);
}

EXPORT int fdatasync (int fd)
{
    RESOLVE (fdatasync);
    SEE_GFS (fd);
    return real_fdatasync (fd);
}

EXPORT int ftruncate (int fd, off_t len)
{
    RESOLVE (ftruncate);
    SEE_GFS (fd);
    return real_ftruncate (fd, len);
}

EXPORT int ftruncate64 (int fd, off_t len)
{
    RESOLVE (ftruncate64);
    SEE_GFS (fd);
    return real_ftruncate64 (fd, len);
}

EXPORT int fstat (int fd, struct stat *sb)
{
    RESOLVE (fstat);
    SEE_GFS (fd);
    return real_fstat (fd, sb);
}

EXPORT int fstat64 (int fd, struct stat64 *sb)
{
    RESOLVE (fstat64);
    SEE_GFS (fd);
    return real_fstat64 (fd, sb);
}

EXPORT off_t lseek (int fd, off_t off, int whence)
{
    RESOLVE (lseek);
    if (whence != SEEK_SET && whence != SEEK_CUR)
        SEE_GFS (fd);
    return real_lseek (fd, off, whence);
}

EXPORT off64_t lseek64 (int fd, off64_t off, int whence)
{
    RESOLVE (lseek64);
    if (whence != SEEK_SET && whence != SEEK_CUR)
        SEE_GFS (fd);
    return real_lseek64 (fd, off, whence);
}

/* Writes the layer does not turn into records: the log first. */
EXPORT ssize_t writev (int fd, const struct iovec *iov, int n)
{
    RESOLVE (writev);
    if (!in_w)
        untrack (fd);
    return real_writev (fd, iov, n);
}

EXPORT ssize_t pwritev (int fd, const struct iovec *iov, int n, off_t off)
{
    RESOLVE (pwritev);
    if (!in_w)
        untrack (fd);
    return real_pwritev (fd, iov, n, off);
}

EXPORT FILE *fdopen (int fd, const char *mode)
{
    RESOLVE (fdopen);
    if (!in_w)
        untrack (fd);
    return real_fdopen (fd, mode);
}

EXPORT void *mmap (void *addr, size_t len, int prot, int flags, int fd,
                   off_t off)
{
    RESOLVE (mmap);
    if (!in_w && (prot & PROT_WRITE) && (flags & MAP_SHARED))
        untrack (fd);
    return real_mmap (addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64 (void *addr, size_t len, int prot, int flags, int fd,
                     off_t off)
{
    RESOLVE (mmap64);
    if (!in_w && (prot & PROT_WRITE) && (flags & MAP_SHARED))
        untrack (fd);
    return real_mmap64 (addr, len, prot, flags, fd, off);
}

EXPORT int close (int fd)
{
    RESOLVE (close);
    set_tracked (fd, 0);
    return real_close (fd);
}

EXPORT int dup (int fd)
{
    int r;

    RESOLVE (dup);
    if ((r = real_dup (fd)) >= 0)
        copy_tracked (fd, r);
    return r;
}

EXPORT int dup2 (int fd, int to)
{
    int r;

    RESOLVE (dup2);
    if ((r = real_dup2 (fd, to)) >= 0 && r != fd)
        copy_tracked (fd, r);
    return r;
}

EXPORT int dup3 (int fd, int to, int flags)
{
    int r;

    RESOLVE (dup3);
    if ((r = real_dup3 (fd, to, flags)) >= 0)
        copy_tracked (fd, r);
    return r;
}

EXPORT int fcntl (int fd, int cmd, ...)
{
    va_list ap;
    void *arg;
    int r;

    va_start (ap, cmd);
    arg = va_arg (ap, void *);
    va_end (ap);
    RESOLVE (fcntl);
    if (tracked (fd) && !in_w) {
        switch (cmd) {
            case F_SETLK:
            case F_SETLKW:
            case F_OFD_SETLK:
            case F_OFD_SETLKW:
            case F_SETFL:
            case F_GETLK:
            case F_OFD_GETLK:
                untrack (fd);
                break;
            default:
                break;
        }
    }
    r = real_fcntl (fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        copy_tracked (fd, r);
    return r;
}

/* A new image, or a child that runs one: the log first. */
static void before_exec (void)
{
    if (!in_w && __atomic_load_n (&w.b, __ATOMIC_ACQUIRE)) {
        int saved = errno;
        (void) drained (-1);
        errno = saved;
    }
}

EXPORT int execve (const char *path, char *const argv[], char *const envp[])
{
    RESOLVE (execve);
    before_exec ();
    return real_execve (path, argv, envp);
}

EXPORT int execv (const char *path, char *const argv[])
{
    RESOLVE (execv);
    before_exec ();
    return real_execv (path, argv);
}

EXPORT int execvp (const char *file, char *const argv[])
{
    RESOLVE (execvp);
    before_exec ();
    return real_execvp (file, argv);
}

EXPORT int execvpe (const char *file, char *const argv[], char *const envp[])
{
    RESOLVE (execvpe);
    before_exec ();
    return real_execvpe (file, argv, envp);
}

EXPORT int fexecve (int fd, char *const argv[], char *const envp[])
{
    RESOLVE (fexecve);
    before_exec ();
    return real_fexecve (fd, argv, envp);
}

EXPORT int posix_spawn (pid_t *pid, const char *path,
                        const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *attr, char *const argv[],
                        char *const envp[])
{
    RESOLVE (posix_spawn);
    before_exec ();
    return real_posix_spawn (pid, path, fa, attr, argv, envp);
}

EXPORT int posix_spawnp (pid_t *pid, const char *file,
                         const posix_spawn_file_actions_t *fa,
                         const posix_spawnattr_t *attr, char *const argv[],
                         char *const envp[])
{
    RESOLVE (posix_spawnp);
    before_exec ();
    return real_posix_spawnp (pid, file, fa, attr, argv, envp);
}

EXPORT int system (const char *cmd)
{
    RESOLVE (system);
    before_exec ();
    return real_system (cmd);
}

EXPORT FILE *popen (const char *cmd, const char *type)
{
    RESOLVE (popen);
    before_exec ();
    return real_popen (cmd, type);
}
