/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* peer.c - find a client's job from its process ancestry */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer.h"

#define ANCESTRY_MAX 64

static ssize_t read_small (const char *path, char *buf, size_t size)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = read (fd, buf, size - 1);
    close (fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

int peer_parse_title (const char *title, uint32_t *job_id, char *step,
                      size_t size)
{
    const char *p;
    char *end;
    unsigned long id;
    size_t len;

    if (strncmp (title, "slurmstepd: [", 13) != 0)
        return -1;
    p = title + 13;
    if (!isdigit ((unsigned char) *p))
        return -1;
    errno = 0;
    id = strtoul (p, &end, 10);
    if (errno || id == 0 || id > UINT32_MAX || *end != '.')
        return -1;
    p = end + 1;
    if (!(end = strchr (p, ']')) || end == p)
        return -1;
    len = end - p;
    if (len >= size)
        return -1;
    for (size_t i = 0; i < len; i++)
        if (!isalnum ((unsigned char) p[i]) && p[i] != '_' && p[i] != '+')
            return -1;
    memcpy (step, p, len);
    step[len] = '\0';
    *job_id = id;
    return 0;
}

/* Parse the parent pid from /proc/PID/stat (the comm field may contain
 * spaces and parentheses: take what follows the last ')').
 */
static pid_t parent_of (const char *proc, pid_t pid)
{
    char path[PATH_MAX], buf[1024], state;
    const char *p;
    int ppid;

    (void) snprintf (path, sizeof (path), "%s/%d/stat", proc, (int) pid);
    if (read_small (path, buf, sizeof (buf)) < 0)
        return -1;
    if (!(p = strrchr (buf, ')')))
        return -1;
    if (sscanf (p + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return ppid;
}

/* True if every uid of pid (real, effective, saved, fs) is 0. */
static int all_root (const char *proc, pid_t pid)
{
    char path[PATH_MAX], buf[4096];
    const char *p;
    unsigned r, e, s, f;

    (void) snprintf (path, sizeof (path), "%s/%d/status", proc, (int) pid);
    if (read_small (path, buf, sizeof (buf)) < 0)
        return 0;
    if (!(p = strstr (buf, "\nUid:")))
        return 0;
    if (sscanf (p + 5, "%u %u %u %u", &r, &e, &s, &f) != 4)
        return 0;
    return r == 0 && e == 0 && s == 0 && f == 0;
}

int peer_job_of (const char *proc, pid_t pid, struct peer_job *pj,
                 tier_error_t *error)
{
    pid_t p = pid;

    if (!proc)
        proc = "/proc";
    for (int depth = 0; depth < ANCESTRY_MAX && p > 1; depth++) {
        char path[PATH_MAX], title[256];
        ssize_t n;

        (void) snprintf (path, sizeof (path), "%s/%d/cmdline", proc, (int) p);
        if ((n = read_small (path, title, sizeof (title))) < 0) {
            if (depth == 0) {
                errno = ESRCH;
                return tier_errprintf (error, "process %d is gone", (int) pid);
            }
            break;
        }
        if (peer_parse_title (title, &pj->job_id, pj->step,
                              sizeof (pj->step)) == 0
            && all_root (proc, p)) {
            pj->stepd = p;
            return 0;
        }
        p = parent_of (proc, p);
    }
    errno = ENOENT;
    return tier_errprintf (error, "process %d is not inside a Slurm job step "
                           "on this node", (int) pid);
}
