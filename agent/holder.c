/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* holder.c - one writer per file: an OFD lock with its holder's record,
 * and the end of a holder that an earlier agent left behind
 *
 * See holder.h.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/proc.h"
#include "holder.h"

/* /proc/PID/FILE into buf (NUL-terminated), or -1. */
static int proc_read (pid_t pid, const char *file, char *buf, size_t size)
{
    char path[64];
    ssize_t n;
    int fd;

    (void) snprintf (path, sizeof (path), "/proc/%d/%s", (int) pid, file);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read (fd, buf, size - 1);
    close (fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

/* Field 4 of /proc/PID/stat, -1 if none. */
static pid_t proc_ppid (pid_t pid)
{
    char buf[1024], *p;

    if (proc_read (pid, "stat", buf, sizeof (buf)) < 0
        || !(p = strrchr (buf, ')')))
        return -1;
    return (pid_t) strtol (p + 3, NULL, 10); /* ") S PPID" */
}

int holder_end_orphan (pid_t pid, unsigned long long start, const char *comm)
{
    char name[64];
    pid_t ppid;
    int pfd;

    if (pid <= 0 || start == 0)
        goto esrch;
    if ((pfd = (int) syscall (SYS_pidfd_open, pid, 0)) < 0)
        return -1;
    /* checked after the pidfd was taken: it cannot name another process */
    if (tier_proc_start (pid) != start
        || proc_read (pid, "comm", name, sizeof (name)) < 0) {
        close (pfd);
        goto esrch;
    }
    name[strcspn (name, "\n")] = '\0';
    if (strcmp (name, comm)) {
        close (pfd);
        goto esrch;
    }
    ppid = proc_ppid (pid);
    if (ppid == getppid () || ppid == getpid ()) {
        close (pfd);
        errno = EPERM;
        return -1;
    }
    if (syscall (SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) < 0) {
        int e = errno;
        close (pfd);
        errno = e;
        return -1;
    }
    return pfd;
esrch:
    errno = ESRCH;
    return -1;
}

/* The record in fd: its pid and start, or -1. */
static int record_read (int fd, pid_t *pid, unsigned long long *start)
{
    char buf[128];
    ssize_t n = pread (fd, buf, sizeof (buf) - 1, 0);
    long p;

    if (n <= 0)
        return -1;
    buf[n] = '\0';
    if (sscanf (buf, "pid=%ld start=%llu", &p, start) != 2 || p <= 0)
        return -1;
    *pid = (pid_t) p;
    return 0;
}

/* Our record into fd, over the one before: written in place first (a
 * file system that is full still takes it in the page the old record
 * has), then cut to its length. */
static int record_write (int fd)
{
    char buf[128];
    int n = snprintf (buf, sizeof (buf), "pid=%d start=%llu\n", (int) getpid (),
                      tier_proc_start (getpid ()));

    if (pwrite (fd, buf, (size_t) n, 0) != n || ftruncate (fd, n) < 0)
        return -1;
    return 0;
}

int holder_lock (int fd, const char *comm, int wait_ms, pid_t *holder,
                 pid_t *ended)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    int64_t deadline = tier_now_ms () + wait_ms;
    int pfd = -1;

    *holder = *ended = 0;
    for (;;) {
        unsigned long long start = 0;
        int64_t left;

        if (fcntl (fd, F_OFD_SETLK, &fl) == 0)
            break;
        if (errno != EAGAIN && errno != EACCES && errno != EINTR)
            goto error;
        if (record_read (fd, holder, &start) < 0)
            *holder = 0;
        if (pfd < 0 && !*ended && *holder
            && (pfd = holder_end_orphan (*holder, start, comm)) >= 0)
            *ended = *holder;
        if ((left = deadline - tier_now_ms ()) <= 0) {
            errno = EWOULDBLOCK;
            goto error;
        }
        if (pfd >= 0) {
            /* until it is gone (readable), then the lock is free */
            struct pollfd p = { .fd = pfd, .events = POLLIN };
            if (poll (&p, 1, (int) (left < 50 ? left : 50)) > 0) {
                close (pfd);
                pfd = -1;
                continue;
            }
        }
        else {
            struct timespec ts = { 0, 50 * 1000 * 1000 };
            (void) nanosleep (&ts, NULL);
        }
    }
    if (pfd >= 0)
        close (pfd);
    /* The lock is ours, whatever the record: one that cannot be written
     * (a full file system) is empty or an old one, and a later writer
     * that reads it only waits for us instead of ending us. */
    if (record_write (fd) < 0)
        (void) ftruncate (fd, 0);
    return 0;
error : {
    int e = errno;
    if (pfd >= 0)
        close (pfd);
    errno = e;
}
    return -1;
}
