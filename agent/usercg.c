/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* usercg.c - the work tierd does for a user, charged to that user's cgroup
 *
 * (usercg.h says what and why.)  The hierarchies are found once, in the
 * agent; each child joins its user's cgroups by path with plain system
 * calls, since it is a fork of a threaded process.  The directories
 * under cgroupfs are the kernel's, made and owned by root: nothing a
 * user controls is on these paths.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "usercg.h"

#define TREES_MAX 8
#define NAME_ROOM 48 /* "/uid_4294967295/memory.limit_in_bytes" */

struct tree {
    char base[PATH_MAX - NAME_ROOM]; /* MOUNT/UserCgroupDir */
    unsigned ctrls;                  /* USERCG_*; on v2, those enabled */
};

static struct tree trees[TREES_MAX];
static int ntrees;
static uint64_t mem_limit;
static unsigned tasks_limit;

static const struct {
    const char *name;
    unsigned bit;
} v1_ctrls[] = {
    { "cpu", USERCG_CPU },       { "cpuacct", USERCG_CPUACCT },
    { "memory", USERCG_MEMORY }, { "pids", USERCG_PIDS },
    { "blkio", USERCG_BLKIO },
};

/* v2's names of the same (cpu and cpuacct are one there) */
static const struct {
    const char *name;
    unsigned bit;
} v2_ctrls[] = {
    { "cpu", USERCG_CPU | USERCG_CPUACCT },
    { "memory", USERCG_MEMORY },
    { "pids", USERCG_PIDS },
    { "io", USERCG_BLKIO },
};

/* ----------------------------------------------------------- parsing */

/* The n-th space-separated field of line (from 0): its start, its
 * length in *flen; NULL if there are fewer. */
static const char *field (const char *line, int n, size_t *flen)
{
    const char *p = line;

    for (;;) {
        size_t l = strcspn (p, " \n");
        if (n-- == 0) {
            *flen = l;
            return l ? p : NULL;
        }
        if (p[l] != ' ')
            return NULL;
        p += l + 1;
    }
}

/* mountinfo's escapes: \040 (space), \011, \012, \134 */
static int unescape (const char *s, size_t n, char *out, size_t len)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3'
            && s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0'
            && s[i + 3] <= '7') {
            c = (char) ((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8
                        + (s[i + 3] - '0'));
            i += 3;
        }
        if (o + 1 >= len)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

static bool field_is (const char *f, size_t flen, const char *word)
{
    return flen == strlen (word) && !memcmp (f, word, flen);
}

int usercg_parse_mount (const char *line, char *mnt, size_t len,
                        unsigned *ctrls)
{
    const char *f, *mp;
    size_t flen, mplen;
    int n = 6;

    /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - TYPE SRC SUPER */
    if (!(mp = field (line, 4, &mplen)))
        return -1;
    while ((f = field (line, n, &flen)) && !field_is (f, flen, "-"))
        n++;
    if (!f || !(f = field (line, n + 1, &flen)))
        return -1;
    *ctrls = 0;
    if (field_is (f, flen, "cgroup2"))
        *ctrls = USERCG_V2;
    else if (field_is (f, flen, "cgroup")) {
        const char *o = field (line, n + 3, &flen), *end;
        if (!o)
            return -1;
        end = o + flen;
        while (o < end) {
            size_t l = strcspn (o, ", \n");
            if (o + l > end)
                l = (size_t) (end - o);
            for (size_t i = 0; i < sizeof (v1_ctrls) / sizeof (v1_ctrls[0]);
                 i++)
                if (field_is (o, l, v1_ctrls[i].name))
                    *ctrls |= v1_ctrls[i].bit;
            o += l + 1;
        }
    }
    if (!*ctrls)
        return -1;
    return unescape (mp, mplen, mnt, len);
}

/* ------------------------------------------------------ in the agent */

/* The controllers of a v2 directory's FILE (cgroup.controllers or
 * cgroup.subtree_control) as USERCG_* bits. */
static unsigned v2_read (const char *dir, const char *file)
{
    char path[PATH_MAX], buf[512];
    unsigned bits = 0;
    ssize_t n;
    int fd;

    (void) snprintf (path, sizeof (path), "%s/%s", dir, file);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    buf[n > 0 ? n : 0] = '\0';
    for (char *save, *w = strtok_r (buf, " \n", &save); w;
         w = strtok_r (NULL, " \n", &save))
        for (size_t i = 0; i < sizeof (v2_ctrls) / sizeof (v2_ctrls[0]); i++)
            if (!strcmp (w, v2_ctrls[i].name))
                bits |= v2_ctrls[i].bit;
    return bits;
}

/* v2: enable in dir's subtree what it has (each on its own: one that
 * cannot be enabled leaves the others) */
static void v2_enable (const char *dir)
{
    unsigned have = v2_read (dir, "cgroup.controllers");
    char path[PATH_MAX], word[16];
    int fd;

    (void) snprintf (path, sizeof (path), "%s/cgroup.subtree_control", dir);
    for (size_t i = 0; i < sizeof (v2_ctrls) / sizeof (v2_ctrls[0]); i++) {
        if (!(have & v2_ctrls[i].bit)
            || (fd = open (path, O_WRONLY | O_CLOEXEC)) < 0)
            continue;
        int n = snprintf (word, sizeof (word), "+%s", v2_ctrls[i].name);
        (void) !write (fd, word, (size_t) n);
        close (fd);
    }
}

/* mkdir -p of MOUNT/DIR (DIR absolute), enabling v2's controllers on the
 * way down; 0 or -1 with errno */
static int make_base (const char *mnt, const char *dir, bool v2, char *base,
                      size_t len)
{
    size_t n = (size_t) snprintf (base, len, "%s", mnt);
    const char *p = dir;

    if (n >= len)
        return errno = ENAMETOOLONG, -1;
    while (*p) {
        size_t l;
        while (*p == '/')
            p++;
        if (!(l = strcspn (p, "/")))
            break;
        if (v2)
            v2_enable (base);
        if (n + 1 + l >= len)
            return errno = ENAMETOOLONG, -1;
        base[n++] = '/';
        memcpy (base + n, p, l);
        base[n += l] = '\0';
        if (mkdir (base, 0755) < 0 && errno != EEXIST)
            return -1;
        p += l;
    }
    if (v2)
        v2_enable (base);
    return 0;
}

/* The user cgroups an earlier agent left, empty now: removed (a busy one
 * stays: rmdir says EBUSY). */
static void sweep (const char *base)
{
    DIR *d = opendir (base);
    struct dirent *de;

    if (!d)
        return;
    while ((de = readdir (d)))
        if (!strncmp (de->d_name, "uid_", 4))
            (void) unlinkat (dirfd (d), de->d_name, AT_REMOVEDIR);
    closedir (d);
}

static bool have_ctrls (unsigned ctrls)
{
    for (int i = 0; i < ntrees; i++)
        if ((trees[i].ctrls & ctrls) == ctrls && !(ctrls & USERCG_V2))
            return true;
    return false;
}

int usercg_init (const struct tier_conf *conf)
{
    char mnt[PATH_MAX], *line = NULL, list[1024] = "";
    size_t cap = 0, used = 0;
    FILE *f;

    ntrees = 0;
    mem_limit = conf->user_cgroup_memory;
    tasks_limit = conf->user_cgroup_tasks;
    if (!conf->user_cgroup_dir || !conf->user_cgroup_dir[0])
        return 0;
    if (!(f = fopen ("/proc/self/mountinfo", "re"))) {
        tier_log (LOG_WARNING, "user cgroups: /proc/self/mountinfo: %s",
                  strerror (errno));
        return 0;
    }
    while (ntrees < TREES_MAX && getline (&line, &cap, f) > 0) {
        struct tree *t = &trees[ntrees];
        unsigned ctrls;

        if (usercg_parse_mount (line, mnt, sizeof (mnt), &ctrls) < 0
            || have_ctrls (ctrls))
            continue;
        if (ctrls & USERCG_V2 && !v2_read (mnt, "cgroup.controllers"))
            continue; /* a hybrid node's: every controller is v1's */
        if (make_base (mnt, conf->user_cgroup_dir, ctrls & USERCG_V2, t->base,
                       sizeof (t->base))
            < 0) {
            tier_log (LOG_WARNING, "user cgroups: cannot make %s in %s: %s",
                      conf->user_cgroup_dir, mnt, strerror (errno));
            continue;
        }
        t->ctrls = ctrls & USERCG_V2
                       ? USERCG_V2 | v2_read (t->base, "cgroup.subtree_control")
                       : ctrls;
        sweep (t->base);
        ntrees++;
        used += (size_t) snprintf (list + used, sizeof (list) - used, "%s%s",
                                   used ? ", " : "", t->base);
        if (used >= sizeof (list))
            used = sizeof (list) - 1;
    }
    free (line);
    fclose (f);
    if (ntrees)
        tier_log (LOG_INFO,
                  "the work done for a user is charged to their cgroup "
                  "uid_UID in %s (%u tasks, memory %s)",
                  list, tasks_limit, mem_limit ? "limited" : "not limited");
    else
        tier_log (LOG_INFO, "user cgroups: no cgroup hierarchy to use for "
                            "UserCgroupDir");
    return ntrees;
}

/* ----------------------------------------------------- in the child */

/* dst = a followed by b; false if it does not fit */
static bool cat2 (char *dst, size_t len, const char *a, const char *b)
{
    size_t la = strlen (a), lb = strlen (b);

    if (la + lb >= len)
        return false;
    memcpy (dst, a, la);
    memcpy (dst + la, b, lb + 1);
    return true;
}

/* the decimal digits of v, in buf (at least 21 bytes) */
static const char *utoa (uint64_t v, char *buf)
{
    char *p = buf + 20;

    *p = '\0';
    do
        *--p = (char) ('0' + v % 10);
    while (v /= 10);
    return p;
}

static void put (const char *dir, const char *file, const char *value)
{
    char path[PATH_MAX];
    int fd;

    if (!cat2 (path, sizeof (path), dir, file)
        || (fd = open (path, O_WRONLY | O_CLOEXEC)) < 0)
        return;
    (void) !write (fd, value, strlen (value));
    close (fd);
}

/* A user's new cgroup: the user's limits (the weights stay the
 * default, the same for every user). */
static void set_limits (const struct tree *t, const char *dir)
{
    char num[24];

    if (mem_limit && t->ctrls & USERCG_MEMORY)
        put (dir,
             t->ctrls & USERCG_V2 ? "/memory.max" : "/memory.limit_in_bytes",
             utoa (mem_limit, num));
    if (tasks_limit && t->ctrls & USERCG_PIDS)
        put (dir, "/pids.max", utoa (tasks_limit, num));
}

int usercg_join (uid_t uid)
{
    char name[32] = "/uid_", num[24], dir[PATH_MAX], procs[PATH_MAX];
    int joined = 0;

    if (!ntrees)
        return 0;
    (void) cat2 (name, sizeof (name), "/uid_", utoa (uid, num));
    for (int i = 0; i < ntrees; i++) {
        if (!cat2 (dir, sizeof (dir), trees[i].base, name)
            || !cat2 (procs, sizeof (procs), dir, "/cgroup.procs"))
            continue;
        /* twice: another agent of this host may sweep it meanwhile */
        for (int attempt = 0; attempt < 2; attempt++) {
            int fd;
            if (mkdir (dir, 0755) == 0)
                set_limits (&trees[i], dir);
            else if (errno != EEXIST)
                break;
            if ((fd = open (procs, O_WRONLY | O_CLOEXEC)) >= 0) {
                bool ok = write (fd, "0", 1) == 1;
                close (fd);
                if (ok) {
                    joined++;
                    break;
                }
            }
            if (errno != ENOENT)
                break;
        }
    }
    return joined;
}
