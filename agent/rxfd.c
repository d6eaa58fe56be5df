/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* rxfd.c - descriptors clients send: checked without touching their file,
 * closed off the loop
 *
 * A client's descriptor may be a file of any file system the client can
 * reach, its own FUSE mount included, whose daemon need never answer: a
 * close(2) of it sends FUSE_FLUSH and sleeps until the answer comes (not
 * even SIGKILL ends that wait), an fstat may send FUSE_GETATTR.  So the
 * loop never closes, reads or stats a received descriptor before this
 * file said its mount is the site's (server.c asks as each descriptor
 * arrives, and refuses the request of one that is not), and gives up
 * every descriptor it does not use to a closer thread of its own: a
 * close that hangs pins only that thread, and a user with closes pending
 * gets no more descriptors accepted (server.c reads his connections
 * without room for control data: the kernel drops what he sends without
 * a flush).  So a user pins at most TIER_MSG_FDS_MAX threads (one
 * message's descriptors) at a time.  A descriptor given up leaves the
 * descriptor table before the loop goes on: a child forked later must
 * not inherit it (its own close would hang).
 *
 * A descriptor's mount is the site's when the client's mount namespace
 * has it (a job's namespace has copies of the node's mounts, with mount
 * ids of their own; the kernel's internal mounts -- pipes, sockets --
 * are in no mountinfo) and no user made it: a FUSE mount by fusermount3
 * says user_id=UID, not 0, in its super options; in a user namespace
 * other than the agent's, where that namespace's root mounts FUSE with
 * user_id=0, no FUSE mount is.  The mount id comes from
 * /proc/self/fdinfo/N, the mounts from /proc/PID/mountinfo of the
 * client that connected (SO_PEERCRED); neither asks a file system.
 * Mount ids are unique while mounted, so another process's table cannot
 * vouch for a user's mount.  Module map: agent.h.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "agent.h"

/* ------------------------------------------------------- the closers */

/* Each descriptor given up gets a detached thread of its own that
 * closes it; per uid, how many are still inside close. */
struct user_closing {
    uid_t uid;
    int n;
    struct user_closing *next;
};

struct close_job {
    uid_t uid;
    int fd;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static struct user_closing *users;
static int nthreads;

static struct user_closing *user_of (uid_t uid, bool make)
{
    struct user_closing *u;

    for (u = users; u; u = u->next)
        if (u->uid == uid)
            return u;
    if (!make || !(u = calloc (1, sizeof (*u))))
        return NULL;
    u->uid = uid;
    u->next = users;
    users = u;
    return u;
}

static void *closer_run (void *arg)
{
    struct close_job *j = arg;
    struct user_closing *u;

    (void) close (j->fd); /* may sleep as long as its FS wants */
    pthread_mutex_lock (&mu);
    if ((u = user_of (j->uid, false)))
        u->n--;
    nthreads--;
    pthread_cond_broadcast (&idle);
    pthread_mutex_unlock (&mu);
    free (j);
    return NULL;
}

void rxfd_drop (uid_t uid, int fd)
{
    struct timespec ts = { 0, 100000 }; /* 0.1 ms */
    struct user_closing *u;
    struct close_job *j;
    pthread_attr_t attr;
    pthread_t t;
    int rc = -1;

    if (fd < 0)
        return;
    pthread_mutex_lock (&mu);
    if ((j = malloc (sizeof (*j))) && (u = user_of (uid, true))) {
        j->uid = uid;
        j->fd = fd;
        (void) pthread_attr_init (&attr);
        (void) pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
        (void) pthread_attr_setstacksize (&attr, 256 * 1024);
        if ((rc = pthread_create (&t, &attr, closer_run, j)) == 0) {
            u->n++;
            nthreads++;
        }
        (void) pthread_attr_destroy (&attr);
    }
    pthread_mutex_unlock (&mu);
    if (rc != 0) {
        free (j);
        /* kept open (a leak) rather than closed on the loop */
        tier_log (LOG_ERR,
                  "descriptor %d of uid %u not closed: no closer "
                  "thread (%s)",
                  fd, (unsigned) uid, rc > 0 ? strerror (rc) : "out of memory");
        return;
    }
    /* A fork copies the descriptor table, and a child that closes its copy
     * (every child closes what it does not keep) would hang in its flush:
     * wait, briefly, until the closer has taken it out of the table (the
     * first thing close does; another thread may reuse the number at
     * once, which only makes this wait its bound). */
    for (int i = 0; i < 1000 && fcntl (fd, F_GETFD) >= 0; i++)
        nanosleep (&ts, NULL);
}

bool rxfd_busy (uid_t uid)
{
    struct user_closing *u;
    bool busy;

    pthread_mutex_lock (&mu);
    busy = (u = user_of (uid, false)) && u->n > 0;
    pthread_mutex_unlock (&mu);
    return busy;
}

int rxfd_closing (int *nusers)
{
    int n = 0, k = 0;

    pthread_mutex_lock (&mu);
    for (struct user_closing *u = users; u; u = u->next)
        if (u->n > 0) {
            n += u->n;
            k++;
        }
    pthread_mutex_unlock (&mu);
    if (nusers)
        *nusers = k;
    return n;
}

int rxfd_wait_idle (int timeout_ms)
{
    struct timespec ts;
    int rc = 0;

    (void) clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long) (timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int left;

    pthread_mutex_lock (&mu);
    while (nthreads > 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait (&idle, &mu, &ts);
    left = nthreads;
    pthread_mutex_unlock (&mu);
    return left > 0 ? -1 : 0;
}

/* ------------------------------------------------------- the mounts */

/* Field k (0-based, space-separated) of line, or NULL. */
static const char *field (const char *line, int k, size_t *len)
{
    const char *p = line;

    for (int i = 0; i < k && p; i++)
        if ((p = strchr (p, ' ')))
            p++;
    if (!p || !*p)
        return NULL;
    *len = strcspn (p, " \n");
    return p;
}

static bool is_fuse (const char *fstype, size_t flen)
{
    return (flen == 4 && !strncmp (fstype, "fuse", 4))
           || (flen > 5 && !strncmp (fstype, "fuse.", 5))
           || (flen == 7 && !strncmp (fstype, "fuseblk", 7));
}

/* A FUSE mount's user_id= (from its super options), or -1. */
static long fuse_owner (const char *super, size_t slen)
{
    for (const char *u = super;
         u < super + slen && (u = strstr (u, "user_id=")) && u < super + slen;
         u++)
        if (u == super || u[-1] == ',')
            return strtol (u + 8, NULL, 10);
    return -1;
}

/* Whether pid lives in the agent's user namespace. */
static bool same_userns (pid_t pid)
{
    char path[64];
    struct stat a, b;

    (void) snprintf (path, sizeof (path), "/proc/%d/ns/user", (int) pid);
    return stat ("/proc/self/ns/user", &a) == 0 && stat (path, &b) == 0
           && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The mount id of descriptor fd, from /proc/self/fdinfo. */
static int mount_id_of (int fd)
{
    char path[64], buf[1024], *p;
    ssize_t n;
    int f;

    (void) snprintf (path, sizeof (path), "/proc/self/fdinfo/%d", fd);
    if ((f = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read (f, buf, sizeof (buf) - 1);
    (void) close (f);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    if (!(p = strstr (buf, "mnt_id:")))
        return -1;
    return atoi (p + 7);
}

/* /proc/PID/mountinfo, whole (malloc'd), or NULL. */
static char *read_mountinfo (pid_t pid)
{
    char path[64], *buf = NULL;
    size_t size = 0, len = 0;
    ssize_t n;
    int fd;

    (void) snprintf (path, sizeof (path), "/proc/%d/mountinfo", (int) pid);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return NULL;
    for (;;) {
        if (len + 4096 + 1 > size) {
            char *b = realloc (buf, size = size * 2 + 16384);
            if (!b)
                break;
            buf = b;
        }
        if ((n = read (fd, buf + len, size - len - 1)) < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0) {
                buf[len] = '\0';
                (void) close (fd);
                return buf;
            }
            break;
        }
        len += (size_t) n;
    }
    (void) close (fd);
    free (buf);
    return NULL;
}

int rxfd_check (pid_t peer, int fd, tier_error_t *error)
{
    char want[16], *info, *line;
    const char *sep, *fstype, *super;
    size_t flen = 0, slen = 0;
    int id = mount_id_of (fd);
    bool fuse;
    long owner;

    if (id < 0) {
        errno = EBADF;
        return tier_errprintf (error, "cannot tell the descriptor's mount");
    }
    if (!(info = read_mountinfo (peer))) {
        errno = EPERM;
        return tier_errprintf (error,
                               "cannot read the mounts of client "
                               "pid %d",
                               (int) peer);
    }
    /* "ID PARENT MAJ:MIN ROOT MOUNT OPTS [OPTIONAL...] - TYPE SRC SUPER" */
    (void) snprintf (want, sizeof (want), "%d ", id);
    for (line = info; line && strncmp (line, want, strlen (want));)
        if ((line = strchr (line, '\n')))
            line++;
    if (!line || !(sep = strstr (line, " - "))
        || !(fstype = field (sep + 3, 0, &flen))
        || !(super = field (sep + 3, 2, &slen))) {
        free (info);
        errno = EPERM;
        return tier_errprintf (error,
                               "the descriptor is on a file system "
                               "outside the client's mounts (mount %d)",
                               id);
    }
    fuse = is_fuse (fstype, flen);
    owner = fuse ? fuse_owner (super, slen) : 0;
    free (info); /* fstype and super were in it */
    /* in another user namespace, its root's FUSE mounts say user_id=0 */
    if (owner != 0 || (fuse && !same_userns (peer))) {
        errno = EPERM;
        return tier_errprintf (error,
                               "the descriptor is on a FUSE file "
                               "system a user mounted (mount %d)",
                               id);
    }
    return 0;
}
