/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_cred.c - the credential rules of lib/cred.h, against a fake kernel
 *
 * Every call lib/cred.c makes to change or read credentials is caught at
 * link time (-Wl,--wrap=setresuid,...): the test sees which calls come
 * in which order with which ids and groups, makes any of them fail, and
 * makes the kernel lie (an id or a group left over) to see the checks
 * afterwards catch it.  Nothing changes the test's own credentials, so
 * it runs as any user.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/cred.h"
#include "unit.h"

#include <errno.h>
#include <grp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NGROUPS_FAKE (TIER_CRED_GROUPS_MAX + 8)

/* The fake kernel: this process's ids, groups and fs ids. */
static struct {
    uid_t ruid, euid, suid, fsuid;
    gid_t rgid, egid, sgid, fsgid;
    gid_t groups[NGROUPS_FAKE];
    int ngroups;
    char calls[16][24]; /* the calls made, in order */
    int ncalls;
    const char *fail;      /* this call fails ... */
    int fail_errno;        /* ... with this errno */
    bool lie_uid, lie_gid; /* get*id report a saved id of 0 */
    bool extra;            /* setgroups keeps a group too: */
    gid_t extra_gid;
    bool drop_one;   /* setgroups loses the last one */
    bool fs_ignored; /* setfsuid changes nothing */
    int lookup_n;    /* getgrouplist: how many groups */
} k;

/* A test's own syscall: one cred.c does not make passes through. */
long __real_syscall (long number, ...);

int __wrap_setgroups (size_t n, const gid_t *groups);
int __wrap_setresuid (uid_t r, uid_t e, uid_t s);
int __wrap_setresgid (gid_t r, gid_t e, gid_t s);
int __wrap_getresuid (uid_t *r, uid_t *e, uid_t *s);
int __wrap_getresgid (gid_t *r, gid_t *e, gid_t *s);
int __wrap_getgroups (int size, gid_t list[]);
int __wrap_setfsuid (uid_t uid);
int __wrap_setfsgid (gid_t gid);
long __wrap_syscall (long number, ...);
int __wrap_getgrouplist (const char *user, gid_t group, gid_t *groups,
                         int *ngroups);

static void kernel_reset (void)
{
    memset (&k, 0, sizeof (k));
    k.groups[0] = 0; /* root, with root's group */
    k.ngroups = 1;
}

/* Record a call; true if it is to fail. */
static bool called (const char *name)
{
    if (k.ncalls < 16)
        (void) snprintf (k.calls[k.ncalls++], sizeof (k.calls[0]), "%s", name);
    if (k.fail && !strcmp (k.fail, name)) {
        errno = k.fail_errno;
        return true;
    }
    return false;
}

static int set_groups (const char *name, size_t n, const gid_t *groups)
{
    if (called (name))
        return -1;
    if (n > NGROUPS_FAKE - 1) {
        errno = EINVAL;
        return -1;
    }
    if (n > 0)
        memcpy (k.groups, groups, n * sizeof (gid_t));
    k.ngroups = (int) n;
    if (k.drop_one && k.ngroups > 0)
        k.ngroups--;
    if (k.extra)
        k.groups[k.ngroups++] = k.extra_gid;
    return 0;
}

int __wrap_setgroups (size_t n, const gid_t *groups)
{
    return set_groups ("setgroups", n, groups);
}

int __wrap_setresuid (uid_t r, uid_t e, uid_t s)
{
    if (called ("setresuid"))
        return -1;
    k.ruid = r, k.euid = e, k.suid = s, k.fsuid = e;
    return 0;
}

int __wrap_setresgid (gid_t r, gid_t e, gid_t s)
{
    if (called ("setresgid"))
        return -1;
    k.rgid = r, k.egid = e, k.sgid = s, k.fsgid = e;
    return 0;
}

int __wrap_getresuid (uid_t *r, uid_t *e, uid_t *s)
{
    if (called ("getresuid"))
        return -1;
    *r = k.ruid, *e = k.euid, *s = k.lie_uid ? 0 : k.suid;
    return 0;
}

int __wrap_getresgid (gid_t *r, gid_t *e, gid_t *s)
{
    if (called ("getresgid"))
        return -1;
    *r = k.rgid, *e = k.egid, *s = k.lie_gid ? 0 : k.sgid;
    return 0;
}

int __wrap_getgroups (int size, gid_t list[])
{
    if (called ("getgroups"))
        return -1;
    if (size == 0)
        return k.ngroups;
    if (size < k.ngroups) {
        errno = EINVAL;
        return -1;
    }
    memcpy (list, k.groups, (size_t) k.ngroups * sizeof (gid_t));
    return k.ngroups;
}

int __wrap_setfsuid (uid_t uid)
{
    uid_t old = k.fsuid;

    if (uid != (uid_t) -1) {
        (void) called ("setfsuid");
        if (!k.fs_ignored)
            k.fsuid = uid;
    }
    return (int) old;
}

int __wrap_setfsgid (gid_t gid)
{
    gid_t old = k.fsgid;

    if (gid != (gid_t) -1) {
        (void) called ("setfsgid");
        if (!k.fs_ignored)
            k.fsgid = gid;
    }
    return (int) old;
}

long __wrap_syscall (long number, ...)
{
    long a[6];
    va_list ap;

    va_start (ap, number);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg (ap, long);
    va_end (ap);
    if (number == SYS_setgroups)
        return set_groups ("SYS_setgroups", (size_t) a[0],
                           (const gid_t *) a[1]);
    return __real_syscall (number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int __wrap_getgrouplist (const char *user, gid_t group, gid_t *groups,
                         int *ngroups)
{
    int n = k.lookup_n;

    (void) user;
    if (n > *ngroups) {
        *ngroups = n;
        return -1;
    }
    for (int i = 0; i < n; i++)
        groups[i] = i == 0 ? group : (gid_t) (5000 + i);
    *ngroups = n;
    return n;
}

/* The order of the calls so far, "a b c". */
static const char *calls (void)
{
    static char buf[16 * 25];

    buf[0] = '\0';
    for (int i = 0; i < k.ncalls; i++) {
        if (i)
            strcat (buf, " ");
        strcat (buf, k.calls[i]);
    }
    return buf;
}

static bool has_group (gid_t g)
{
    for (int i = 0; i < k.ngroups; i++)
        if (k.groups[i] == g)
            return true;
    return false;
}

/* alice: uid 1001, primary group 1001, the job's groups 1001 2001 2002 */
static void alice (struct tier_cred *c)
{
    static const gid_t job[] = { 1001, 2001, 2002 };

    tier_cred_init (c, 1001, 1001);
    assert_int_equal (tier_cred_set_groups (c, job, 3), 0);
}

static int setup (void **state)
{
    (void) state;
    kernel_reset ();
    return 0;
}

static void test_groups (void **state)
{
    static gid_t many[TIER_CRED_GROUPS_MAX + 1];
    const gid_t two[] = { 7, 8 };
    struct tier_cred c;

    (void) state;
    tier_cred_init (&c, 1001, 1001);
    assert_false (tier_cred_has_groups (&c));
    assert_int_equal (tier_cred_set_groups (&c, two, 2), 0);
    assert_true (tier_cred_has_groups (&c));
    assert_int_equal (c.ngroups, 2);
    assert_int_equal (c.groups[1], 8);
    /* an empty list is a list: the job has no supplementary groups */
    assert_int_equal (tier_cred_set_groups (&c, NULL, 0), 0);
    assert_true (tier_cred_has_groups (&c));
    errno = 0;
    assert_int_equal (tier_cred_set_groups (&c, NULL, 2), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_cred_set_groups (&c, two, -1), -1);
    assert_int_equal (errno, EINVAL);
    /* the most it takes, and one more: E2BIG, nothing changed */
    for (int i = 0; i <= TIER_CRED_GROUPS_MAX; i++)
        many[i] = (gid_t) (10000 + i);
    assert_int_equal (tier_cred_set_groups (&c, many, TIER_CRED_GROUPS_MAX), 0);
    assert_int_equal (c.ngroups, TIER_CRED_GROUPS_MAX);
    assert_int_equal (tier_cred_set_groups (&c, two, 2), 0);
    errno = 0;
    assert_int_equal (tier_cred_set_groups (&c, many, TIER_CRED_GROUPS_MAX + 1),
                      -1);
    assert_int_equal (errno, E2BIG);
    assert_int_equal (c.ngroups, 2);
}

static void test_lookup (void **state)
{
    struct tier_cred c;

    (void) state;
    tier_cred_init (&c, 1001, 1001);
    k.lookup_n = 3;
    assert_int_equal (tier_cred_lookup (&c, "alice"), 0);
    assert_int_equal (c.ngroups, 3);
    assert_int_equal (c.groups[0], 1001);
    assert_int_equal (c.groups[2], 5002);
    /* more groups than tier takes: refused, not cut short */
    tier_cred_init (&c, 1001, 1001);
    k.lookup_n = TIER_CRED_GROUPS_MAX + 1;
    errno = 0;
    assert_int_equal (tier_cred_lookup (&c, "alice"), -1);
    assert_int_equal (errno, E2BIG);
    assert_false (tier_cred_has_groups (&c));
    errno = 0;
    assert_int_equal (tier_cred_lookup (&c, ""), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_cred_lookup (&c, NULL), -1);
}

/* DATA: the job's own list, then gid, then uid, then the proof */
static void test_drop_data (void **state)
{
    struct tier_cred c;

    (void) state;
    alice (&c);
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_DATA), 0);
    assert_string_equal (calls (), "setgroups setresgid setresuid "
                                   "getresuid getresgid getgroups");
    assert_int_equal (k.ngroups, 3);
    assert_true (has_group (1001) && has_group (2001) && has_group (2002));
    assert_false (has_group (0));
    assert_true (k.ruid == 1001 && k.euid == 1001 && k.suid == 1001);
    assert_true (k.rgid == 1001 && k.egid == 1001 && k.sgid == 1001);
}

/* OWN: no supplementary group at all, even when the job has some */
static void test_drop_own (void **state)
{
    struct tier_cred c;

    (void) state;
    alice (&c);
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_OWN), 0);
    assert_string_equal (calls (), "setgroups setresgid setresuid "
                                   "getresuid getresgid getgroups");
    assert_int_equal (k.ngroups, 0);
    assert_int_equal (k.egid, 1001);
    assert_int_equal (k.euid, 1001);
    /* and without a list known: OWN needs none */
    kernel_reset ();
    tier_cred_init (&c, 1002, 1003);
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_OWN), 0);
    assert_int_equal (k.ngroups, 0);
    assert_int_equal (k.sgid, 1003);
}

/* DATA with no list: EINVAL before anything changes */
static void test_drop_needs_groups (void **state)
{
    struct tier_cred c;

    (void) state;
    tier_cred_init (&c, 1001, 1001);
    errno = 0;
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_DATA), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (k.ncalls, 0);
    assert_int_equal (k.euid, 0);
    alice (&c);
    assert_int_equal (tier_cred_drop (&c, (enum tier_cred_mode) 99), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (k.ncalls, 0);
}

/* Each call failing: -1 with its errno, and nothing after it is tried */
static void test_drop_failures (void **state)
{
    static const struct {
        const char *fail;
        const char *calls;
    } cases[] = {
        { "setgroups", "setgroups" },
        { "setresgid", "setgroups setresgid" },
        { "setresuid", "setgroups setresgid setresuid" },
        { "getresuid", "setgroups setresgid setresuid getresuid" },
        { "getresgid", "setgroups setresgid setresuid getresuid getresgid" },
    };
    struct tier_cred c;

    (void) state;
    alice (&c);
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        kernel_reset ();
        k.fail = cases[i].fail;
        k.fail_errno = EAGAIN;
        errno = 0;
        assert_int_equal (tier_cred_drop (&c, TIER_CRED_DATA), -1);
        assert_int_equal (errno, EAGAIN);
        assert_string_equal (calls (), cases[i].calls);
    }
    /* getgroups failing: the groups cannot be proven */
    kernel_reset ();
    k.fail = "getgroups";
    k.fail_errno = EFAULT;
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_DATA), -1);
    assert_int_equal (errno, EPERM);
}

/* A kernel that did not do all it was asked: caught afterwards (EPERM) */
static void test_drop_verify (void **state)
{
    struct tier_cred c;

    (void) state;
    alice (&c);
    k.lie_uid = true; /* the saved uid is still root's */
    errno = 0;
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_DATA), -1);
    assert_int_equal (errno, EPERM);
    kernel_reset ();
    k.lie_gid = true; /* the saved gid is still root's */
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_OWN), -1);
    assert_int_equal (errno, EPERM);
    kernel_reset ();
    k.extra = true; /* root's group left over */
    k.extra_gid = 0;
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_DATA), -1);
    assert_int_equal (errno, EPERM);
    kernel_reset ();
    k.extra = true; /* OWN must hold no group at all */
    k.extra_gid = 2001;
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_OWN), -1);
    assert_int_equal (errno, EPERM);
    kernel_reset ();
    k.drop_one = true; /* one of the job's groups missing */
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_DATA), -1);
    assert_int_equal (errno, EPERM);
    /* and the honest kernel passes */
    kernel_reset ();
    assert_int_equal (tier_cred_drop (&c, TIER_CRED_DATA), 0);
}

/* fs ids: groups through the raw syscall (per thread), fsgid, fsuid;
 * leave is the way back to root's file access */
static void test_fs_enter_leave (void **state)
{
    struct tier_cred c;

    (void) state;
    alice (&c);
    assert_int_equal (tier_cred_fs_enter (&c, TIER_CRED_DATA), 0);
    assert_string_equal (calls (), "SYS_setgroups setfsgid setfsuid");
    assert_int_equal (k.fsuid, 1001);
    assert_int_equal (k.fsgid, 1001);
    assert_int_equal (k.ngroups, 3);
    assert_true (has_group (2002));
    /* the real and effective ids stay root's */
    assert_int_equal (k.euid, 0);
    assert_int_equal (k.ruid, 0);
    tier_cred_fs_leave ();
    assert_int_equal (k.fsuid, 0);
    assert_int_equal (k.fsgid, 0);
    assert_int_equal (k.ngroups, 0);
    /* OWN: no groups; and again, the round trip repeats */
    kernel_reset ();
    assert_int_equal (tier_cred_fs_enter (&c, TIER_CRED_OWN), 0);
    assert_int_equal (k.ngroups, 0);
    assert_int_equal (k.fsuid, 1001);
    tier_cred_fs_leave ();
    assert_int_equal (tier_cred_fs_enter (&c, TIER_CRED_DATA), 0);
    assert_int_equal (k.ngroups, 3);
    tier_cred_fs_leave ();
    assert_int_equal (k.fsuid, 0);
    /* DATA with no list: nothing done */
    kernel_reset ();
    tier_cred_init (&c, 1001, 1001);
    assert_int_equal (tier_cred_fs_enter (&c, TIER_CRED_DATA), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (k.ncalls, 0);
}

static void test_fs_enter_failures (void **state)
{
    struct tier_cred c;

    (void) state;
    alice (&c);
    /* the groups refused: -1 with that errno, the ids untouched */
    k.fail = "SYS_setgroups";
    k.fail_errno = EPERM;
    errno = 0;
    assert_int_equal (tier_cred_fs_enter (&c, TIER_CRED_DATA), -1);
    assert_int_equal (errno, EPERM);
    assert_string_equal (calls (), "SYS_setgroups");
    assert_int_equal (k.fsuid, 0);
    /* setfsuid reports nothing: a kernel that ignored it is caught, and
     * what was done is undone */
    kernel_reset ();
    k.fs_ignored = true;
    errno = 0;
    assert_int_equal (tier_cred_fs_enter (&c, TIER_CRED_DATA), -1);
    assert_int_equal (errno, EPERM);
    assert_int_equal (k.ngroups, 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup (test_groups, setup),
        cmocka_unit_test_setup (test_lookup, setup),
        cmocka_unit_test_setup (test_drop_data, setup),
        cmocka_unit_test_setup (test_drop_own, setup),
        cmocka_unit_test_setup (test_drop_needs_groups, setup),
        cmocka_unit_test_setup (test_drop_failures, setup),
        cmocka_unit_test_setup (test_drop_verify, setup),
        cmocka_unit_test_setup (test_fs_enter_leave, setup),
        cmocka_unit_test_setup (test_fs_enter_failures, setup),
    };
    return UNIT_RUN (tests);
}
