/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_trust.c - the rules of lib/trust.h, on real directories
 *
 * A tree under a fresh directory in /tmp (root's and sticky, as a parent
 * may be).  Owners are faked at link time (-Wl,--wrap=fstat): the test
 * gives an inode another owner without chown, and when it does not run
 * as root, its own files report root as their owner, so every rule is
 * checked as any user.  -Wl,--wrap=openat records what trust.c opens:
 * beneath which descriptor, and that nothing is followed.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/trust.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[64];
static bool map_me; /* not root: our files report root's */

/* Inodes that report another owner or mode than they have. */
static struct fake {
    dev_t dev;
    ino_t ino;
    bool has_uid, has_mode;
    uid_t uid;
    mode_t mode;
} fakes[8];
static int nfakes;

/* What openat saw since the last reset. */
static struct {
    int n;
    int first_dirfd;
    int followed; /* opens without O_NOFOLLOW */
} oa;

int __real_fstat (int fd, struct stat *st);
int __wrap_fstat (int fd, struct stat *st);
int __real_openat (int dirfd, const char *name, int flags, ...);
int __wrap_openat (int dirfd, const char *name, int flags, ...);

int __wrap_fstat (int fd, struct stat *st)
{
    if (__real_fstat (fd, st) < 0)
        return -1;
    if (map_me && st->st_uid == geteuid ())
        st->st_uid = 0;
    for (int i = 0; i < nfakes; i++) {
        if (fakes[i].dev != st->st_dev || fakes[i].ino != st->st_ino)
            continue;
        if (fakes[i].has_uid)
            st->st_uid = fakes[i].uid;
        if (fakes[i].has_mode)
            st->st_mode = (st->st_mode & S_IFMT) | fakes[i].mode;
    }
    return 0;
}

int __wrap_openat (int dirfd, const char *name, int flags, ...)
{
    mode_t mode = 0;

    if (flags & O_CREAT) {
        va_list ap;
        va_start (ap, flags);
        mode = (mode_t) va_arg (ap, int);
        va_end (ap);
    }
    if (oa.n++ == 0)
        oa.first_dirfd = dirfd;
    if (!(flags & O_NOFOLLOW))
        oa.followed++;
    return __real_openat (dirfd, name, flags, mode);
}

static void openat_reset (void)
{
    memset (&oa, 0, sizeof (oa));
    oa.first_dirfd = -100;
}

/* top/rel (static buffers, four in turn) */
static const char *P (const char *rel)
{
    static char buf[4][512];
    static int i;

    i = (i + 1) % 4;
    (void) snprintf (buf[i], sizeof (buf[i]), "%s%s%s", top, *rel ? "/" : "",
                     rel);
    return buf[i];
}

static void mkd (const char *rel, mode_t mode)
{
    assert_int_equal (mkdir (P (rel), 0700), 0);
    assert_int_equal (chmod (P (rel), mode), 0);
}

static void mkf (const char *rel, mode_t mode)
{
    int fd = open (P (rel), O_WRONLY | O_CREAT | O_EXCL, 0600);

    assert_true (fd >= 0);
    assert_int_equal (write (fd, "x\n", 2), 2);
    close (fd);
    assert_int_equal (chmod (P (rel), mode), 0);
}

static struct fake *fake (const char *path)
{
    struct stat st;

    assert_int_equal (lstat (path, &st), 0);
    assert_true (nfakes < 8);
    memset (&fakes[nfakes], 0, sizeof (fakes[0]));
    fakes[nfakes].dev = st.st_dev;
    fakes[nfakes].ino = st.st_ino;
    return &fakes[nfakes++];
}

static void fake_owner (const char *path, uid_t uid)
{
    struct fake *f = fake (path);
    f->has_uid = true;
    f->uid = uid;
}

static void fake_mode (const char *path, mode_t mode)
{
    struct fake *f = fake (path);
    f->has_mode = true;
    f->mode = mode;
}

/* Open path under t; -1 expected with errno e and rule why (0: none). */
static void refused (const char *path, struct tier_trust t, int e,
                     enum tier_trust_why why)
{
    enum tier_trust_why got = 99;
    tier_error_t error;
    int fd;

    t.why = &got;
    errno = 0;
    fd = tier_trust_open (path, &t, &error);
    if (fd >= 0)
        close (fd);
    assert_int_equal (fd, -1);
    assert_int_equal (errno, e);
    assert_int_equal (got, why);
    assert_non_null (strstr (error.text, e == EPERM ? "(refused)" : ""));
}

/* Open path under t, which must pass; returns the descriptor. */
static int passes (const char *path, struct tier_trust t)
{
    enum tier_trust_why got = 99;
    tier_error_t error;
    int fd;

    t.why = &got;
    if ((fd = tier_trust_open (path, &t, &error)) < 0)
        fail_msg ("%s: %s", path, error.text);
    assert_int_equal (got, 0);
    return fd;
}

static void passes_close (const char *path, struct tier_trust t)
{
    close (passes (path, t));
}

static const struct tier_trust root_dir = { .kind = TIER_TRUST_ROOT_DIR };
static const struct tier_trust root_file = { .kind = TIER_TRUST_ROOT_FILE };

static int setup (void **state)
{
    (void) state;
    (void) snprintf (top, sizeof (top), "/tmp/test_trust.XXXXXX");
    if (!mkdtemp (top) || chmod (top, 0755) < 0)
        return -1;
    map_me = geteuid () != 0;
    nfakes = 0;
    openat_reset ();
    umask (022);
    return 0;
}

static int teardown (void **state)
{
    char cmd[256];

    (void) state;
    nfakes = 0;
    (void) snprintf (cmd, sizeof (cmd), "chmod -R u+rwx '%s'; rm -rf '%s'", top,
                     top);
    return system (cmd) == 0 ? 0 : -1;
}

/* a root-owned 0755 directory; "/" itself; a trailing slash */
static void test_root_dir (void **state)
{
    struct stat a, b;
    int fd;

    (void) state;
    mkd ("a", 0755);
    fd = passes (P ("a"), root_dir);
    assert_int_equal (__real_fstat (fd, &a), 0);
    assert_int_equal (lstat (P ("a"), &b), 0);
    assert_true (S_ISDIR (a.st_mode) && a.st_ino == b.st_ino);
    close (fd);
    passes_close (P ("a/"), root_dir);
    passes_close ("/", root_dir);
    /* nothing on the way was followed */
    assert_int_equal (oa.followed, 0);
}

/* the owner: root's, or the one other the caller allows (SlurmUser),
 * and that one for the last component only */
static void test_owner (void **state)
{
    struct tier_trust slurm = { .kind = TIER_TRUST_ROOT_DIR, .uid = 4321 };
    tier_error_t error;

    (void) state;
    mkd ("a", 0755);
    mkd ("a/b", 0755);
    fake_owner (P ("a"), 4321);
    refused (P ("a"), root_dir, EPERM, TIER_TRUST_OWNER);
    assert_int_equal (tier_trust_open (P ("a"), &root_dir, &error), -1);
    assert_non_null (strstr (error.text, "not owned by root"));
    passes_close (P ("a"), slurm);
    /* a SlurmUser's directory is no parent root relies on */
    refused (P ("a/b"), slurm, EPERM, TIER_TRUST_PARENT);
    /* nor someone else's, for the last component */
    refused (P ("a"),
             (struct tier_trust){ .kind = TIER_TRUST_ROOT_DIR, .uid = 4322 },
             EPERM, TIER_TRUST_OWNER);
}

/* writable by group or others: refused, sticky or not */
static void test_mode (void **state)
{
    (void) state;
    mkd ("a", 0775);
    refused (P ("a"), root_dir, EPERM, TIER_TRUST_MODE);
    assert_int_equal (chmod (P ("a"), 0757), 0);
    refused (P ("a"), root_dir, EPERM, TIER_TRUST_MODE);
    assert_int_equal (chmod (P ("a"), 01777), 0);
    refused (P ("a"), root_dir, EPERM, TIER_TRUST_MODE);
    assert_int_equal (chmod (P ("a"), 0555), 0);
    passes_close (P ("a"), root_dir);
}

/* the parent rule: root's and not writable by others, or sticky */
static void test_parents (void **state)
{
    (void) state;
    mkd ("s", 01777); /* as /dev/shm */
    mkd ("s/d", 0755);
    passes_close (P ("s/d"), root_dir);
    mkd ("w", 0777); /* not sticky: d may be renamed */
    mkd ("w/d", 0755);
    refused (P ("w/d"), root_dir, EPERM, TIER_TRUST_PARENT);
    mkd ("g", 0775);
    mkd ("g/d", 0755);
    refused (P ("g/d"), root_dir, EPERM, TIER_TRUST_PARENT);
    mkd ("o", 0755); /* someone else's, not writable */
    mkd ("o/d", 0755);
    fake_owner (P ("o"), 4321);
    refused (P ("o/d"), root_dir, EPERM, TIER_TRUST_PARENT);
    /* every directory from / down: /tmp without its sticky bit */
    mkd ("a", 0755);
    passes_close (P ("a"), root_dir);
    fake_mode ("/tmp", 0777);
    refused (P ("a"), root_dir, EPERM, TIER_TRUST_PARENT);
}

/* a symlink as the last component, on the way, or to a file */
static void test_symlinks (void **state)
{
    (void) state;
    mkd ("a", 0755);
    mkd ("a/b", 0755);
    mkf ("a/f", 0644);
    assert_int_equal (symlink (P ("a"), P ("l")), 0);
    assert_int_equal (symlink ("f", P ("a/lf")), 0);
    refused (P ("l"), root_dir, EPERM, TIER_TRUST_LINK);
    refused (P ("l/b"), root_dir, EPERM, TIER_TRUST_LINK);
    refused (P ("l/f"), root_file, EPERM, TIER_TRUST_LINK);
    refused (P ("a/lf"), root_file, EPERM, TIER_TRUST_LINK);
    passes_close (P ("a/f"), root_file);
}

/* not absolute, "..", "." or nothing: EINVAL */
static void test_bad_paths (void **state)
{
    tier_error_t error;
    int dfd;

    (void) state;
    mkd ("a", 0755);
    mkd ("a/b", 0755);
    refused ("tmp", root_dir, EINVAL, 0);
    refused (P ("a/../a"), root_dir, EINVAL, 0);
    refused (P ("a/./b"), root_dir, EINVAL, 0);
    refused ("", root_dir, EINVAL, 0);
    refused (NULL, root_dir, EINVAL, 0);
    assert_true ((dfd = open (top, O_PATH | O_DIRECTORY)) >= 0);
    errno = 0;
    assert_int_equal (tier_trust_openat (dfd, top, P ("a"), &root_dir, &error),
                      -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_trust_openat (dfd, top, "a/../a", &root_dir, &error),
                      -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_trust_openat (dfd, top, "", &root_dir, &error), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_trust_openat (dfd, top, NULL, &root_dir, &error),
                      -1);
    assert_int_equal (errno, EINVAL);
    close (dfd);
}

/* .deny: 077 for a directory only root may enter */
static void test_deny (void **state)
{
    struct tier_trust t = { .kind = TIER_TRUST_ROOT_DIR, .deny = 077 };
    tier_error_t error;

    (void) state;
    mkd ("a", 0755);
    refused (P ("a"), t, EPERM, TIER_TRUST_MODE);
    assert_int_equal (tier_trust_open (P ("a"), &t, &error), -1);
    assert_non_null (strstr (error.text, "mode 0755"));
    assert_int_equal (chmod (P ("a"), 0700), 0);
    passes_close (P ("a"), t);
    passes_close (P ("a"), root_dir);
}

/* ROOT_FILE: a regular file, root's, not writable by others; the open
 * flags as asked, never blocking on a FIFO */
static void test_root_file (void **state)
{
    struct tier_trust w = { .kind = TIER_TRUST_ROOT_FILE,
                            .flags = O_WRONLY | O_APPEND };
    struct tier_trust slurm = { .kind = TIER_TRUST_ROOT_FILE, .uid = 4321 };
    char buf[8];
    int fd;

    (void) state;
    mkd ("a", 0755);
    mkf ("a/f", 0644);
    fd = passes (P ("a/f"), root_file);
    assert_int_equal (read (fd, buf, sizeof (buf)), 2);
    close (fd);
    fd = passes (P ("a/f"), w);
    assert_int_equal (fcntl (fd, F_GETFL) & (O_ACCMODE | O_APPEND | O_NONBLOCK),
                      O_WRONLY | O_APPEND);
    assert_int_equal (write (fd, "y\n", 2), 2);
    close (fd);
    refused (P ("a"), root_file, EPERM, TIER_TRUST_TYPE);
    refused (P ("a/f"), root_dir, EPERM, TIER_TRUST_LINK); /* ENOTDIR */
    assert_int_equal (mkfifo (P ("a/p"), 0644), 0);
    refused (P ("a/p"), root_file, EPERM, TIER_TRUST_TYPE);
    assert_int_equal (chmod (P ("a/f"), 0664), 0);
    refused (P ("a/f"), root_file, EPERM, TIER_TRUST_MODE);
    assert_int_equal (chmod (P ("a/f"), 0644), 0);
    fake_owner (P ("a/f"), 4321);
    refused (P ("a/f"), root_file, EPERM, TIER_TRUST_OWNER);
    passes_close (P ("a/f"), slurm);
}

/* USER_PRIVATE: the user's, nothing for group or others; beneath its
 * descriptor, every directory the user's and closed to writers */
static void test_user_private (void **state)
{
    struct tier_trust dir = { .kind = TIER_TRUST_USER_PRIVATE,
                              .uid = 4001,
                              .flags = O_DIRECTORY };
    struct tier_trust file = { .kind = TIER_TRUST_USER_PRIVATE, .uid = 4001 };
    enum tier_trust_why why;
    tier_error_t error;
    int ufd, fd;

    (void) state;
    mkd ("u", 0700);
    mkd ("u/sub", 0700);
    mkf ("u/cred", 0600);
    mkf ("u/sub/x", 0600);
    fake_owner (P ("u"), 4001);
    fake_owner (P ("u/sub"), 4001);
    fake_owner (P ("u/cred"), 4001);
    fake_owner (P ("u/sub/x"), 4001);
    ufd = passes (P ("u"), dir);
    assert_true ((fd = tier_trust_openat (ufd, P ("u"), "cred", &file, &error))
                 >= 0);
    close (fd);
    if ((fd = tier_trust_openat (ufd, P ("u"), "sub/x", &file, &error)) < 0)
        fail_msg ("%s", error.text);
    close (fd);
    /* a file open to others */
    file.why = &why;
    assert_int_equal (chmod (P ("u/cred"), 0640), 0);
    assert_int_equal (tier_trust_openat (ufd, P ("u"), "cred", &file, &error),
                      -1);
    assert_int_equal (why, TIER_TRUST_MODE);
    assert_int_equal (chmod (P ("u/cred"), 0604), 0);
    assert_int_equal (tier_trust_openat (ufd, P ("u"), "cred", &file, &error),
                      -1);
    assert_int_equal (why, TIER_TRUST_MODE);
    assert_int_equal (chmod (P ("u/cred"), 0400), 0);
    assert_true ((fd = tier_trust_openat (ufd, P ("u"), "cred", &file, &error))
                 >= 0);
    close (fd);
    /* the wrong owner, named */
    file.uid = 4002;
    assert_int_equal (tier_trust_openat (ufd, P ("u"), "cred", &file, &error),
                      -1);
    assert_int_equal (why, TIER_TRUST_OWNER);
    assert_non_null (strstr (error.text, "owned by uid 4001, not 4002"));
    file.uid = 4001;
    /* a middle directory someone else owns, or others may write */
    fake_owner (P ("u/sub"), 4002);
    assert_int_equal (tier_trust_openat (ufd, P ("u"), "sub/x", &file, &error),
                      -1);
    assert_int_equal (errno, EPERM);
    assert_int_equal (why, TIER_TRUST_PARENT);
    fakes[nfakes - 1].uid = 4001;
    assert_int_equal (chmod (P ("u/sub"), 0730), 0);
    assert_int_equal (tier_trust_openat (ufd, P ("u"), "sub/x", &file, &error),
                      -1);
    assert_int_equal (why, TIER_TRUST_PARENT);
    assert_int_equal (chmod (P ("u/sub"), 0750), 0); /* read is no harm */
    if ((fd = tier_trust_openat (ufd, P ("u"), "sub/x", &file, &error)) < 0)
        fail_msg ("%s", error.text);
    close (fd);
    close (ufd);
    /* the directory itself: its mode, and its type */
    assert_int_equal (chmod (P ("u"), 0750), 0);
    refused (P ("u"), dir, EPERM, TIER_TRUST_MODE);
    assert_int_equal (chmod (P ("u"), 0700), 0);
    refused (P ("u"), file, EPERM, TIER_TRUST_TYPE);
}

/* .create: the last component made with exactly its mode; missing
 * parents only with .parents; what exists is kept as it is */
static void test_create (void **state)
{
    struct tier_trust d = { .kind = TIER_TRUST_ROOT_DIR, .create = 0755 };
    struct tier_trust f = { .kind = TIER_TRUST_ROOT_FILE,
                            .create = 0640,
                            .flags = O_WRONLY | O_APPEND };
    struct stat st;
    int fd;

    (void) state;
    umask (077); /* mkdir's 0755 would be 0700 */
    passes_close (P ("c1"), d);
    assert_int_equal (stat (P ("c1"), &st), 0);
    assert_true (S_ISDIR (st.st_mode));
    assert_int_equal (st.st_mode & 07777, 0755);
    umask (022);
    assert_int_equal (chmod (P ("c1"), 0700), 0);
    passes_close (P ("c1"), d); /* an existing one is not changed */
    assert_int_equal (stat (P ("c1"), &st), 0);
    assert_int_equal (st.st_mode & 07777, 0700);
    /* parents */
    refused (P ("c2/x/y"), d, ENOENT, 0);
    assert_int_equal (stat (P ("c2"), &st), -1);
    d.parents = true;
    passes_close (P ("c2/x/y"), d);
    assert_int_equal (stat (P ("c2/x"), &st), 0);
    assert_true (S_ISDIR (st.st_mode));
    assert_int_equal (st.st_mode & 07777, 0755);
    assert_int_equal (stat (P ("c2/x/y"), &st), 0);
    assert_true (S_ISDIR (st.st_mode));
    /* a file */
    fd = passes (P ("c1/log"), f);
    assert_int_equal (write (fd, "z\n", 2), 2);
    close (fd);
    assert_int_equal (stat (P ("c1/log"), &st), 0);
    assert_true (S_ISREG (st.st_mode));
    assert_int_equal (st.st_mode & 07777, 0640);
    assert_int_equal (st.st_size, 2);
    fd = passes (P ("c1/log"), f); /* appended to, not truncated */
    close (fd);
    assert_int_equal (stat (P ("c1/log"), &st), 0);
    assert_int_equal (st.st_size, 2);
}

/* USER_PRIVATE made by root: given to uid:gid (root only) */
static void test_create_user (void **state)
{
    struct tier_trust u = { .kind = TIER_TRUST_USER_PRIVATE,
                            .uid = 4001,
                            .gid = 4002,
                            .create = 0700,
                            .flags = O_DIRECTORY };
    tier_error_t error;
    struct stat st;
    int ufd, fd;

    (void) state;
    if (geteuid () != 0)
        skip ();
    ufd = passes (P ("ud"), u);
    assert_int_equal (stat (P ("ud"), &st), 0);
    assert_int_equal (st.st_uid, 4001);
    assert_int_equal (st.st_gid, 4002);
    assert_int_equal (st.st_mode & 07777, 0700);
    u.parents = true;
    if ((fd = tier_trust_openat (ufd, P ("ud"), "p/q", &u, &error)) < 0)
        fail_msg ("%s", error.text);
    close (fd);
    close (ufd);
    assert_int_equal (stat (P ("ud/p"), &st), 0);
    assert_int_equal (st.st_uid, 4001);
    assert_int_equal (st.st_mode & 07777, 0700);
    assert_int_equal (stat (P ("ud/p/q"), &st), 0);
    assert_int_equal (st.st_uid, 4001);
}

/* tier_trust_openat: beneath the descriptor, not the working directory;
 * each directory on the way under the kind's own rule (no sticky
 * exception there) */
static void test_openat (void **state)
{
    struct tier_trust t = root_file;
    enum tier_trust_why why;
    tier_error_t error;
    char cwd[512];
    int dfd, fd;

    (void) state;
    mkd ("a", 0755);
    mkd ("a/b", 0755);
    mkf ("a/b/f", 0644);
    assert_non_null (getcwd (cwd, sizeof (cwd)));
    assert_true ((dfd = open (top, O_PATH | O_DIRECTORY)) >= 0);
    assert_int_equal (chdir ("/"), 0);
    openat_reset ();
    if ((fd = tier_trust_openat (dfd, top, "a/b/f", &t, &error)) < 0)
        fail_msg ("%s", error.text);
    close (fd);
    assert_int_equal (oa.first_dirfd, dfd);
    assert_int_equal (oa.followed, 0);
    t.why = &why;
    assert_int_equal (chmod (P ("a"), 01777), 0);
    assert_int_equal (tier_trust_openat (dfd, top, "a/b/f", &t, &error), -1);
    assert_int_equal (errno, EPERM);
    assert_int_equal (why, TIER_TRUST_PARENT);
    assert_non_null (strstr (error.text, P ("a")));
    assert_int_equal (chmod (P ("a"), 0755), 0);
    fake_owner (P ("a/b"), 4321);
    assert_int_equal (tier_trust_openat (dfd, top, "a/b/f", &t, &error), -1);
    assert_int_equal (why, TIER_TRUST_PARENT);
    fakes[nfakes - 1].uid = 0;
    assert_true ((fd = tier_trust_openat (dfd, top, "a/b/f", &t, &error)) >= 0);
    close (fd);
    assert_int_equal (why, 0);
    close (dfd);
    assert_int_equal (chdir (cwd), 0);
}

/* tier_trust_check on a descriptor; a pass clears .why */
static void test_check (void **state)
{
    enum tier_trust_why why = TIER_TRUST_MODE;
    struct tier_trust t = { .kind = TIER_TRUST_ROOT_FILE, .why = &why };
    tier_error_t error;
    int fd;

    (void) state;
    mkf ("f", 0644);
    assert_true ((fd = open (P ("f"), O_RDONLY)) >= 0);
    assert_int_equal (tier_trust_check (fd, "f", &t, &error), 0);
    assert_int_equal (why, 0);
    assert_int_equal (fchmod (fd, 0646), 0);
    assert_int_equal (tier_trust_check (fd, "f", &t, &error), -1);
    assert_int_equal (errno, EPERM);
    assert_int_equal (why, TIER_TRUST_MODE);
    assert_non_null (strstr (error.text, "f: writable by group or others"));
    t.kind = (enum tier_trust_kind) 0;
    assert_int_equal (tier_trust_check (fd, "f", &t, &error), -1);
    assert_int_equal (errno, EINVAL);
    close (fd);
}

static void test_safe_parent (void **state)
{
    struct stat st = { .st_mode = S_IFDIR | 0755, .st_uid = 0 };

    (void) state;
    assert_true (tier_trust_safe_parent (&st));
    st.st_mode = S_IFDIR | 01777;
    assert_true (tier_trust_safe_parent (&st));
    st.st_mode = S_IFDIR | 0777;
    assert_false (tier_trust_safe_parent (&st));
    st.st_mode = S_IFDIR | 0775;
    assert_false (tier_trust_safe_parent (&st));
    st.st_mode = S_IFDIR | 0755;
    st.st_uid = 4321;
    assert_false (tier_trust_safe_parent (&st));
    st.st_mode = S_IFREG | 0755;
    st.st_uid = 0;
    assert_false (tier_trust_safe_parent (&st));
}

int main (void)
{
#define T(f) cmocka_unit_test_setup_teardown (f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T (test_root_dir), T (test_owner),       T (test_mode),
        T (test_parents),  T (test_symlinks),    T (test_bad_paths),
        T (test_deny),     T (test_root_file),   T (test_user_private),
        T (test_create),   T (test_create_user), T (test_openat),
        T (test_check),    T (test_safe_parent),
    };
#undef T
    return UNIT_RUN (tests);
}
