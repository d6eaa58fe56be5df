/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* bblock.c - the cross-node lock of one fetch on the burst buffer (see
 * bblock.h)
 *
 * Owns the lock file's format, the waiter's rules for breaking a lock
 * and the holder's heartbeat thread.  Calls libc, pthreads and
 * lib/clock only.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "bblock.h"
#include "holder.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

void bblock_init (struct bblock *l, int dirfd, const char *name,
                  const char *node, const char *boot, uint64_t stale_s,
                  uint64_t wait_s)
{
    memset (l, 0, sizeof (*l));
    l->dirfd = dirfd;
    (void) snprintf (l->name, sizeof (l->name), "%s", name);
    l->node = node;
    l->boot = boot;
    l->stale_s = stale_s ? stale_s : 1;
    l->wait_s = wait_s ? wait_s : 1;
    /* holders of this name left by an earlier agent are ended */
    {
        int fd = open ("/proc/self/comm", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read (fd, l->comm, sizeof (l->comm) - 1) : -1;
        l->comm[n > 0 ? n : 0] = '\0';
        l->comm[strcspn (l->comm, "\n")] = '\0';
        if (fd >= 0)
            close (fd);
    }
    l->fd = -1;
}

int bblock_holder_read (int dfd, const char *name, struct bblock_holder *h,
                        struct timespec *mtime, char *raw, size_t rawsize)
{
    int fd = openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    ssize_t n;

    memset (h, 0, sizeof (*h));
    raw[0] = '\0';
    if (fd < 0)
        return -1;
    if (fstat (fd, &st) < 0 || (n = read (fd, raw, rawsize - 1)) < 0) {
        int e = errno;
        close (fd);
        errno = e;
        return -1;
    }
    close (fd);
    raw[n] = '\0';
    *mtime = st.st_mtim;
    if (sscanf (raw, "node=%63s boot=%63s pid=%ld start=%llu", h->node, h->boot,
                &h->pid, &h->start)
        != 4)
        h->node[0] = '\0'; /* unknown holder: heartbeat only */
    return 0;
}

/* What a waiter has seen of the holder: its text and heartbeat, and
 * when (by the waiter's clock) they last changed. */
struct seen {
    int64_t ms; /* 0: nothing seen yet */
    struct timespec mtime;
    char raw[BBLOCK_HOLDER_MAX];
};

/* Is the holder h (text raw, heartbeat mt) gone? */
static bool holder_stale (const struct bblock *l, const struct bblock_holder *h,
                          const char *raw, const struct timespec *mt,
                          struct seen *s)
{
    int64_t now;

    /* this node: a previous boot, or a process that is gone */
    if (!strcmp (h->node, l->node)
        && (strcmp (h->boot, l->boot)
            || tier_proc_start ((pid_t) h->pid) != h->start))
        return true;
    /* alive on this node: a process of our name that an earlier agent
     * left is ended by pidfd (then gone at the next look) */
    if (!strcmp (h->node, l->node) && l->comm[0]) {
        int pfd = holder_end_orphan ((pid_t) h->pid, h->start, l->comm);
        if (pfd >= 0)
            close (pfd);
    }
    now = tier_now_ms ();
    if (!s->ms || strcmp (raw, s->raw) || mt->tv_sec != s->mtime.tv_sec
        || mt->tv_nsec != s->mtime.tv_nsec) {
        /* the heartbeat moved: the holder lives */
        s->ms = now;
        s->mtime = *mt;
        (void) snprintf (s->raw, sizeof (s->raw), "%s", raw);
        return false;
    }
    return now - s->ms >= (int64_t) l->stale_s * 1000;
}

/* Rename the lock away (only the one seen goes: a new one keeps its
 * name) and remove it. */
static void lock_break (struct bblock *l, unsigned n)
{
    char away[BBLOCK_NAME_MAX + 96];

    (void) snprintf (away, sizeof (away), "%s.broken.%s.%ld.%u", l->name,
                     l->node, (long) getpid (), n);
    if (renameat (l->dirfd, l->name, l->dirfd, away) == 0)
        (void) unlinkat (l->dirfd, away, 0);
}

static void sleep_ms (int64_t ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

    nanosleep (&ts, NULL);
}

int bblock_take (struct bblock *l, char *err, size_t errsize)
{
    int64_t deadline = tier_now_ms () + (int64_t) l->wait_s * 1000;
    int64_t backoff = BACKOFF_MIN_MS;
    struct seen seen = { .ms = 0 };
    unsigned broken = 0;

    (void) snprintf (l->mine, sizeof (l->mine),
                     "node=%s boot=%s pid=%ld start=%llu\n", l->node, l->boot,
                     (long) getpid (), tier_proc_start (getpid ()));
    for (;;) {
        struct bblock_holder h;
        struct timespec mt;
        char raw[BBLOCK_HOLDER_MAX];

        if (l->done && l->done (l->done_arg))
            return 1;
        l->fd = openat (l->dirfd, l->name,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0600);
        if (l->fd >= 0) {
            size_t len = strlen (l->mine);
            ssize_t n = write (l->fd, l->mine, len);

            if (n == (ssize_t) len)
                return 0;
            /* a full BB: without its text the lock is nobody's (release
             * would not know it and leave it until BBLockStale), so it
             * goes at once and the fetch fails */
            int e = n < 0 ? errno : ENOSPC;
            (void) unlinkat (l->dirfd, l->name, 0);
            close (l->fd);
            l->fd = -1;
            (void) snprintf (err, errsize, "lock %s: %s", l->name,
                             strerror (e));
            errno = e;
            return -1;
        }
        if (errno != EEXIST) {
            int e = errno;
            (void) snprintf (err, errsize, "lock %s: %s", l->name,
                             strerror (e));
            errno = e;
            return -1;
        }
        if (bblock_holder_read (l->dirfd, l->name, &h, &mt, raw, sizeof (raw))
            < 0)
            continue; /* gone meanwhile: try again */
        if (holder_stale (l, &h, raw, &mt, &seen)) {
            lock_break (l, broken++);
            seen.ms = 0;
            continue;
        }
        if (tier_now_ms () > deadline) {
            (void) snprintf (err, errsize, "waited %llu s for the copy by %s",
                             (unsigned long long) l->wait_s,
                             h.node[0] ? h.node : "another node");
            errno = ETIMEDOUT;
            return -1;
        }
        sleep_ms (backoff);
        if (backoff < BACKOFF_MAX_MS)
            backoff *= 2;
    }
}

static void *heartbeat_run (void *arg)
{
    struct bblock *l = arg;
    unsigned period = l->stale_s >= 8 ? (unsigned) (l->stale_s / 4) : 1;

    while (!l->stop) {
        for (unsigned i = 0; i < period * 10 && !l->stop; i++)
            sleep_ms (100);
        if (!l->stop)
            (void) futimens (l->fd, NULL);
    }
    return NULL;
}

int bblock_beat (struct bblock *l)
{
    int rc;

    if (l->fd < 0 || l->beating) {
        errno = EINVAL;
        return -1;
    }
    l->stop = 0;
    if ((rc = pthread_create (&l->thread, NULL, heartbeat_run, l)) != 0) {
        errno = rc;
        return -1;
    }
    l->beating = true;
    return 0;
}

void bblock_release (struct bblock *l)
{
    struct bblock_holder h;
    struct timespec mt;
    char raw[BBLOCK_HOLDER_MAX];

    if (l->beating) {
        l->stop = 1;
        (void) pthread_join (l->thread, NULL);
        l->beating = false;
    }
    if (l->fd < 0)
        return;
    /* remove the lock, if it is still ours */
    if (bblock_holder_read (l->dirfd, l->name, &h, &mt, raw, sizeof (raw)) == 0
        && !strcmp (raw, l->mine))
        (void) unlinkat (l->dirfd, l->name, 0);
    close (l->fd);
    l->fd = -1;
}
