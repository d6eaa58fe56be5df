/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* ns.c - the job's mount namespace and the mounts made in it
 *
 *   job_prolog             create it (fresh: a requeued job gets a new one)
 *   REMOTE init_post_opt   create it if the prolog did not run; make the
 *                          job's mounts once, in a forked child that joins
 *                          it (first step on the node, under a lock)
 *   task_init_privileged   every task joins it (so -o/-e files, created
 *                          by slurmstepd before, land on the real GFS)
 *   job_epilog             tear it down, then remove the job's tier data
 *
 * Mount rules (DESIGN §3.3): only beneath AllowedRoots; the directory is
 * resolved with the user's credentials beneath its allowed root (no
 * symlink may lead out), the user must be able to write it, and it is
 * mounted through its O_PATH descriptor (no race between check and mount,
 * no option injection through ',' ':' '\' in names); always nosuid,nodev.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/jobns.h"
#include "lib/paths.h"
#include "lib/trust.h"
#include "ns.h"
#include "opts.h"
#include "stage.h"
#include "tier.h"

/* Close the descriptors of fds that are open, keeping errno. */
static void close_all (const int *fds, size_t n)
{
    int e = errno;

    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close (fds[i]);
    errno = e;
}

static int subdir (int dirfd, const char *name, mode_t mode,
                   tier_error_t *error)
{
    int fd;

    if (mkdirat (dirfd, name, mode) < 0 && errno != EEXIST)
        return tier_errprintf (error, "mkdir %s: %s", name, strerror (errno));
    if ((fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                      | O_CLOEXEC)) < 0)
        return tier_errprintf (error, "%s: %s", name, strerror (errno));
    return fd;
}

static bool under_any (const char *path, const struct tier_conf *conf)
{
    const char *roots[] = { conf->nvdimm_dir, conf->bb_dir,
                            conf->namespace_dir, conf->state_dir,
                            conf->socket_dir, conf->shared_state_dir };

    for (size_t i = 0; i < sizeof (roots) / sizeof (roots[0]); i++)
        if (roots[i] && roots[i][0]
            && (tier_path_under (path, roots[i])
                || tier_path_under (roots[i], path)))
            return true;
    return false;
}

/* Resolve dir as the user beneath its allowed root; returns an O_PATH
 * descriptor of a directory the user may write.
 */
int ns_resolve_dir (const struct mount_ctx *m, const char *option,
                    const char *dir, tier_error_t *error)
{
    return ns_resolve_path (m, option, dir,
                            TIER_RESOLVE_DIR | TIER_RESOLVE_WRITABLE, error);
}

int ns_resolve_path (const struct mount_ctx *m, const char *option,
                     const char *dir, int flags, tier_error_t *error)
{
    const struct tier_conf *conf = m->conf;
    const char *root = NULL, *rel;
    char norm[PATH_MAX];
    int rootfd, fd, e;

    if (tier_path_normalize (dir, norm, sizeof (norm)) < 0)
        return tier_errprintf (error, "%s: '%s': invalid path", option, dir);
    for (int i = 0; i < conf->allowed_roots_count; i++)
        if (tier_path_under (norm, conf->allowed_roots[i])) {
            root = conf->allowed_roots[i];
            break;
        }
    if (!root) {
        errno = EPERM;
        return tier_errprintf (error, "%s: %s is outside the directories "
                               "tier may act on (AllowedRoots)", option, norm);
    }
    if (under_any (norm, conf)) {
        errno = EPERM;
        return tier_errprintf (error, "%s: %s overlaps one of tier's own "
                               "directories", option, norm);
    }
    rel = tier_path_strip (norm, root);
    /* the job's own rights: its uid, gid and group list */
    if (tier_cred_fs_enter (&m->cred, TIER_CRED_DATA) < 0)
        return tier_errprintf (error, "cannot take the user's credentials: "
                               "%s", strerror (errno));
    if ((rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        e = errno;
        tier_cred_fs_leave ();
        errno = e;
        return tier_errprintf (error, "%s: %s: %s", option, root,
                               strerror (e));
    }
    fd = tier_path_open_beneath (rootfd, rel, O_PATH
                                 | ((flags & TIER_RESOLVE_DIR)
                                    ? O_DIRECTORY : 0), 0, 0);
    e = errno;
    close (rootfd);
    if (fd < 0) {
        tier_cred_fs_leave ();
        errno = e;
        if (e == EXDEV || e == ELOOP)
            return tier_errprintf (error, "%s: %s: a symlink or '..' leads "
                                   "out of %s (refused)", option, norm, root);
        return tier_errprintf (error, "%s: %s: %s", option, norm,
                               strerror (e));
    }
    /* the user must be able to write it (AT_EACCESS: the fs ids) */
    if ((flags & TIER_RESOLVE_WRITABLE)
        && syscall (SYS_faccessat2, fd, "", W_OK | X_OK,
                    AT_EMPTY_PATH | AT_EACCESS) < 0) {
        e = errno;
        close (fd);
        tier_cred_fs_leave ();
        errno = e;
        return tier_errprintf (error, "%s: %s: you cannot write this "
                               "directory", option, norm);
    }
    tier_cred_fs_leave ();
    return fd;
}

/* Where the GFS squashes root, the overlay -- mounted by root, and
 * overlayfs checks the lower layer with the mounter's credentials --
 * reads DIR as nobody: the user would get EACCES on her own private files
 * in it.  The site says so with GfsRootSquash = yes.  Without it, probe:
 * can root list DIR, and open the first of its entries that others may
 * not read (the user's 0600 files, 0700 directories)?  One such open
 * settles it either way.  A probe sees only the first ROOT_PROBE_MAX
 * entries of DIR, not its subdirectories: it is a safety net, and sites
 * whose GFS squashes root set GfsRootSquash.  *what names what root could
 * not read.
 */
#define ROOT_PROBE_MAX 256

/* getdents64's records (no libc DIR: this runs in a child forked from
 * the multithreaded slurmstepd) */
struct probe_dirent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* 1: root cannot open name in fd, though it could stat it; 0: it can;
 * -1: anyone may read it, or it is neither a file nor a directory.
 */
static int probe_entry (int fd, const char *name)
{
    struct stat st;
    bool dir;
    int efd;

    if (!strcmp (name, ".") || !strcmp (name, "..")
        || fstatat (fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    dir = S_ISDIR (st.st_mode);
    if (!(dir || S_ISREG (st.st_mode))
        || ((st.st_mode & S_IROTH) && (!dir || (st.st_mode & S_IXOTH))))
        return -1;
    efd = openat (fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY
                  | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (efd >= 0) {
        close (efd);
        return 0;
    }
    return errno == EACCES || errno == EPERM ? 1 : -1;
}

static bool root_squashed (int lowerfd, char *what, size_t size)
{
    char buf[8192] __attribute__ ((aligned (8)));
    int fd, seen = 0, rc = -1;
    long n = 0;

    (void) snprintf (what, size, "root cannot read the directory");
    if ((fd = openat (lowerfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return errno == EACCES || errno == EPERM;
    while (rc < 0 && seen < ROOT_PROBE_MAX
           && (n = syscall (SYS_getdents64, fd, buf, sizeof (buf))) > 0)
        for (long o = 0; o < n && rc < 0 && seen < ROOT_PROBE_MAX;) {
            struct probe_dirent *de = (struct probe_dirent *) (buf + o);
            o += de->reclen;
            seen++;
            if ((rc = probe_entry (fd, de->name)) == 1) {
                (void) snprintf (what, size, "root cannot read %s in it",
                                 de->name);
                for (char *c = what; *c; c++)
                    if ((unsigned char) *c < 0x20 || *c == 0x7f)
                        *c = '?';       /* a name is the user's text */
            }
        }
    if (rc < 0 && seen == 0 && n < 0 && (errno == EACCES || errno == EPERM))
        rc = 1;                         /* getdents refused */
    close (fd);
    return rc == 1;
}

#define TMPFS_MAGIC_ 0x01021994

/* One pipeline scratch overlay: lower = the GFS directory, upper/work =
 * NvdimmDir/JOBID/K/{upper,work}, the upper root mirroring the lower's
 * owner, group, mode and set-group-ID bit.  On a DRAM-emulated tier (tmpfs),
 * K is a tmpfs of its own with the item's size (else ScratchDefaultSize,
 * else NvdimmCapacity), mounted inside the job's namespace only: the job
 * gets ENOSPC past it, and it vanishes with the namespace.
 */
static int mount_scratch (const struct mount_ctx *m, int k, const char *dir,
                          uint64_t size, tier_error_t *error)
{
    char name[32], what[NAME_MAX + 32];
    struct stat st;
    struct statfs sf;
    int lowerfd = -1, rootfd = -1, jobfd = -1, kfd = -1, upfd = -1;
    int workfd = -1, rc = -1;

    if (!m->conf->nvdimm_dir[0]) {
        errno = ENOENT;
        return tier_errprintf (error, "--tier-scratch: this node has no "
                               "NVDIMM tier (NvdimmDir is not set)");
    }
    if ((lowerfd = ns_resolve_dir (m, "--tier-scratch", dir, error)) < 0)
        return -1;
    if (m->conf->gfs_root_squash
        || root_squashed (lowerfd, what, sizeof (what))) {
        errno = EACCES;
        tier_errprintf (error, "--tier-scratch: %s: the GFS squashes root "
                        "(%s), so a scratch view cannot be mounted over it",
                        dir, m->conf->gfs_root_squash ? "GfsRootSquash = "
                        "yes in tier.conf" : what);
        goto out;
    }
    if (fstat (lowerfd, &st) < 0) {
        tier_errprintf (error, "%s: %s", dir, strerror (errno));
        goto out;
    }
    if ((rootfd = tier_root_open (m->conf->nvdimm_dir, error)) < 0)
        goto out;
    (void) snprintf (name, sizeof (name), "%u", m->job_id);
    if ((jobfd = subdir (rootfd, name, 0700, error)) < 0)
        goto out;
    (void) snprintf (name, sizeof (name), "%d", k);
    if ((kfd = subdir (jobfd, name, 0700, error)) < 0)
        goto out;
    if (fstatfs (rootfd, &sf) == 0 && (unsigned) sf.f_type == TMPFS_MAGIC_) {
        if (!size)
            size = m->conf->scratch_default ? m->conf->scratch_default
                                            : m->conf->nvdimm_capacity;
        if (tier_tmpfs_mount (kfd, size, error) < 0)
            goto out;
        close (kfd);
        if ((kfd = subdir (jobfd, name, 0700, error)) < 0)
            goto out;
    }
    if (tier_ovl_dirs (kfd, &upfd, &workfd, error) < 0) {
        char msg[TIER_ERROR_MAX];
        (void) snprintf (msg, sizeof (msg), "%s", error->text);
        tier_errprintf (error, "--tier-scratch: %s: %s/%u/%d/%s", dir,
                        m->conf->nvdimm_dir, m->job_id, k, msg);
        goto out;
    }
    if (fchown (upfd, st.st_uid, st.st_gid) < 0
        || fchmod (upfd, st.st_mode & 07777) < 0) {
        tier_errprintf (error, "upper of %s: %s", dir, strerror (errno));
        goto out;
    }
    if (tier_ovl_mount (lowerfd, upfd, workfd, lowerfd, error) < 0) {
        char msg[TIER_ERROR_MAX];
        (void) snprintf (msg, sizeof (msg), "%s", error->text);
        tier_errprintf (error, "--tier-scratch: %s: %s", dir, msg);
        goto out;
    }
    rc = 0;
out:
    {
        int fds[] = { lowerfd, rootfd, jobfd, kfd, upfd, workfd };
        close_all (fds, sizeof (fds) / sizeof (fds[0]));
    }
    return rc;
}

static bool same_fs (int fd1, int fd2)
{
    struct stat a, b;

    return fstat (fd1, &a) == 0 && fstat (fd2, &b) == 0 && a.st_dev == b.st_dev;
}

/* On the host, before the job's namespace is joined: on a DRAM-emulated
 * tier (tmpfs), the job's write cache NvdimmDir/.outbox/JOB.RESTART is a
 * tmpfs of its own with the size the agent reserved for it, so that a
 * running job's outputs cannot fill the tier (they get ENOSPC past it,
 * as with a scratch reservation).  Unlike a scratch tmpfs it is mounted
 * on the host, where the agent's migrator reads it and where it outlives
 * the job until its files are on the GFS (the agent unmounts it then);
 * mount_outbox puts a copy of it (returned: a detached mount) in the
 * job's namespace.  -1 (nothing to mount: not limited, not emulated,
 * denied) or -2 with *error.  On a DAX file system the size is a
 * reservation only: the file system does not enforce it.
 */
static int outbox_fs (const struct mount_ctx *m, tier_error_t *error)
{
    struct statfs sf;
    char name[32];
    int rootfd = -1, boxfd = -1, jobfd = -1, clone = -2;

    if (!m->stage_out[0] || !m->write_cache || !m->conf->nvdimm_dir[0]
        || (m->outbox_denied && m->outbox_denied[0]))
        return -1;
    if ((rootfd = tier_root_open (m->conf->nvdimm_dir, error)) < 0)
        goto out;
    if (fstatfs (rootfd, &sf) < 0 || (unsigned) sf.f_type != TMPFS_MAGIC_) {
        clone = -1;
        goto out;
    }
    if ((boxfd = subdir (rootfd, ".outbox", 0700, error)) < 0)
        goto out;
    (void) snprintf (name, sizeof (name), "%u.%u", m->job_id, m->restart);
    if ((jobfd = subdir (boxfd, name, 0700, error)) < 0)
        goto out;
    if (same_fs (jobfd, boxfd)) {
        if (tier_tmpfs_mount (jobfd, m->write_cache, error) < 0)
            goto out;
        close (jobfd);
        if ((jobfd = subdir (boxfd, name, 0700, error)) < 0)
            goto out;
    }
    if ((clone = tier_mount_clone (jobfd, error)) < 0)
        clone = -2;
out:
    close_all ((const int[]){ rootfd, boxfd, jobfd }, 3);
    return clone;
}

/* A write cache with less room than this is full: the output directory
 * is then the plain GFS (a job would only get ENOSPC on its first
 * write). */
#define OUTBOX_MIN_FREE (1ULL << 20)

/* One output directory (stage-out): an overlay whose upper layer is the
 * job's write cache, NvdimmDir/.outbox/JOB.RESTART/K/upper -- outside
 * the job's own NVDIMM directory, so that it outlives the job until the
 * agent's migrator has taken every file to the GFS.  Returns 0, or 1
 * with *error saying why when the fast tier is full: DIR is left to the
 * GFS (its write cache made, empty, for the migrator to find), and the
 * job writes there directly.
 */
static int mount_outbox (const struct mount_ctx *m, int k, const char *dir,
                         tier_error_t *error)
{
    struct statfs sf;
    char name[32], what[NAME_MAX + 32];
    struct stat st;
    int lowerfd = -1, rootfd = -1, boxfd = -1, jobfd = -1, kfd = -1;
    int upfd = -1, workfd = -1, rc = -1;

    if (!m->conf->nvdimm_dir[0]) {
        errno = ENOENT;
        return tier_errprintf (error, "--tier-stage-out: this node has no "
                               "fast tier for a write cache (NvdimmDir is "
                               "not set)");
    }
    if ((lowerfd = ns_resolve_dir (m, "--tier-stage-out", dir, error)) < 0)
        return -1;
    if (m->conf->gfs_root_squash
        || root_squashed (lowerfd, what, sizeof (what))) {
        errno = EACCES;
        tier_errprintf (error, "--tier-stage-out: %s: the GFS squashes root "
                        "(%s), so a write cache cannot be mounted over it",
                        dir, m->conf->gfs_root_squash ? "GfsRootSquash = "
                        "yes in tier.conf" : what);
        goto out;
    }
    if (fstat (lowerfd, &st) < 0) {
        tier_errprintf (error, "%s: %s", dir, strerror (errno));
        goto out;
    }
    if ((rootfd = tier_root_open (m->conf->nvdimm_dir, error)) < 0
        || (boxfd = subdir (rootfd, ".outbox", 0700, error)) < 0)
        goto out;
    (void) snprintf (name, sizeof (name), "%u.%u", m->job_id, m->restart);
    if ((jobfd = subdir (boxfd, name, 0700, error)) < 0)
        goto out;
    if (m->outbox_fs >= 0 && !same_fs (jobfd, m->outbox_fs)) {
        /* the write cache's file system, made on the host (outbox_fs):
         * the job writes to it here, the agent reads it there */
        if (tier_mount_attach (m->outbox_fs, jobfd, error) < 0) {
            char msg[TIER_ERROR_MAX];
            (void) snprintf (msg, sizeof (msg), "%s", error->text);
            tier_errprintf (error,
                            "--tier-stage-out: %s: the write cache "
                            "%s/.outbox/%s: %s",
                            dir, m->conf->nvdimm_dir, name, msg);
            goto out;
        }
        close (jobfd);
        if ((jobfd = subdir (boxfd, name, 0700, error)) < 0)
            goto out;
    }
    (void) snprintf (name, sizeof (name), "%d", k);
    if ((kfd = subdir (jobfd, name, 0700, error)) < 0)
        goto out;
    if (tier_ovl_dirs (kfd, &upfd, &workfd, error) < 0) {
        char msg[TIER_ERROR_MAX];
        (void) snprintf (msg, sizeof (msg), "%s", error->text);
        tier_errprintf (error, "--tier-stage-out: %s: %s", dir, msg);
        goto out;
    }
    if (fchown (upfd, st.st_uid, st.st_gid) < 0
        || fchmod (upfd, st.st_mode & 07777) < 0) {
        tier_errprintf (error, "write cache of %s: %s", dir, strerror (errno));
        goto out;
    }
    if (m->outbox_denied && m->outbox_denied[0]) {
        tier_errprintf (error, "--tier-stage-out: %s: %s", dir,
                        m->outbox_denied);
        rc = 1;
        goto out;
    }
    if (fstatfs (upfd, &sf) == 0
        && (unsigned long long) sf.f_bavail * (unsigned long long) sf.f_bsize
               < OUTBOX_MIN_FREE) {
        tier_errprintf (error,
                        "--tier-stage-out: %s: the node's write cache "
                        "is full (%llu KiB free in %s): the job writes to "
                        "the GFS directly",
                        dir,
                        (unsigned long long) sf.f_bavail
                            * (unsigned long long) sf.f_bsize / 1024,
                        m->conf->nvdimm_dir);
        rc = 1;
        goto out;
    }
    if (tier_ovl_mount (lowerfd, upfd, workfd, lowerfd, error) < 0) {
        char msg[TIER_ERROR_MAX];
        (void) snprintf (msg, sizeof (msg), "%s", error->text);
        tier_errprintf (error, "--tier-stage-out: %s: %s", dir, msg);
        goto out;
    }
    rc = 0;
out:
    {
        int fds[] = { lowerfd, rootfd, boxfd, jobfd, kfd, upfd, workfd };
        close_all (fds, sizeof (fds) / sizeof (fds[0]));
    }
    return rc;
}

/* Eager mode: the mirror tree (on the BB, root's, from the agent) bound
 * read-only over the batch directory, resolved as the user.  A failure
 * leaves the directory to the interposer: it is logged, not fatal.
 */
static int bind_mirror (const struct mount_ctx *m, const char *dir,
                        const char *tree, tier_error_t *error)
{
    /* root's tree, in directories only root can change */
    const struct tier_trust rule = { .kind = TIER_TRUST_ROOT_DIR,
                                     .flags = O_PATH };
    char mirrors[PATH_MAX];
    tier_error_t e;
    int sfd, tfd, rc;

    (void) snprintf (mirrors, sizeof (mirrors), "%.2048s/mirrors",
                     m->conf->bb_dir);
    if (!m->conf->bb_dir[0] || !tier_path_under (tree, mirrors))
        return tier_errprintf (error, "mirror of %s: not in %s", dir,
                               mirrors);
    if ((sfd = tier_trust_open (tree, &rule, &e)) < 0)
        return tier_errprintf (error, "mirror of %s: %s", dir, e.text);
    if ((tfd = ns_resolve_path (m, "--tier-batch", dir, TIER_RESOLVE_DIR,
                                error))
        < 0) {
        close (sfd);
        return -1;
    }
    rc = tier_bind_ro (sfd, tfd, error);
    close (sfd);
    close (tfd);
    return rc;
}

static void bind_all (const struct mount_ctx *m)
{
    char bound[TIER_OPT_VALUE_MAX] = "", errs[1024] = "";
    const char *p = m->binds;
    size_t o = 0;

    while (p && *p) {
        char item[2 * PATH_MAX + 8], *eq;
        size_t l = strcspn (p, ":");
        tier_error_t e;

        if (l < sizeof (item)) {
            memcpy (item, p, l);
            item[l] = '\0';
            if ((eq = strchr (item, '='))) {
                *eq = '\0';
                if (bind_mirror (m, item, eq + 1, &e) == 0) {
                    size_t n = strlen (item);
                    if (o + n + 2 < sizeof (bound)) {
                        if (o)
                            bound[o++] = ':';
                        memcpy (bound + o, item, n + 1);
                        o += n;
                    }
                }
                else if (!errs[0])
                    (void) snprintf (errs, sizeof (errs), "%s", e.text);
            }
        }
        p += l + (p[l] == ':');
    }
    (void) tier_ns_write (m->conf->namespace_dir, m->job_id, TIER_NS_BOUND,
                          bound);
    if (errs[0])
        (void) tier_ns_write (m->conf->namespace_dir, m->job_id,
                              TIER_NS_BIND_ERROR, errs);
}

/* In the forked child that joined the namespace. */
static int mount_all (void *arg, tier_error_t *error)
{
    struct mount_ctx *m = arg;
    char item[PATH_MAX + 64];
    const char *p = m->scratch;
    char full[TIER_ERROR_MAX] = "";
    tier_error_t e;
    int k = 0, rc;

    while ((p = opts_next_item (p, item, sizeof (item)))) {
        char dir[PATH_MAX + 64];
        uint64_t size;
        if (opts_split_size (item, dir, sizeof (dir), &size, error) < 0
            || mount_scratch (m, k++, dir, size, error) < 0)
            return -1;
    }
    k = 0;
    for (p = m->stage_out; (p = tier_list_next (p, item, sizeof (item)));) {
        char dir[PATH_MAX + 64], url[PATH_MAX];
        /* DIR=URL: an overlay over DIR all the same (the migrator sends
         * its files to the URL) */
        if (stage_out_item (item, dir, sizeof (dir), url, sizeof (url)) < 0) {
            errno = EINVAL;
            return tier_errprintf (error, "--tier-stage-out: '%s': invalid",
                                   item);
        }
        if ((rc = mount_outbox (m, k++, dir, &e)) < 0) {
            *error = e;
            return -1;
        }
        if (rc > 0 && !full[0])
            (void) snprintf (full, sizeof (full), "%s", e.text);
    }
    if (full[0])
        (void) tier_ns_write (m->conf->namespace_dir, m->job_id,
                              TIER_NS_OUTBOX_ERROR, full);
    bind_all (m);
    return 0;
}

/* What S_JOB_SUPPLEMENTARY_GIDS gives on Slurm 22.05.8, seen on the
 * test cluster (PrologFlags=Alloc, alice in group 1001 and one
 * supplementary group 1003, a batch job with one srun step):
 *   REMOTE (slurmstepd): init, init_post_opt, task_init_privileged and
 *     task_init all give ESPANK_SUCCESS, n = 2, [1001, 1003] -- the
 *     primary group included, the list `id` shows in the task; each step
 *     its own copy (the batch step's and step 0's pointers differ)
 *   JOB_SCRIPT (job_prolog, job_epilog) and slurmd's init:
 *     ESPANK_NOT_AVAIL ("Item not available from this callback")
 *   LOCAL, ALLOCATOR (srun, sbatch): ESPANK_NOT_REMOTE
 * So REMOTE takes Slurm's list, and the prolog and epilog ask NSS; a
 * REMOTE context that got no list (never seen) asks NSS too rather than
 * fail the job.
 */
int ns_job_cred (spank_t sp, struct tier_cred *cred, tier_error_t *error)
{
    struct passwd pw, *pwp = NULL;
    char buf[4096];
    gid_t *gids = NULL;
    uid_t uid;
    gid_t gid;
    int n = 0;

    if (spank_get_item (sp, S_JOB_UID, &uid) != ESPANK_SUCCESS
        || spank_get_item (sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return tier_errprintf (error, "cannot read the job's owner");
    tier_cred_init (cred, uid, gid);
    if (spank_context () == S_CTX_REMOTE
        && spank_get_item (sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &n)
               == ESPANK_SUCCESS
        && (gids || n == 0)) {
        if (tier_cred_set_groups (cred, gids, n) < 0)
            return tier_errprintf (error,
                                   "the job has %d groups, more "
                                   "than tier takes (%d)",
                                   n, TIER_CRED_GROUPS_MAX);
        return 0;
    }
    if (getpwuid_r (uid, &pw, buf, sizeof (buf), &pwp) != 0 || !pwp)
        return tier_errprintf (error, "uid %u has no passwd entry",
                               (unsigned) uid);
    if (tier_cred_lookup (cred, pw.pw_name) < 0)
        return tier_errprintf (error, "the groups of %s: %s", pw.pw_name,
                               errno == E2BIG ? "too many" : strerror (errno));
    return 0;
}

bool ns_wanted (void)
{
    return tier.opts.scratch[0] != '\0' || tier.opts.stage_in[0] != '\0'
           || tier.binds[0] != '\0' || tier.stage_out[0] != '\0'
           || tier.policy_in[0] != '\0';
}

int ns_prolog (const struct tier_conf *conf, uint32_t job_id, uid_t uid,
               tier_error_t *error)
{
    if (tier_ns_base_prepare (conf->namespace_dir, error) < 0)
        return -1;
    return tier_ns_create (conf->namespace_dir, job_id, uid, true, error);
}

/* The job's first step on the node, holding the namespace's lock: the
 * write cache's file system (on the host), then the mounts in the
 * namespace, then the migrator. */
static int first_setup (struct mount_ctx *m, tier_error_t *error)
{
    static char fs_denied[sizeof (tier.outbox_denied) + TIER_ERROR_MAX];
    const char *base = m->conf->namespace_dir;
    int rc = -1;

    if ((m->outbox_fs = outbox_fs (m, error)) == -2) {
        /* no write cache then: the job writes to the GFS directly */
        (void) snprintf (fs_denied, sizeof (fs_denied),
                         "the job's write cache could not be made: %s: "
                         "the job writes to the GFS directly",
                         error->text);
        m->outbox_denied = fs_denied;
        m->outbox_fs = -1;
    }
    if (tier_ns_run (base, m->job_id, mount_all, m, error) < 0) {
        (void) tier_ns_mark (base, m->job_id, TIER_NS_FAILED);
        if (m->outbox_fs >= 0) {
            /* no migrator will ever remove it */
            char path[PATH_MAX];
            (void) snprintf (path, sizeof (path), "%s/.outbox/%u.%u",
                             m->conf->nvdimm_dir, m->job_id, m->restart);
            (void) umount2 (path, MNT_DETACH | UMOUNT_NOFOLLOW);
        }
    }
    else {
        (void) tier_ns_mark (base, m->job_id, TIER_NS_READY);
        (void) tier_ns_write (base, m->job_id, TIER_NS_SCRATCH, m->scratch);
        if (m->stage_out[0]
            && (tier_ns_write (base, m->job_id, TIER_NS_STAGEOUT, m->stage_out)
                    < 0
                || stage_out_start (m->conf, tier.conf_path, m->job_id,
                                    m->restart, m->stage_out, error)
                       < 0)) {
            slurm_error ("tier: job %u: stage-out: %s", m->job_id, error->text);
            (void) tier_ns_mark (base, m->job_id, TIER_NS_FAILED);
        }
        else
            rc = 0;
    }
    if (m->outbox_fs >= 0)
        close (m->outbox_fs);
    m->outbox_fs = -1;
    return rc;
}

int ns_setup (spank_t sp, tier_error_t *error)
{
    struct mount_ctx m = { .conf = tier.conf,
                           .job_id = tier.job_id,
                           .scratch = tier.opts.scratch,
                           .binds = tier.binds,
                           .stage_out = tier.stage_out,
                           .outbox_denied = tier.outbox_denied,
                           .write_cache = tier.write_cache,
                           .outbox_fs = -1,
                           .restart = tier.restart };
    const char *base = tier.conf->namespace_dir;
    int lockfd, rc = -1;

    if (ns_job_cred (sp, &m.cred, error) < 0)
        return -1;
    if (tier_ns_base_prepare (base, error) < 0)
        return -1;
    {
        /* a namespace left by an earlier run of this job id (requeued,
         * its teardown deferred) is never joined: start afresh, or fail */
        char r[32];
        bool stale = tier_ns_exists (base, m.job_id)
                     && tier_ns_read (base, m.job_id, TIER_NS_RESTART, r,
                                      sizeof (r)) == 0
                     && strtoul (r, NULL, 10) != m.restart;
        if (tier_ns_create (base, m.job_id, m.cred.uid, stale, error) < 0) {
            if (stale) {
                char msg[TIER_ERROR_MAX];
                (void) snprintf (msg, sizeof (msg), "%s", error->text);
                tier_errprintf (error, "the namespace of an earlier run of "
                                "job %u is still in use: %s", m.job_id, msg);
            }
            return -1;
        }
        if (tier_ns_read (base, m.job_id, TIER_NS_RESTART, r, sizeof (r)) < 0) {
            (void) snprintf (r, sizeof (r), "%u", m.restart);
            (void) tier_ns_write (base, m.job_id, TIER_NS_RESTART, r);
        }
    }
    if ((lockfd = tier_ns_lock (base, m.job_id, error)) < 0)
        return -1;
    if (tier_ns_marked (base, m.job_id, TIER_NS_READY))
        rc = 0;                         /* an earlier step made them */
    else if (tier_ns_marked (base, m.job_id, TIER_NS_FAILED))
        tier_errprintf (error, "the job's tiers could not be set up on "
                               "this node (see the first step's message)");
    else
        rc = first_setup (&m, error);
    if (rc == 0 && tier_ns_read (base, m.job_id, TIER_NS_BOUND, tier.bound,
                                 sizeof (tier.bound)) < 0)
        tier.bound[0] = '\0';
    if (rc == 0 && tier.binds[0]
        && tier_ns_read (base, m.job_id, TIER_NS_BIND_ERROR, tier.bind_error,
                         sizeof (tier.bind_error)) == 0)
        slurm_error ("tier: job %u: eager mode: %s", m.job_id,
                     tier.bind_error);
    if (rc == 0 && m.stage_out[0]
        && tier_ns_read (base, m.job_id, TIER_NS_OUTBOX_ERROR,
                         tier.outbox_error, sizeof (tier.outbox_error))
               == 0)
        slurm_error ("tier: job %u: %s", m.job_id, tier.outbox_error);
    close (lockfd);
    return rc;
}

/* Is this task already in a namespace someone else made (job_container/
 * tmpfs, a container plugin)?  Compared with its slurmstepd's.
 */
static bool foreign_ns (void)
{
    struct stat a, b;
    char path[64];

    (void) snprintf (path, sizeof (path), "/proc/%d/ns/mnt", (int) getppid ());
    if (stat ("/proc/self/ns/mnt", &a) < 0 || stat (path, &b) < 0)
        return false;
    return a.st_ino != b.st_ino;
}

int ns_join (tier_error_t *error)
{
    if (foreign_ns ()) {
        errno = EBUSY;
        return tier_errprintf (error, "this task already runs in another "
                               "mount namespace (job_container/tmpfs or a "
                               "container?): tier's namespace is not joined");
    }
    return tier_ns_enter (tier.conf->namespace_dir, tier.job_id, error);
}
