/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_jobns.c - the job namespace, overlays and binds (as root) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/jobns.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char top[64], base[128], data[128];

static int setup (void **state)
{
    snprintf (top, sizeof (top), "/tmp/test_jobns.XXXXXX");
    if (!mkdtemp (top))
        return -1;
    snprintf (base, sizeof (base), "%s/ns", top);
    snprintf (data, sizeof (data), "%s/data", top);
    return mkdir (data, 0755);
}

static int teardown (void **state)
{
    char cmd[4096];

    snprintf (cmd, sizeof (cmd), "umount -R '%s' 2>/dev/null; "
              "umount -l '%s' 2>/dev/null; rm -rf '%s'", base, base, top);
    return system (cmd) == 0 ? 0 : -1;
}

/* runs in the namespace: a tmpfs on data, and a file in it */
static int put_tmpfs (void *arg, tier_error_t *error)
{
    char path[1024];
    int fd;

    if (mount ("tmpfs", data, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") < 0)
        return tier_errprintf (error, "mount: %s", strerror (errno));
    snprintf (path, sizeof (path), "%s/inside", data);
    if ((fd = open (path, O_CREAT | O_WRONLY, 0644)) < 0)
        return tier_errprintf (error, "create: %s", strerror (errno));
    close (fd);
    return 0;
}

static int fail_fn (void *arg, tier_error_t *error)
{
    return tier_errprintf (error, "failing on purpose %d", 42);
}

static int sees_inside (void *arg, tier_error_t *error)
{
    char path[1024];

    snprintf (path, sizeof (path), "%s/inside", data);
    if (access (path, F_OK) < 0)
        return tier_errprintf (error, "does not see it");
    return 0;
}

static void test_lifecycle (void **state)
{
    tier_error_t error;
    pid_t pids[16], child;
    char path[1024];
    int n;

    assert_int_equal (tier_ns_base_prepare (base, &error), 0);
    assert_int_equal (tier_ns_base_prepare (base, &error), 0); /* twice */
    assert_false (tier_ns_exists (base, 77));
    assert_int_equal (tier_ns_create (base, 77, 1000, false, &error), 0);
    assert_true (tier_ns_exists (base, 77));
    /* work inside it; the host never sees it */
    assert_int_equal (tier_ns_run (base, 77, put_tmpfs, NULL, &error), 0);
    snprintf (path, sizeof (path), "%s/inside", data);
    assert_int_equal (access (path, F_OK), -1);
    /* a second child joining sees what the first made */
    assert_int_equal (tier_ns_run (base, 77, sees_inside, NULL, &error), 0);
    /* errors come back from the child */
    assert_int_equal (tier_ns_run (base, 77, fail_fn, NULL, &error), -1);
    assert_string_equal (error.text, "failing on purpose 42");
    /* another job has its own */
    assert_int_equal (tier_ns_create (base, 78, 1000, false, &error), 0);
    assert_int_equal (tier_ns_run (base, 78, sees_inside, NULL, &error), -1);

    /* a process left inside is found and killed at teardown */
    assert_int_equal (tier_ns_pids (base, 77, pids, 16), 0);
    if ((child = fork ()) == 0) {
        tier_error_t e;
        if (tier_ns_enter (base, 77, &e) < 0)
            _exit (1);
        pause ();
        _exit (0);
    }
    for (int i = 0; i < 100 && tier_ns_pids (base, 77, pids, 16) < 1; i++)
        usleep (10000);
    n = tier_ns_pids (base, 77, pids, 16);
    assert_int_equal (n, 1);
    assert_int_equal (pids[0], child);
    assert_int_equal (tier_ns_teardown (base, 77, 2000, &error), 0);
    waitpid (child, NULL, 0);
    assert_false (tier_ns_exists (base, 77));
    snprintf (path, sizeof (path), "%s/77", base);
    assert_int_equal (access (path, F_OK), -1);
    /* tearing down twice, or a job never seen, is fine */
    assert_int_equal (tier_ns_teardown (base, 77, 100, &error), 0);
    assert_int_equal (tier_ns_teardown (base, 99, 100, &error), 0);

    /* fresh: a requeued job gets a new namespace */
    assert_int_equal (tier_ns_run (base, 78, put_tmpfs, NULL, &error), 0);
    assert_int_equal (tier_ns_create (base, 78, 1000, true, &error), 0);
    assert_int_equal (tier_ns_run (base, 78, sees_inside, NULL, &error), -1);
    {
        uint32_t ids[8];
        assert_int_equal (tier_ns_list (base, ids, 8), 1);
        assert_int_equal (ids[0], 78);
    }
    assert_int_equal (tier_ns_teardown (base, 78, 100, &error), 0);
}

static void test_rmtree (void **state)
{
    tier_error_t error;
    char cmd[4096];
    int fd;

    /* a tree with a symlink to a directory outside, and a mount inside */
    snprintf (cmd, sizeof (cmd),
              "mkdir -p %s/t/a/b %s/keep && echo k > %s/keep/file && "
              "ln -s %s/keep %s/t/a/link && echo x > %s/t/a/b/f && "
              "mkfifo %s/t/a/fifo", data, data, data, data, data, data, data);
    assert_int_equal (system (cmd), 0);
    assert_true ((fd = open (data, O_RDONLY | O_DIRECTORY)) >= 0);
    assert_int_equal (tier_rmtree_at (fd, "t", &error), 0);
    snprintf (cmd, sizeof (cmd), "test ! -e %s/t && test -f %s/keep/file",
              data, data);
    assert_int_equal (system (cmd), 0);
    /* a mount point inside is left alone */
    snprintf (cmd, sizeof (cmd), "mkdir -p %s/m/mnt", data);
    assert_int_equal (system (cmd), 0);
    snprintf (cmd, sizeof (cmd), "%s/m/mnt", data);
    {
        /* in a child with a private namespace, so the tests stay in ours */
        pid_t pid = fork ();
        int status;
        if (pid == 0) {
            if (unshare (CLONE_NEWNS) < 0
                || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0
                || mount ("tmpfs", cmd, "tmpfs", 0, "size=64k") < 0)
                _exit (2);
            if (tier_rmtree_at (fd, "m", &error) != -1 || errno != EBUSY
                || access (cmd, F_OK) < 0)
                _exit (1);
            _exit (0);
        }
        assert_true (pid > 0);
        waitpid (pid, &status, 0);
        assert_true (WIFEXITED (status));
        assert_int_equal (WEXITSTATUS (status), 0);
    }
    close (fd);
}

/* overlays from descriptors: a hostile directory name is just a name */
static int do_overlay (void *arg, tier_error_t *error)
{
    const char *lower = arg;
    char k[512];
    int lfd, kfd, ufd, wfd, rc;

    snprintf (k, sizeof (k), "%s/k", top);
    mkdir (k, 0700);
    if ((kfd = open (k, O_RDONLY | O_DIRECTORY)) < 0)
        return tier_errprintf (error, "open: %s", strerror (errno));
    rc = tier_ovl_dirs (kfd, &ufd, &wfd, error);
    close (kfd);
    if (rc < 0)
        return rc;
    if ((lfd = open (lower, O_PATH | O_DIRECTORY)) < 0)
        return tier_errprintf (error, "open: %s", strerror (errno));
    rc = tier_ovl_mount (lfd, ufd, wfd, lfd, error);
    close (lfd);
    close (ufd);
    close (wfd);
    return rc;
}

static int check_overlay (void *arg, tier_error_t *error)
{
    const char *lower = arg;
    char path[1024], buf[64] = "";
    FILE *f;
    int fd;

    snprintf (path, sizeof (path), "%s/new", lower);
    if ((fd = open (path, O_CREAT | O_WRONLY, 0644)) < 0)
        return tier_errprintf (error, "write in overlay: %s",
                               strerror (errno));
    close (fd);
    snprintf (path, sizeof (path), "%s/old", lower);
    if (!(f = fopen (path, "r")) || !fgets (buf, sizeof (buf), f))
        return tier_errprintf (error, "read lower file");
    fclose (f);
    if (strcmp (buf, "old\n"))
        return tier_errprintf (error, "wrong content %s", buf);
    /* mountinfo says nosuid,nodev */
    if (system ("grep -q ' overlay .*' /proc/self/mountinfo && "
                "grep ' - overlay ' /proc/self/mountinfo | grep -q nosuid,nodev")
        != 0)
        return tier_errprintf (error, "overlay is not nosuid,nodev");
    /* the overlay options are set, not left to the kernel's defaults:
     * mountinfo shows an option only where it differs from the default
     */
    if (system ("grep ' - overlay ' /proc/self/mountinfo "
                "| grep -q 'redirect_dir=on'") != 0)
        return tier_errprintf (error, "overlay without redirect_dir=on");
    if (system ("grep ' - overlay ' /proc/self/mountinfo "
                "| grep -qE '(index|metacopy)=on|xino=(on|auto)'") == 0)
        return tier_errprintf (error, "overlay with index, metacopy or xino");
    return 0;
}

static void test_overlay (void **state)
{
    tier_error_t error;
    char lower[512], cmd[4096], path[1024];

    snprintf (lower, sizeof (lower), "%s/x,upperdir=:y\\z", data);
    snprintf (cmd, sizeof (cmd), "mkdir -p '%s' && echo old > '%s/old'",
              lower, lower);
    assert_int_equal (system (cmd), 0);
    if (tier_ns_base_prepare (base, &error) < 0
        || tier_ns_create (base, 90, 0, true, &error) < 0)
        fail_msg ("%s", error.text);
    if (tier_ns_run (base, 90, do_overlay, lower, &error) < 0)
        fail_msg ("%s", error.text);
    if (tier_ns_run (base, 90, check_overlay, lower, &error) < 0)
        fail_msg ("%s", error.text);
    /* the lower itself is untouched; the new file is in the upper */
    snprintf (path, sizeof (path), "%s/new", lower);
    assert_int_equal (access (path, F_OK), -1);
    snprintf (path, sizeof (path), "%s/k/upper/new", top);
    assert_int_equal (access (path, F_OK), 0);
    /* never a second overlay on that upper: not in this namespace, nor
     * in another (a leftover on a tier that is not a fresh tmpfs) */
    assert_int_equal (tier_ns_run (base, 90, do_overlay, lower, &error), -1);
    assert_non_null (strstr (error.text, "never two overlays"));
    if (tier_ns_create (base, 92, 0, true, &error) < 0)
        fail_msg ("%s", error.text);
    assert_int_equal (tier_ns_run (base, 92, do_overlay, lower, &error), -1);
    assert_non_null (strstr (error.text, "work exists already"));
    assert_int_equal (tier_ns_teardown (base, 92, 100, &error), 0);
    assert_int_equal (tier_ns_teardown (base, 90, 100, &error), 0);
    /* a leftover upper alone is refused too */
    snprintf (cmd, sizeof (cmd), "rm -rf '%s/k/work'", top);
    assert_int_equal (system (cmd), 0);
    {
        char k[512];
        int kfd, ufd = -1, wfd = -1;
        snprintf (k, sizeof (k), "%s/k", top);
        assert_true ((kfd = open (k, O_RDONLY | O_DIRECTORY)) >= 0);
        assert_int_equal (tier_ovl_dirs (kfd, &ufd, &wfd, &error), -1);
        assert_int_equal (errno, EEXIST);
        assert_non_null (strstr (error.text, "upper exists already"));
        close (kfd);
    }
}

static int do_bind (void *arg, tier_error_t *error)
{
    char src[512], dst[512], f[1024];
    int sfd, dfd, rc;

    snprintf (src, sizeof (src), "%s/src", top);
    snprintf (dst, sizeof (dst), "%s/dst", data);
    sfd = open (src, O_PATH | O_DIRECTORY);
    dfd = open (dst, O_PATH | O_DIRECTORY);
    if (sfd < 0 || dfd < 0)
        return tier_errprintf (error, "open");
    rc = tier_bind_ro (sfd, dfd, error);
    close (sfd);
    close (dfd);
    if (rc < 0)
        return rc;
    snprintf (f, sizeof (f), "%s/replica", dst);
    if (access (f, R_OK) < 0)
        return tier_errprintf (error, "replica not visible");
    snprintf (f, sizeof (f), "%s/w", dst);
    if (open (f, O_CREAT | O_WRONLY, 0644) >= 0 || errno != EROFS)
        return tier_errprintf (error, "bind is writable");
    return 0;
}

static void test_bind_ro (void **state)
{
    tier_error_t error;
    char cmd[4096];

    snprintf (cmd, sizeof (cmd), "mkdir -p %s/src %s/dst && "
              "echo r > %s/src/replica", top, data, top);
    assert_int_equal (system (cmd), 0);
    if (tier_ns_base_prepare (base, &error) < 0
        || tier_ns_create (base, 91, 0, true, &error) < 0)
        fail_msg ("%s", error.text);
    if (tier_ns_run (base, 91, do_bind, NULL, &error) < 0)
        fail_msg ("%s", error.text);
    assert_int_equal (tier_ns_teardown (base, 91, 100, &error), 0);
}

static void test_refusals (void **state)
{
    tier_error_t error;
    char cmd[4096];

    /* a base someone else could write is refused */
    snprintf (cmd, sizeof (cmd), "mkdir -p %s && chmod 777 %s", base, base);
    assert_int_equal (system (cmd), 0);
    assert_int_equal (tier_ns_base_prepare (base, &error), -1);
    assert_non_null (strstr (error.text, "root-owned"));
    rmdir (base);
    assert_int_equal (symlink ("/etc", base), 0);
    assert_int_equal (tier_ns_base_prepare (base, &error), -1);
    unlink (base);
    /* joining a job with no namespace fails clearly */
    assert_int_equal (tier_ns_base_prepare (base, &error), 0);
    assert_int_equal (tier_ns_run (base, 5, sees_inside, NULL, &error), -1);
    assert_non_null (strstr (error.text, "No such file"));
}

/* tier roots: made root 0700; a root or a parent someone else owns or
 * may rename entries in, or a symlink, is refused */
static void test_root_open (void **state)
{
    tier_error_t error;
    char root[512], parent[128], link[512];
    struct stat st;
    int fd;

    snprintf (parent, sizeof (parent), "%s/p/q", top);
    snprintf (root, sizeof (root), "%s/root", parent);
    if ((fd = tier_root_open (root, &error)) < 0)
        fail_msg ("%s", error.text);
    assert_int_equal (fstat (fd, &st), 0);
    close (fd);
    assert_true (S_ISDIR (st.st_mode) && st.st_uid == 0
                 && (st.st_mode & 07777) == 0700);
    assert_int_equal (stat (parent, &st), 0);
    assert_int_equal (st.st_mode & 07777, 0755);
    /* made by someone else */
    assert_int_equal (chown (root, 12345, 12345), 0);
    assert_int_equal (tier_root_open (root, &error), -1);
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (error.text, "root-owned"));
    assert_int_equal (chown (root, 0, 0), 0);
    assert_int_equal (chmod (root, 0755), 0);
    assert_int_equal (tier_root_open (root, &error), -1);
    assert_int_equal (chmod (root, 0700), 0);
    /* a parent someone else owns: they could swap the root */
    assert_int_equal (chown (parent, 12345, 12345), 0);
    assert_int_equal (tier_root_open (root, &error), -1);
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (error.text, "parent"));
    assert_int_equal (chown (parent, 0, 0), 0);
    /* a parent others may write: refused unless sticky (/dev/shm) */
    assert_int_equal (chmod (parent, 0777), 0);
    assert_int_equal (tier_root_open (root, &error), -1);
    assert_non_null (strstr (error.text, "parent"));
    assert_int_equal (chmod (parent, 01777), 0);
    if ((fd = tier_root_open (root, &error)) < 0)
        fail_msg ("%s", error.text);
    close (fd);
    /* a symlink, as the root or as a parent */
    snprintf (link, sizeof (link), "%s/l", top);
    assert_int_equal (symlink (parent, link), 0);
    snprintf (link, sizeof (link), "%s/l/root", top);
    assert_int_equal (tier_root_open (link, &error), -1);
    assert_non_null (strstr (error.text, "symlink"));
    snprintf (link, sizeof (link), "%s/l2", parent);
    assert_int_equal (symlink (root, link), 0);
    assert_int_equal (tier_root_open (link, &error), -1);
    assert_int_equal (errno, EPERM);
    snprintf (link, sizeof (link), "%s/../x", parent);
    assert_int_equal (tier_root_open (link, &error), -1);
    assert_int_equal (errno, EINVAL);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown (test_rmtree, setup, teardown),
        cmocka_unit_test_setup_teardown (test_overlay, setup, teardown),
        cmocka_unit_test_setup_teardown (test_bind_ro, setup, teardown),
        cmocka_unit_test_setup_teardown (test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown (test_root_open, setup, teardown),
    };
    if (geteuid () != 0) {
        printf ("1..1\nok 1 # SKIP needs root\n");
        return 0;
    }
    return UNIT_RUN (tests);
}
