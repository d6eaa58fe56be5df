/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_usercg.c - per-user cgroups: mountinfo lines, and a real join */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/usercg.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int parse (const char *line, char *mnt, unsigned *ctrls)
{
    return tier_usercg_parse_mount (line, mnt, PATH_MAX, ctrls);
}

static void test_parse_v1 (void **state)
{
    char mnt[PATH_MAX];
    unsigned c;

    assert_int_equal (parse ("35 25 0:30 / /sys/fs/cgroup/cpu rw,nosuid "
                             "shared:14 - cgroup cgroup rw,cpu\n",
                             mnt, &c),
                      0);
    assert_string_equal (mnt, "/sys/fs/cgroup/cpu");
    assert_int_equal (c, TIER_USERCG_CPU);
    /* combined, no optional field, several of them */
    assert_int_equal (parse ("36 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw - "
                             "cgroup cgroup rw,cpu,cpuacct",
                             mnt, &c),
                      0);
    assert_string_equal (mnt, "/sys/fs/cgroup/cpu,cpuacct");
    assert_int_equal (c, TIER_USERCG_CPU | TIER_USERCG_CPUACCT);
    assert_int_equal (parse ("37 25 0:32 / /cg/m rw shared:1 master:2 - "
                             "cgroup none rw,memory,pids,blkio\n",
                             mnt, &c),
                      0);
    assert_int_equal (c, TIER_USERCG_MEMORY | TIER_USERCG_PIDS
                             | TIER_USERCG_BLKIO);
    /* "cpuset" and "name=systemd" are not "cpu" */
    assert_int_equal (parse ("38 25 0:33 / /sys/fs/cgroup/cpuset rw - cgroup "
                             "cgroup rw,cpuset\n",
                             mnt, &c),
                      -1);
    assert_int_equal (parse ("39 25 0:34 / /sys/fs/cgroup/systemd rw - cgroup "
                             "cgroup rw,xattr,name=systemd\n",
                             mnt, &c),
                      -1);
    assert_int_equal (parse ("40 25 0:35 / /sys/fs/cgroup/freezer rw - cgroup "
                             "cgroup rw,freezer\n",
                             mnt, &c),
                      -1);
    (void) state;
}

static void test_parse_other (void **state)
{
    char mnt[PATH_MAX];
    unsigned c;

    assert_int_equal (parse ("41 25 0:36 / /sys/fs/cgroup/unified rw shared:5 "
                             "- cgroup2 cgroup2 rw,nsdelegate\n",
                             mnt, &c),
                      0);
    assert_string_equal (mnt, "/sys/fs/cgroup/unified");
    assert_int_equal (c, TIER_USERCG_V2);
    /* the mount point's escapes */
    assert_int_equal (parse ("42 25 0:37 / /mnt/a\\040b\\134c rw - cgroup2 "
                             "none rw\n",
                             mnt, &c),
                      0);
    assert_string_equal (mnt, "/mnt/a b\\c");
    /* other file systems, and lines that are not whole */
    assert_int_equal (parse ("22 1 8:1 / / rw,relatime shared:1 - ext4 "
                             "/dev/sda1 rw\n",
                             mnt, &c),
                      -1);
    assert_int_equal (parse ("43 25 0:38 / /x rw shared:1\n", mnt, &c), -1);
    assert_int_equal (parse ("43 25 0:38 / /x rw - cgroup\n", mnt, &c), -1);
    assert_int_equal (parse ("43 25", mnt, &c), -1);
    assert_int_equal (parse ("", mnt, &c), -1);
    /* a mount point longer than the room for it */
    assert_int_equal (tier_usercg_parse_mount ("1 2 0:1 / /a/long/path rw - "
                                               "cgroup2 x rw",
                                               mnt, 5, &c),
                      -1);
    (void) state;
}

/* The cgroup line of /proc/PID/cgroup for a v1 controller, or "". */
static void cgroup_of (pid_t pid, const char *ctrl, char *out, size_t len)
{
    char path[64], line[1024];
    FILE *f;

    out[0] = '\0';
    snprintf (path, sizeof (path), "/proc/%d/cgroup", (int) pid);
    if (!(f = fopen (path, "r")))
        return;
    while (fgets (line, sizeof (line), f)) {
        char *a = strchr (line, ':'), *b = a ? strchr (a + 1, ':') : NULL;
        if (!b)
            continue;
        *b = '\0';
        for (char *save, *w = strtok_r (a + 1, ",", &save); w;
             w = strtok_r (NULL, ",", &save))
            if (!strcmp (w, ctrl)) {
                snprintf (out, len, "%s", b + 1);
                out[strcspn (out, "\n")] = '\0';
            }
    }
    fclose (f);
}

static int read_file (const char *path, char *buf, size_t len)
{
    int fd = open (path, O_RDONLY);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = read (fd, buf, len - 1);
    close (fd);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn (buf, "\n")] = '\0';
    return n > 0 ? 0 : -1;
}

/* As root, on a node with v1's cpuacct, memory and pids: a child joins
 * uid 4242's cgroups, made with the limits; the parent stays where it
 * is; a second init removes the empty one. */
static void test_join_real (void **state)
{
    struct tier_conf *conf;
    struct tier_usercg u;
    char why[512], dir[64], want[128], got[512], path[512];
    const char *ctrls[] = { "cpuacct", "memory", "pids" };
    int status;
    pid_t pid;

    if (geteuid () != 0 || access ("/sys/fs/cgroup/pids/cgroup.procs", F_OK)
        || access ("/sys/fs/cgroup/memory/cgroup.procs", F_OK)
        || access ("/sys/fs/cgroup/cpuacct/cgroup.procs", F_OK))
        skip ();
    snprintf (dir, sizeof (dir), "/tier-unit.%d", (int) getpid ());
    assert_non_null (conf = tier_conf_create ("n1"));
    free (conf->user_cgroup_dir);
    assert_non_null (conf->user_cgroup_dir = strdup (dir));
    conf->user_cgroup_memory = 64 << 20;
    conf->user_cgroup_tasks = 7;
    /* not made yet: nothing to find but why */
    assert_int_equal (tier_usercg_find (&u, conf, false, why, sizeof (why)), 0);
    assert_non_null (strstr (why, "cannot find /tier-unit."));
    assert_true (tier_usercg_find (&u, conf, true, why, sizeof (why)) >= 3);
    assert_string_equal (why, "");
    if ((pid = fork ()) == 0)
        _exit (tier_usercg_join (&u, 4242) >= 3 ? 0 : 1);
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    /* a child that stays: where it is */
    if ((pid = fork ()) == 0) {
        (void) tier_usercg_join (&u, 4242);
        pause ();
        _exit (0);
    }
    snprintf (want, sizeof (want), "%s/uid_4242", dir);
    for (int tries = 0; tries < 100; tries++) {
        cgroup_of (pid, "pids", got, sizeof (got));
        if (!strcmp (got, want))
            break;
        usleep (10000);
    }
    for (size_t i = 0; i < 3; i++) {
        cgroup_of (pid, ctrls[i], got, sizeof (got));
        assert_string_equal (got, want);
        cgroup_of (getpid (), ctrls[i], got, sizeof (got));
        assert_string_not_equal (got, want);
    }
    snprintf (path, sizeof (path), "/sys/fs/cgroup/pids%s/pids.max", want);
    assert_int_equal (read_file (path, got, sizeof (got)), 0);
    assert_string_equal (got, "7");
    snprintf (path, sizeof (path),
              "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", want);
    assert_int_equal (read_file (path, got, sizeof (got)), 0);
    assert_string_equal (got, "67108864");
    /* in use: a sweep leaves it; found again without making */
    assert_true (tier_usercg_find (&u, conf, false, why, sizeof (why)) >= 3);
    tier_usercg_sweep (&u);
    snprintf (path, sizeof (path), "/sys/fs/cgroup/pids%s", want);
    assert_int_equal (access (path, F_OK), 0);
    kill (pid, SIGKILL);
    assert_int_equal (waitpid (pid, &status, 0), pid);
    /* empty: the next one removes it */
    for (int tries = 0; tries < 100 && access (path, F_OK) == 0; tries++) {
        tier_usercg_sweep (&u);
        usleep (10000);
    }
    assert_int_not_equal (access (path, F_OK), 0);
    for (size_t i = 0; i < 3; i++) {
        snprintf (path, sizeof (path), "/sys/fs/cgroup/%s%s", ctrls[i], dir);
        (void) rmdir (path);
    }
    snprintf (path, sizeof (path), "/sys/fs/cgroup/cpu%s", dir);
    (void) rmdir (path);
    snprintf (path, sizeof (path), "/sys/fs/cgroup/blkio%s", dir);
    (void) rmdir (path);
    /* off: nothing to join */
    free (conf->user_cgroup_dir);
    assert_non_null (conf->user_cgroup_dir = strdup (""));
    assert_int_equal (tier_usercg_find (&u, conf, true, why, sizeof (why)), 0);
    assert_string_equal (why, "");
    assert_int_equal (tier_usercg_join (&u, 4242), 0);
    tier_conf_destroy (conf);
    (void) state;
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_parse_v1),
        cmocka_unit_test (test_parse_other),
        cmocka_unit_test (test_join_real),
    };

    return cmocka_run_group_tests (tests, NULL, NULL);
}
