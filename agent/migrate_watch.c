/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate_watch.c - stage-out: the agent's inotify watch of the write
 * caches
 *
 * The agent watches the write caches (as root: their parents are root's
 * 0700) and tells each migrator what was closed or created: dirty for a
 * file closed after writing or renamed into place, scan for a new
 * directory (then watched too).  Every directory is watched through its
 * descriptor, opened with O_NOFOLLOW at each step: the agent is root and
 * the tree is the user's.
 *
 * Owns the inotify descriptor and the table of watches; calls the loop
 * (server_watch) and migrate_tell.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "lib/paths.h"
#include "migrate.h"

struct awatch {
    int wd;
    struct mig *g;
    int k;
    char *rel;
};

static int ifd = -1;
static struct awatch *aws;
static int naws, caws;

/* Watch the directory dfd (relative path rel in cache k of g) through
 * its descriptor: the name was never resolved through a symlink.
 */
static void aw_add (struct mig *g, int k, int dfd, const char *rel)
{
    char path[64];
    int wd;

    /* the magic link leads to the directory itself (no IN_DONT_FOLLOW:
     * that would watch the link) */
    (void) snprintf (path, sizeof (path), "/proc/self/fd/%d", dfd);
    if ((wd = inotify_add_watch (ifd, path,
                                 IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
                                     | IN_ONLYDIR | IN_EXCL_UNLINK))
        < 0)
        return;
    for (int i = 0; i < naws; i++)
        if (aws[i].wd == wd)
            return;
    if (naws == caws) {
        int n = caws ? caws * 2 : 64;
        struct awatch *w = realloc (aws, (size_t) n * sizeof (*w));
        if (!w)
            return;
        aws = w;
        caws = n;
    }
    if (!(aws[naws].rel = strdup (rel))) {
        (void) inotify_rm_watch (ifd, wd);
        return;
    }
    aws[naws].wd = wd;
    aws[naws].g = g;
    aws[naws].k = k;
    naws++;
}

/* Watch a directory of the write cache and every directory below it. */
static void aw_walk (struct mig *g, int k, int dfd, const char *rel, int depth)
{
    char sub[PATH_MAX];
    struct dirent *de;
    DIR *d;

    aw_add (g, k, dfd, rel);
    if (!(d = migrate_dir_open (dfd, depth)))
        return;
    while ((de = migrate_dir_next (d, rel, sub, sizeof (sub)))) {
        int sfd;
        if (de->d_type != DT_DIR
            || (sfd = openat (dirfd (d), de->d_name,
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
                   < 0)
            continue;
        aw_walk (g, k, sfd, sub, depth + 1);
        close (sfd);
    }
    closedir (d);
}

void migrate_watch_tree (struct agent *a, struct mig *g, int k, const char *rel)
{
    int rootfd, fd;

    if ((rootfd = migrate_outbox_open (a->conf, g->job_id, g->restart, k)) < 0)
        return;
    fd = rel[0] ? tier_path_open_beneath (rootfd, rel, O_RDONLY | O_DIRECTORY,
                                          0, TIER_BENEATH_NO_SYMLINKS)
                : dup (rootfd);
    if (fd >= 0) {
        aw_walk (g, k, fd, rel, 0);
        close (fd);
    }
    close (rootfd);
}

void migrate_watch_drop (struct mig *g)
{
    for (int i = 0; i < naws;) {
        if (aws[i].g == g) {
            (void) inotify_rm_watch (ifd, aws[i].wd);
            free (aws[i].rel);
            aws[i] = aws[--naws];
        }
        else
            i++;
    }
}

/* One event of watch i. */
static void on_event (struct agent *a, int i, const struct inotify_event *ev)
{
    struct awatch *w = &aws[i];
    struct migmsg m = { .k = w->k };
    char rel[PATH_MAX];

    if (ev->mask & IN_IGNORED) {
        free (w->rel);
        aws[i] = aws[--naws];
        return;
    }
    if (!ev->len)
        return;
    (void) snprintf (rel, sizeof (rel), "%s%s%s", w->rel, w->rel[0] ? "/" : "",
                     ev->name);
    m.rel = rel;
    if (ev->mask & IN_ISDIR) {
        /* a new directory: watch it; what it already holds was written
         * before the watch */
        struct mig *g = w->g;
        migrate_watch_tree (a, g, m.k, rel);
        m.type = MIGMSG_SCAN;
        (void) migrate_tell (g, &m);
    }
    else if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) {
        m.type = MIGMSG_DIRTY;
        (void) migrate_tell (w->g, &m);
    }
}

static void on_inotify (struct agent *a)
{
    char buf[65536]
        __attribute__ ((aligned (__alignof__(struct inotify_event))));
    ssize_t n;

    while ((n = read (ifd, buf, sizeof (buf))) > 0) {
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *) p;
            p += sizeof (*ev) + ev->len;
            for (int i = 0; i < naws; i++)
                if (aws[i].wd == ev->wd) {
                    on_event (a, i, ev);
                    break;
                }
        }
    }
}

int migrate_watch_init (struct agent *a)
{
    if ((ifd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC)) < 0
        || server_watch (a, ifd, on_inotify) < 0)
        return -1;
    return 0;
}
