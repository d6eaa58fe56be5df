/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* usercg.c - the work tier does for a user, charged to that user's cgroup
 *
 * (usercg.h says what and why.)  The hierarchies are found once, in the
 * agent (and in the epilog, for its keep copy); each child joins its
 * user's cgroups by path with plain system calls, since it is a fork of
 * a threaded process.
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

#include "usercg.h"

static const struct {
    const char *name;
    unsigned bit;
} v1_ctrls[] = {
    { "cpu", TIER_USERCG_CPU },       { "cpuacct", TIER_USERCG_CPUACCT },
    { "memory", TIER_USERCG_MEMORY }, { "pids", TIER_USERCG_PIDS },
    { "blkio", TIER_USERCG_BLKIO },
};

/* v2's names of the same (cpu and cpuacct are one there) */
static const struct {
    const char *name;
    unsigned bit;
} v2_ctrls[] = {
    { "cpu", TIER_USERCG_CPU | TIER_USERCG_CPUACCT },
    { "memory", TIER_USERCG_MEMORY },
    { "pids", TIER_USERCG_PIDS },
    { "io", TIER_USERCG_BLKIO },
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

int tier_usercg_parse_mount (const char *line, char *mnt, size_t len,
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
        *ctrls = TIER_USERCG_V2;
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

/* ------------------------------------------------- finding them */

/* The controllers of a v2 directory's FILE (cgroup.controllers or
 * cgroup.subtree_control) as TIER_USERCG_* bits. */
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

static bool have_ctrls (const struct tier_usercg *u, unsigned ctrls)
{
    for (int i = 0; i < u->ntrees; i++)
        if ((u->trees[i].ctrls & ctrls) == ctrls && !(ctrls & TIER_USERCG_V2))
            return true;
    return false;
}

/* base exists, a directory */
static bool is_dir (const char *path)
{
    struct stat st;

    return stat (path, &st) == 0 && S_ISDIR (st.st_mode);
}

int tier_usercg_find (struct tier_usercg *u, const struct tier_conf *conf,
                      bool make, char *text, size_t len)
{
    char mnt[PATH_MAX], *line = NULL;
    size_t cap = 0, used = 0;
    FILE *f;

    memset (u, 0, sizeof (*u));
    if (len)
        text[0] = '\0';
    u->mem_limit = conf->user_cgroup_memory;
    u->tasks_limit = conf->user_cgroup_tasks;
    if (!conf->user_cgroup_dir || !conf->user_cgroup_dir[0])
        return 0;
    if (!(f = fopen ("/proc/self/mountinfo", "re"))) {
        (void) snprintf (text, len, "/proc/self/mountinfo: %s",
                         strerror (errno));
        return 0;
    }
    while (u->ntrees < TIER_USERCG_TREES && getline (&line, &cap, f) > 0) {
        struct tier_usercg_tree *t = &u->trees[u->ntrees];
        unsigned ctrls;
        int rc;

        if (tier_usercg_parse_mount (line, mnt, sizeof (mnt), &ctrls) < 0
            || have_ctrls (u, ctrls))
            continue;
        if (ctrls & TIER_USERCG_V2 && !v2_read (mnt, "cgroup.controllers"))
            continue; /* a hybrid node's: every controller is v1's */
        if (make)
            rc = make_base (mnt, conf->user_cgroup_dir, ctrls & TIER_USERCG_V2,
                            t->base, sizeof (t->base));
        else if ((size_t) snprintf (t->base, sizeof (t->base), "%s%s", mnt,
                                    conf->user_cgroup_dir)
                 >= sizeof (t->base))
            rc = (errno = ENAMETOOLONG, -1);
        else
            rc = is_dir (t->base) ? 0 : (errno = ENOENT, -1);
        if (rc < 0) {
            if (used < len)
                used += (size_t) snprintf (text + used, len - used,
                                           "%scannot %s %s in %s: %s",
                                           used ? "; " : "",
                                           make ? "make" : "find",
                                           conf->user_cgroup_dir, mnt,
                                           strerror (errno));
            continue;
        }
        t->ctrls = ctrls & TIER_USERCG_V2
                       ? TIER_USERCG_V2
                             | v2_read (t->base, "cgroup.subtree_control")
                       : ctrls;
        u->ntrees++;
    }
    free (line);
    fclose (f);
    return u->ntrees;
}

void tier_usercg_sweep (const struct tier_usercg *u)
{
    for (int i = 0; i < u->ntrees; i++)
        sweep (u->trees[i].base);
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
static void set_limits (const struct tier_usercg *u,
                        const struct tier_usercg_tree *t, const char *dir)
{
    char num[24];

    if (u->mem_limit && t->ctrls & TIER_USERCG_MEMORY)
        put (dir,
             t->ctrls & TIER_USERCG_V2 ? "/memory.max"
                                       : "/memory.limit_in_bytes",
             utoa (u->mem_limit, num));
    if (u->tasks_limit && t->ctrls & TIER_USERCG_PIDS)
        put (dir, "/pids.max", utoa (u->tasks_limit, num));
}

int tier_usercg_join (const struct tier_usercg *u, uid_t uid)
{
    char name[32] = "/uid_", num[24], dir[PATH_MAX], procs[PATH_MAX];
    int joined = 0;

    if (!u->ntrees)
        return 0;
    (void) cat2 (name, sizeof (name), "/uid_", utoa (uid, num));
    for (int i = 0; i < u->ntrees; i++) {
        if (!cat2 (dir, sizeof (dir), u->trees[i].base, name)
            || !cat2 (procs, sizeof (procs), dir, "/cgroup.procs"))
            continue;
        /* twice: another agent of this host may sweep it meanwhile */
        for (int attempt = 0; attempt < 2; attempt++) {
            int fd;
            if (mkdir (dir, 0755) == 0)
                set_limits (u, &u->trees[i], dir);
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
