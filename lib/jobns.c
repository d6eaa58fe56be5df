/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* jobns.c - the job's mount namespace (see jobns.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/mount.h>

#include "clock.h"
#include "paths.h"
#include "jobns.h"
#include "trust.h"

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

static int sys_fsopen (const char *name, unsigned flags)
{
    return (int) syscall (SYS_fsopen, name, flags);
}

static int sys_fsconfig (int fd, unsigned cmd, const char *key,
                         const void *value, int aux)
{
    return (int) syscall (SYS_fsconfig, fd, cmd, key, value, aux);
}

static int sys_fsmount (int fd, unsigned flags, unsigned attrs)
{
    return (int) syscall (SYS_fsmount, fd, flags, attrs);
}

static int sys_move_mount (int from, const char *fpath, int to,
                           const char *tpath, unsigned flags)
{
    return (int) syscall (SYS_move_mount, from, fpath, to, tpath, flags);
}

static int sys_open_tree (int dfd, const char *path, unsigned flags)
{
    return (int) syscall (SYS_open_tree, dfd, path, flags);
}

static int sys_mount_setattr (int dfd, const char *path, unsigned flags,
                              struct mount_attr *attr, size_t size)
{
    return (int) syscall (SYS_mount_setattr, dfd, path, flags, attr, size);
}

/* Decode mountinfo's octal escapes (\040 for a space) in place. */
static void unescape (char *s)
{
    char *o = s;

    for (char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0'
            && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
            *o++ = (char) ((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 3;
        }
        else
            *o++ = *p;
    }
    *o = '\0';
}

static bool is_mountpoint (const char *path)
{
    FILE *f = fopen ("/proc/self/mountinfo", "re");
    char line[8192];
    bool found = false;

    if (!f)
        return false;
    while (!found && fgets (line, sizeof (line), f)) {
        char mnt[PATH_MAX];
        if (sscanf (line, "%*s %*s %*s %*s %4095s", mnt) != 1)
            continue;
        unescape (mnt);
        found = !strcmp (mnt, path);
    }
    fclose (f);
    return found;
}

/* A directory of the namespace tree (NamespaceDir, a job's directory in
 * it): root's and not writable by others, made 0700 (with its parents
 * when parents) if missing, under lib/trust.h's parent rule.  Returns an
 * O_RDONLY descriptor, or -1.
 */
static int ns_dir_open (const char *path, bool parents, tier_error_t *error)
{
    enum tier_trust_why why;
    const struct tier_trust rule = {
        .kind = TIER_TRUST_ROOT_DIR,
        .create = 0700,
        .parents = parents,
        .why = &why,
    };
    tier_error_t e;
    int fd;

    if ((fd = tier_trust_open (path, &rule, &e)) >= 0)
        return fd;
    if (errno == EPERM && why != TIER_TRUST_PARENT)
        return tier_errprintf (error, "%s: must be a root-owned directory "
                               "that others cannot write (a symlink or "
                               "someone else's directory is refused)", path);
    return tier_errprintf (error, "%s", e.text);
}

int tier_root_open (const char *path, tier_error_t *error)
{
    enum tier_trust_why why;
    const struct tier_trust rule = {
        .kind = TIER_TRUST_ROOT_DIR,
        .create = 0700,
        .parents = true,
        .deny = 077,
        .why = &why,
    };
    tier_error_t e;
    int fd;

    if ((fd = tier_trust_open (path, &rule, &e)) >= 0)
        return fd;
    if (errno == EINVAL)
        return tier_errprintf (error, "tier root %s: not an absolute path "
                               "without '..'", path);
    if (errno != EPERM)
        return tier_errprintf (error, "tier root %s: %s", path, e.text);
    if (why == TIER_TRUST_PARENT)
        return tier_errprintf (error,
                               "tier root %s: a parent directory is "
                               "not root's, or others may rename entries "
                               "in it (refused)",
                               path);
    if (why == TIER_TRUST_LINK)
        return tier_errprintf (error,
                               "tier root %s: a symlink or not a "
                               "directory: refused",
                               path);
    return tier_errprintf (error,
                           "tier root %s must be a root-owned "
                           "directory with mode 0700 (refused)",
                           path);
}

int tier_ns_base_prepare (const char *base, tier_error_t *error)
{
    int fd, rc = -1;

    if ((fd = ns_dir_open (base, true, error)) < 0)
        return -1;
    if (flock (fd, LOCK_EX) < 0) {
        tier_errprintf (error, "%s: lock: %s", base, strerror (errno));
        goto out;
    }
    /* An nsfs file cannot be bound into a shared mount (EINVAL): the
     * holders live in a private bind mount of their own. */
    if (!is_mountpoint (base)) {
        if (mount (base, base, NULL, MS_BIND, NULL) < 0) {
            tier_errprintf (error, "bind %s: %s", base, strerror (errno));
            goto out;
        }
    }
    if (mount (NULL, base, NULL, MS_PRIVATE, NULL) < 0) {
        tier_errprintf (error, "make %s private: %s", base, strerror (errno));
        goto out;
    }
    rc = 0;
out:
    close (fd);
    return rc;
}

int tier_ns_paths (const char *base, uint32_t job_id, char *dir,
                   char *holder, size_t size)
{
    if (dir && snprintf (dir, size, "%s/%u", base, job_id) >= (int) size)
        goto toolong;
    if (holder && snprintf (holder, size, "%s/%u/" TIER_NS_HOLDER, base, job_id)
                  >= (int) size)
        goto toolong;
    return 0;
toolong:
    errno = ENAMETOOLONG;
    return -1;
}

static bool holder_live (const char *holder)
{
    struct statfs sf;

    return statfs (holder, &sf) == 0 && (unsigned) sf.f_type == NSFS_MAGIC;
}

bool tier_ns_exists (const char *base, uint32_t job_id)
{
    char holder[PATH_MAX];

    if (tier_ns_paths (base, job_id, NULL, holder, sizeof (holder)) < 0)
        return false;
    return holder_live (holder);
}

int tier_ns_lock (const char *base, uint32_t job_id, tier_error_t *error)
{
    char path[PATH_MAX];
    int fd;

    if (snprintf (path, sizeof (path), "%s/%u/" TIER_NS_LOCK, base, job_id)
        >= (int) sizeof (path)) {
        errno = ENAMETOOLONG;
        return tier_errprintf (error, "path too long");
    }
    if ((fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600))
        < 0)
        return tier_errprintf (error, "%s: %s", path, strerror (errno));
    if (flock (fd, LOCK_EX) < 0) {
        tier_errprintf (error, "%s: %s", path, strerror (errno));
        close (fd);
        return -1;
    }
    return fd;
}

void tier_ns_part_name (int part, const char *what, char *buf, size_t size)
{
    if (part == 0)
        (void) snprintf (buf, size, "stage.%s", what);
    else
        (void) snprintf (buf, size, "stage.%d.%s", part, what);
}

/* The job's directory, if it passes the rules (root's, 0700). */
static int job_dir (const char *base, uint32_t job_id)
{
    static const struct tier_trust rule = {
        .kind = TIER_TRUST_ROOT_DIR, .deny = 077,
    };
    char path[PATH_MAX];

    if (snprintf (path, sizeof (path), "%s/%u", base, job_id)
        >= (int) sizeof (path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return tier_trust_open (path, &rule, NULL);
}

static bool name_ok (const char *name)
{
    return name && name[0] && name[0] != '.' && !strchr (name, '/')
           && strlen (name) < TIER_NS_NAME_MAX;
}

int tier_ns_write (const char *base, uint32_t job_id, const char *name,
                   const char *text)
{
    char tmp[TIER_NS_NAME_MAX + 32];
    size_t len = strlen (text);
    int dfd, fd, e;

    if (!name_ok (name)) {
        errno = EINVAL;
        return -1;
    }
    if ((dfd = job_dir (base, job_id)) < 0)
        return -1;
    (void) snprintf (tmp, sizeof (tmp), ".%s.%d.%lld", name, (int) getpid (),
                     (long long) tier_now_ns ());
    if ((fd = openat (dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC
                      | O_NOFOLLOW, 0600)) < 0)
        goto error;
    if (write (fd, text, len) != (ssize_t) len) {
        e = errno ? errno : EIO;
        close (fd);
        (void) unlinkat (dfd, tmp, 0);
        errno = e;
        goto error;
    }
    close (fd);
    if (renameat (dfd, tmp, dfd, name) < 0) {
        e = errno;
        (void) unlinkat (dfd, tmp, 0);
        errno = e;
        goto error;
    }
    close (dfd);
    return 0;
error:
    e = errno;
    close (dfd);
    errno = e;
    return -1;
}

int tier_ns_mark (const char *base, uint32_t job_id, const char *name)
{
    return tier_ns_write (base, job_id, name, "");
}

/* The file name of the job's directory, checked: root's and regular. */
static int ns_open (const char *base, uint32_t job_id, const char *name)
{
    static const struct tier_trust rule = { .kind = TIER_TRUST_ROOT_FILE };
    int dfd, fd, e;

    if (!name_ok (name)) {
        errno = EINVAL;
        return -1;
    }
    if ((dfd = job_dir (base, job_id)) < 0)
        return -1;
    fd = tier_trust_openat (dfd, base, name, &rule, NULL);
    e = errno;
    close (dfd);
    errno = e;
    return fd;
}

bool tier_ns_marked (const char *base, uint32_t job_id, const char *name)
{
    int fd = ns_open (base, job_id, name);

    if (fd < 0)
        return false;
    close (fd);
    return true;
}

int tier_ns_read (const char *base, uint32_t job_id, const char *name,
                  char *buf, size_t size)
{
    size_t got = 0;
    int fd, e;

    if (size == 0 || (fd = ns_open (base, job_id, name)) < 0)
        return -1;
    for (;;) {
        ssize_t n = read (fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto error;
        if (n == 0)
            break;
        got += (size_t) n;
        if (got == size) {
            errno = EFBIG;
            goto error;
        }
    }
    close (fd);
    buf[got] = '\0';
    return 0;
error:
    e = errno;
    close (fd);
    errno = e;
    return -1;
}

int tier_ns_remove (const char *base, uint32_t job_id, const char *name)
{
    int dfd, rc, e;

    if (!name_ok (name)) {
        errno = EINVAL;
        return -1;
    }
    if ((dfd = job_dir (base, job_id)) < 0)
        return -1;
    rc = unlinkat (dfd, name, 0);
    e = errno;
    close (dfd);
    if (rc < 0 && e == ENOENT)
        return 0;
    errno = e;
    return rc;
}

static int holder_ino (const char *holder, struct stat *st)
{
    if (!holder_live (holder) || stat (holder, st) < 0)
        return -1;
    return 0;
}

/* What a scan for the processes inside a job's namespace knows: the
 * namespace (its holder), the device of its mark (a tmpfs only it
 * mounted, so any namespace copied from it has it too: one a user made
 * with unshare -Urm inside the job), and the namespaces already looked
 * at. */
#define SCAN_SEEN_MAX 64
struct ns_scan {
    struct stat hs;
    unsigned mark_major, mark_minor;
    bool have_mark;
    struct stat self; /* the caller's own namespace: the node's */
    struct {
        dev_t dev;
        ino_t ino;
        bool in;
    } seen[SCAN_SEEN_MAX];
    int nseen;
};

/* Does /proc/PID/mountinfo list a mount of device major:minor? */
static bool mountinfo_has (pid_t pid, unsigned major, unsigned minor)
{
    char path[64], *line = NULL;
    size_t cap = 0, total = 0;
    bool found = false;
    ssize_t n;
    FILE *f;

    (void) snprintf (path, sizeof (path), "/proc/%d/mountinfo", (int) pid);
    if (!(f = fopen (path, "re")))
        return false;
    /* ID PARENT MAJOR:MINOR ROOT ... (paths are octal-escaped: no
     * spaces); at most 4 MiB of it */
    while (!found && total < (4u << 20) && (n = getline (&line, &cap, f)) > 0) {
        unsigned a, b;
        total += (size_t) n;
        found = sscanf (line, "%*d %*d %u:%u ", &a, &b) == 2 && a == major
                && b == minor;
    }
    free (line);
    (void) fclose (f);
    return found;
}

static int scan_init (struct ns_scan *sc, const char *base, uint32_t job_id)
{
    char holder[PATH_MAX], buf[64];

    memset (sc, 0, sizeof (*sc));
    if (tier_ns_paths (base, job_id, NULL, holder, sizeof (holder)) < 0
        || holder_ino (holder, &sc->hs) < 0)
        return -1;
    if (stat ("/proc/self/ns/mnt", &sc->self) < 0)
        memset (&sc->self, 0, sizeof (sc->self));
    sc->have_mark =
        tier_ns_read (base, job_id, TIER_NS_MARK_DEV, buf, sizeof (buf)) == 0
        && sscanf (buf, "%u:%u", &sc->mark_major, &sc->mark_minor) == 2;
    return 0;
}

/* Is pid in the job's mount namespace, or in one made from it? */
static bool pid_inside (pid_t pid, struct ns_scan *sc)
{
    char path[64];
    struct stat st;
    bool in;

    (void) snprintf (path, sizeof (path), "/proc/%d/ns/mnt", (int) pid);
    if (stat (path, &st) < 0)
        return false;
    if (st.st_ino == sc->hs.st_ino && st.st_dev == sc->hs.st_dev)
        return true;
    if (!sc->have_mark
        || (st.st_ino == sc->self.st_ino && st.st_dev == sc->self.st_dev))
        return false;
    for (int i = 0; i < sc->nseen; i++)
        if (sc->seen[i].ino == st.st_ino && sc->seen[i].dev == st.st_dev)
            return sc->seen[i].in;
    in = mountinfo_has (pid, sc->mark_major, sc->mark_minor);
    if (sc->nseen < SCAN_SEEN_MAX) {
        sc->seen[sc->nseen].dev = st.st_dev;
        sc->seen[sc->nseen].ino = st.st_ino;
        sc->seen[sc->nseen++].in = in;
    }
    return in;
}

static int scan_pids (struct ns_scan *sc, pid_t *pids, int max)
{
    struct dirent *de;
    DIR *d;
    int n = 0;

    if (!(d = opendir ("/proc")))
        return -1;
    while ((de = readdir (d)) && n < max) {
        char *end;
        long pid = strtol (de->d_name, &end, 10);

        if (*end || pid <= 0 || pid > INT32_MAX)
            continue;
        if (pid_inside ((pid_t) pid, sc))
            pids[n++] = (pid_t) pid;
    }
    closedir (d);
    return n;
}

int tier_ns_pids (const char *base, uint32_t job_id, pid_t *pids, int max)
{
    static struct ns_scan sc;

    if (scan_init (&sc, base, job_id) < 0)
        return -1;
    sc.have_mark = false; /* no mountinfo read: the agent's timer asks */
    return scan_pids (&sc, pids, max);
}

static int teardown_locked (const char *base, uint32_t job_id, int wait_ms,
                            tier_error_t *error);

/* In the new namespace: a tmpfs on the job directory's mark directory
 * (empty, read-only), seen in this namespace only (it is a slave of the
 * node's), and in every namespace a process inside copies from it
 * (unshare -m, with a user namespace or not): copied with the rest,
 * locked to it where the copy is less privileged.  Its device tells
 * those namespaces at teardown. */
static int mark_mount (const char *mark)
{
    return mount ("tier-mark", mark, "tmpfs",
                  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,nr_inodes=2,mode=0500");
}

/* The mark's device, as the namespace's first process sees it. */
static void mark_record (const char *base, uint32_t job_id, pid_t pid,
                         const char *mark)
{
    char path[PATH_MAX + 64], text[32];
    struct stat st, dir;

    (void) snprintf (path, sizeof (path), "/proc/%d/root%s", (int) pid, mark);
    if (stat (path, &st) < 0 || stat (mark, &dir) < 0
        || st.st_dev == dir.st_dev)
        return; /* not mounted: teardown sees this namespace only */
    (void) snprintf (text, sizeof (text), "%u:%u\n", major (st.st_dev),
                     minor (st.st_dev));
    (void) tier_ns_write (base, job_id, TIER_NS_MARK_DEV, text);
}

int tier_ns_create (const char *base, uint32_t job_id, uid_t uid,
                    bool fresh, tier_error_t *error)
{
    char dir[PATH_MAX], holder[PATH_MAX], mark[PATH_MAX + 8], src[64];
    int lockfd, hfd, rc = -1;
    int ready[2] = { -1, -1 }, done[2] = { -1, -1 };
    pid_t pid;
    int status, e;
    char c;

    if (tier_ns_paths (base, job_id, dir, holder, sizeof (dir)) < 0)
        return tier_errprintf (error, "path too long");
    if ((hfd = ns_dir_open (dir, false, error)) < 0)
        return -1;
    close (hfd);
    if ((lockfd = tier_ns_lock (base, job_id, error)) < 0)
        return -1;
    if (holder_live (holder)) {
        if (!fresh) {
            rc = 0;
            goto out;
        }
        /* an earlier run of this job id (requeued): start afresh */
        if (teardown_locked (base, job_id, 2000, error) != 0)
            goto out;
        if (mkdir (dir, 0700) < 0 && errno != EEXIST) {
            tier_errprintf (error, "%s: %s", dir, strerror (errno));
            goto out;
        }
    }
    (void) snprintf (mark, sizeof (mark), "%s/%s", dir, TIER_NS_MARK);
    if (mkdir (mark, 0700) < 0 && errno != EEXIST) {
        tier_errprintf (error, "%s: %s", mark, strerror (errno));
        goto out;
    }
    if ((hfd = open (holder, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                     0600)) < 0) {
        tier_errprintf (error, "%s: %s", holder, strerror (errno));
        goto out;
    }
    close (hfd);
    if (pipe2 (ready, O_CLOEXEC) < 0 || pipe2 (done, O_CLOEXEC) < 0) {
        tier_errprintf (error, "pipe: %s", strerror (errno));
        goto out;
    }
    if ((pid = fork ()) < 0) {
        tier_errprintf (error, "fork: %s", strerror (errno));
        goto out;
    }
    if (pid == 0) {
        /* single-threaded child: make the namespace, mark it, wait to be
         * bound */
        unsigned char st = 0;
        if (unshare (CLONE_NEWNS) < 0)
            st = (unsigned char) errno;
        else if (mount (NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
            st = (unsigned char) errno;
        else
            (void) mark_mount (mark);
        (void) write (ready[1], &st, 1);
        (void) read (done[0], &c, 1);
        _exit (0);
    }
    close (ready[1]);
    ready[1] = -1;
    close (done[0]);
    done[0] = -1;
    {
        unsigned char st = 0;
        if (read (ready[0], &st, 1) != 1)
            st = EIO;
        if (st) {
            errno = st;
            tier_errprintf (error, "unshare: %s", strerror (st));
        }
        else {
            (void) snprintf (src, sizeof (src), "/proc/%d/ns/mnt", (int) pid);
            if (mount (src, holder, NULL, MS_BIND, NULL) < 0)
                tier_errprintf (error, "bind %s on %s: %s", src, holder,
                                strerror (errno));
            else {
                mark_record (base, job_id, pid, mark); /* pid waits */
                rc = 0;
            }
        }
    }
    e = errno;
    (void) write (done[1], "x", 1);
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    errno = e;
    if (rc == 0) {
        char u[32];
        (void) snprintf (u, sizeof (u), "%u\n", (unsigned) uid);
        (void) tier_ns_write (base, job_id, TIER_NS_UID, u);
    }
out:
    e = errno;
    for (int i = 0; i < 2; i++) {
        if (ready[i] >= 0)
            close (ready[i]);
        if (done[i] >= 0)
            close (done[i]);
    }
    close (lockfd);
    errno = e;
    return rc;
}

int tier_ns_enter (const char *base, uint32_t job_id, tier_error_t *error)
{
    char holder[PATH_MAX];
    struct statfs sf;
    int fd;

    if (tier_ns_paths (base, job_id, NULL, holder, sizeof (holder)) < 0)
        return tier_errprintf (error, "path too long");
    if ((fd = open (holder, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        return tier_errprintf (error, "%s: %s", holder, strerror (errno));
    if (fstatfs (fd, &sf) < 0 || (unsigned) sf.f_type != NSFS_MAGIC) {
        close (fd);
        errno = ENOENT;
        return tier_errprintf (error, "job %u has no namespace on this node",
                               job_id);
    }
    if (setns (fd, CLONE_NEWNS) < 0) {
        tier_errprintf (error, "setns: %s", strerror (errno));
        close (fd);
        return -1;
    }
    close (fd);
    return 0;
}

int tier_ns_run (const char *base, uint32_t job_id, tier_ns_fn fn, void *arg,
                 tier_error_t *error)
{
    int p[2];
    pid_t pid;
    int status;
    ssize_t n;
    size_t got = 0;
    tier_error_t cerr = { { 0 } };

    if (pipe2 (p, O_CLOEXEC) < 0)
        return tier_errprintf (error, "pipe: %s", strerror (errno));
    if ((pid = fork ()) < 0) {
        close (p[0]);
        close (p[1]);
        return tier_errprintf (error, "fork: %s", strerror (errno));
    }
    if (pid == 0) {
        tier_error_t e = { { 0 } };
        int rc;
        close (p[0]);
        rc = tier_ns_enter (base, job_id, &e);
        if (rc == 0)
            rc = fn (arg, &e);
        if (rc < 0 && e.text[0])
            (void) write (p[1], e.text, strlen (e.text));
        _exit (rc < 0 ? 1 : 0);
    }
    close (p[1]);
    while (got < sizeof (cerr.text) - 1
           && (n = read (p[0], cerr.text + got,
                         sizeof (cerr.text) - 1 - got)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        got += n;
    }
    cerr.text[got] = '\0';
    close (p[0]);
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        return 0;
    errno = EIO;
    return tier_errprintf (error, "%s", cerr.text[0] ? cerr.text
                           : "the namespace helper failed");
}

/* SIGKILL pid if it is still in the namespace: asked with a pidfd held,
 * so that a pid that ended since it was listed and that the kernel gave
 * to a process outside is never hit. */
static void kill_if_inside (pid_t pid, struct ns_scan *sc)
{
    int pfd = (int) syscall (SYS_pidfd_open, pid, 0);

    if (pfd < 0) {
        if (errno == ENOSYS && pid_inside (pid, sc)) /* before Linux 5.3 */
            (void) kill (pid, SIGKILL);
        return;
    }
    if (pid_inside (pid, sc))
        (void) syscall (SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
    close (pfd);
}

/* SIGKILL what is inside the namespace until nothing is, or wait_ms. */
static int kill_inside (const char *base, uint32_t job_id, int wait_ms)
{
    static pid_t pids[TIER_NS_PIDS_MAX];
    static struct ns_scan sc;
    int64_t deadline = tier_now_ms () + wait_ms;
    int n;

    if (scan_init (&sc, base, job_id) < 0)
        return 0;
    while ((n = scan_pids (&sc, pids, TIER_NS_PIDS_MAX)) > 0) {
        for (int i = 0; i < n; i++)
            if (pids[i] != getpid ())
                kill_if_inside (pids[i], &sc);
        if (tier_now_ms () >= deadline)
            break;
        {
            struct timespec ts = { 0, 20 * 1000 * 1000 };
            nanosleep (&ts, NULL);
        }
        /* a pid that was found may be gone now: count again */
    }
    return n < 0 ? 0 : n;
}

int tier_ns_kill (const char *base, uint32_t job_id, int wait_ms)
{
    return kill_inside (base, job_id, wait_ms);
}

static int teardown_locked (const char *base, uint32_t job_id, int wait_ms,
                            tier_error_t *error)
{
    char dir[PATH_MAX], holder[PATH_MAX];
    int n, dfd;

    if (tier_ns_paths (base, job_id, dir, holder, sizeof (dir)) < 0)
        return tier_errprintf (error, "path too long");
    if (holder_live (holder)) {
        /* leftovers of the job (setsid'd daemons, stuck tasks) */
        if ((n = kill_inside (base, job_id, wait_ms)) > 0) {
            errno = EBUSY;
            tier_errprintf (error, "job %u: %d process(es) still inside its "
                            "namespace; teardown deferred", job_id, n);
            return 1;
        }
        if (umount2 (holder, MNT_DETACH) < 0 && errno != EINVAL)
            return tier_errprintf (error, "umount %s: %s", holder,
                                   strerror (errno));
    }
    if ((dfd = open (base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return tier_errprintf (error, "%s: %s", base, strerror (errno));
    {
        char name[32];
        (void) snprintf (name, sizeof (name), "%u", job_id);
        if (tier_rmtree_at (dfd, name, error) < 0 && errno != ENOENT) {
            close (dfd);
            return -1;
        }
    }
    close (dfd);
    return 0;
}

int tier_ns_teardown (const char *base, uint32_t job_id, int wait_ms,
                      tier_error_t *error)
{
    char dir[PATH_MAX];
    struct stat st;
    int lockfd, rc;

    if (tier_ns_paths (base, job_id, dir, NULL, sizeof (dir)) < 0)
        return tier_errprintf (error, "path too long");
    if (lstat (dir, &st) < 0) {
        if (errno == ENOENT)
            return 0;                   /* nothing of it on this node */
        return tier_errprintf (error, "%s: %s", dir, strerror (errno));
    }
    if ((lockfd = tier_ns_lock (base, job_id, error)) < 0)
        return -1;
    rc = teardown_locked (base, job_id, wait_ms, error);
    close (lockfd);
    return rc;
}

int tier_ns_list (const char *base, uint32_t *ids, int max)
{
    struct dirent *de;
    DIR *d = opendir (base);
    int n = 0;

    if (!d)
        return errno == ENOENT ? 0 : -1;
    while ((de = readdir (d)) && n < max) {
        char *end;
        unsigned long id = strtoul (de->d_name, &end, 10);
        if (*end || id == 0 || id > UINT32_MAX)
            continue;
        ids[n++] = (uint32_t) id;
    }
    closedir (d);
    return n;
}

static int rmtree (int dirfd, const char *name, dev_t dev, int depth,
                   tier_error_t *error)
{
    struct stat st;
    struct dirent *de;
    DIR *d;
    int fd;

    if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0
               : tier_errprintf (error, "%s: %s", name, strerror (errno));
    if (!S_ISDIR (st.st_mode)) {
        if (unlinkat (dirfd, name, 0) < 0 && errno != ENOENT)
            return tier_errprintf (error, "unlink %s: %s", name,
                                   strerror (errno));
        return 0;
    }
    if (st.st_dev != dev) {
        errno = EBUSY;
        return tier_errprintf (error, "%s is a mount point: left alone",
                               name);
    }
    if (depth > 256) {
        errno = ELOOP;
        return tier_errprintf (error, "%s: too deep", name);
    }
    if ((fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                      | O_CLOEXEC)) < 0)
        return tier_errprintf (error, "%s: %s", name, strerror (errno));
    if (!(d = fdopendir (fd))) {
        close (fd);
        return tier_errprintf (error, "%s: %s", name, strerror (errno));
    }
    while ((de = readdir (d))) {
        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        if (rmtree (fd, de->d_name, dev, depth + 1, error) < 0) {
            int e = errno;
            closedir (d);
            errno = e;
            return -1;
        }
    }
    closedir (d);
    if (unlinkat (dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return tier_errprintf (error, "rmdir %s: %s", name, strerror (errno));
    return 0;
}

int tier_rmtree_at (int dirfd, const char *name, tier_error_t *error)
{
    struct stat st;

    if (fstat (dirfd, &st) < 0)
        return tier_errprintf (error, "fstat: %s", strerror (errno));
    return rmtree (dirfd, name, st.st_dev, 0, error);
}

int tier_ovl_mount (int lowerfd, int upperfd, int workfd, int targetfd,
                    tier_error_t *error)
{
    static const char *opts[][2] = {
        { "redirect_dir", "on" },
        { "index", "off" },
        { "xino", "off" },
        { "metacopy", "off" },
        { "uuid", "null" },
    };
    int fs, mnt, rc = -1;

    if ((fs = sys_fsopen ("overlay", FSOPEN_CLOEXEC)) < 0)
        return tier_errprintf (error, "fsopen overlay: %s", strerror (errno));
    if (sys_fsconfig (fs, FSCONFIG_SET_FD, "lowerdir+", NULL, lowerfd) < 0
        || sys_fsconfig (fs, FSCONFIG_SET_FD, "upperdir", NULL, upperfd) < 0
        || sys_fsconfig (fs, FSCONFIG_SET_FD, "workdir", NULL, workfd) < 0) {
        tier_errprintf (error, "overlay layers: %s", strerror (errno));
        goto out;
    }
    for (size_t i = 0; i < sizeof (opts) / sizeof (opts[0]); i++) {
        if (sys_fsconfig (fs, FSCONFIG_SET_STRING, opts[i][0], opts[i][1],
                          0) < 0) {
            tier_errprintf (error, "overlay option %s=%s: %s", opts[i][0],
                            opts[i][1], strerror (errno));
            goto out;
        }
    }
    if (sys_fsconfig (fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
        char log[256];
        ssize_t n = read (fs, log, sizeof (log) - 1);
        int e = errno;
        log[n > 0 ? n : 0] = '\0';
        errno = e;
        tier_errprintf (error, "overlay: %s%s%s", strerror (e),
                        n > 0 ? ": " : "", log);
        goto out;
    }
    if ((mnt = sys_fsmount (fs, FSMOUNT_CLOEXEC,
                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0) {
        tier_errprintf (error, "fsmount: %s", strerror (errno));
        goto out;
    }
    if (sys_move_mount (mnt, "", targetfd, "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)
        < 0)
        tier_errprintf (error, "move_mount: %s", strerror (errno));
    else
        rc = 0;
    close (mnt);
out:
    close (fs);
    return rc;
}

int tier_ovl_dirs (int dirfd, int *upperfd, int *workfd, tier_error_t *error)
{
    static const char *names[] = { "work", "upper" };
    int fds[2] = { -1, -1 };

    for (int i = 0; i < 2; i++) {
        if (mkdirat (dirfd, names[i], 0700) < 0) {
            int e = errno;
            if (fds[0] >= 0)
                close (fds[0]);
            errno = e;
            if (e == EEXIST)
                return tier_errprintf (error, "%s exists already (left by "
                                       "an earlier mount?): refused, never "
                                       "two overlays on one upper layer",
                                       names[i]);
            return tier_errprintf (error, "mkdir %s: %s", names[i],
                                   strerror (e));
        }
        if ((fds[i] = openat (dirfd, names[i], O_RDONLY | O_DIRECTORY
                              | O_NOFOLLOW | O_CLOEXEC)) < 0) {
            int e = errno;
            if (fds[0] >= 0)
                close (fds[0]);
            errno = e;
            return tier_errprintf (error, "%s: %s", names[i], strerror (e));
        }
    }
    *workfd = fds[0];
    *upperfd = fds[1];
    return 0;
}

int tier_mount_clone (int dirfd, tier_error_t *error)
{
    int t = sys_open_tree (dirfd, "",
                           OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);

    if (t < 0)
        tier_errprintf (error, "open_tree: %s", strerror (errno));
    return t;
}

int tier_mount_attach (int clonefd, int targetfd, tier_error_t *error)
{
    if (sys_move_mount (clonefd, "", targetfd, "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)
        < 0)
        return tier_errprintf (error, "move_mount: %s", strerror (errno));
    return 0;
}

int tier_bind_ro (int srcfd, int targetfd, tier_error_t *error)
{
    struct mount_attr attr = {
        .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
    };
    int t, rc = -1;

    if ((t = sys_open_tree (srcfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC
                            | AT_EMPTY_PATH | AT_RECURSIVE)) < 0)
        return tier_errprintf (error, "open_tree: %s", strerror (errno));
    if (sys_mount_setattr (t, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                           sizeof (attr)) < 0)
        tier_errprintf (error, "mount_setattr: %s", strerror (errno));
    else if (sys_move_mount (t, "", targetfd, "", MOVE_MOUNT_F_EMPTY_PATH
                             | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        tier_errprintf (error, "move_mount: %s", strerror (errno));
    else
        rc = 0;
    close (t);
    return rc;
}

int tier_job_reclaim (const char *ns_base, const char *nvdimm_dir,
                      uint32_t job_id, tier_error_t *error)
{
    char name[32];
    int rc, fd;

    if ((rc = tier_ns_teardown (ns_base, job_id, 2000, error)) != 0)
        return rc;
    if (!nvdimm_dir || !nvdimm_dir[0])
        return 0;
    if ((fd = open (nvdimm_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                    | O_CLOEXEC)) < 0)
        return errno == ENOENT ? 0 : tier_errprintf (error, "%s: %s",
                                                     nvdimm_dir,
                                                     strerror (errno));
    (void) snprintf (name, sizeof (name), "%u", job_id);
    rc = tier_rmtree_at (fd, name, error);
    close (fd);
    return rc;
}

int tier_tmpfs_mount (int targetfd, uint64_t size, tier_error_t *error)
{
    char buf[32];
    int fs, mnt, rc = -1;

    if ((fs = sys_fsopen ("tmpfs", FSOPEN_CLOEXEC)) < 0)
        return tier_errprintf (error, "fsopen tmpfs: %s", strerror (errno));
    (void) snprintf (buf, sizeof (buf), "%llu", (unsigned long long) size);
    if ((size && sys_fsconfig (fs, FSCONFIG_SET_STRING, "size", buf, 0) < 0)
        || sys_fsconfig (fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0
        || sys_fsconfig (fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
        tier_errprintf (error, "tmpfs: %s", strerror (errno));
        goto out;
    }
    if ((mnt = sys_fsmount (fs, FSMOUNT_CLOEXEC,
                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0) {
        tier_errprintf (error, "fsmount tmpfs: %s", strerror (errno));
        goto out;
    }
    if (sys_move_mount (mnt, "", targetfd, "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)
        < 0)
        tier_errprintf (error, "move_mount tmpfs: %s", strerror (errno));
    else
        rc = 0;
    close (mnt);
out:
    close (fs);
    return rc;
}

