/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* spawn.c - reach the node's agent, starting it when none answers
 *
 * The agent must outlive the job that starts it, under proctrack/linuxproc
 * and proctrack/cgroup alike, and must never live inside a job's mount
 * namespace.  So the grandchild that becomes tierd: starts a new session,
 * joins PID 1's mount namespace, moves itself to the root of every cgroup
 * hierarchy, resets signals (slurmstepd blocks some), takes uid/gid 0 for
 * real, closes every descriptor and execs with a clean environment -- the
 * binary checked before the fork, beneath its trusted directory.
 * Between fork and exec only async-signal-safe calls are made: slurmstepd
 * is multithreaded.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "lib/clock.h"
#include "lib/client.h"
#include "lib/cred.h"
#include "lib/trust.h"
#include "lib/tjson.h"
#include "spawn.h"

#define CGROUPS_MAX 32

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2) /* linux/close_range.h, 5.11 */
#endif

int spawn_call_ex (const struct tier_conf *conf, const char *body, char **reply,
                   int timeout_ms, bool *unreachable, tier_error_t *error)
{
    char path[PATH_MAX];
    size_t len;
    int fd, rc;

    if (unreachable)
        *unreachable = false;
    if (tier_conf_socket_path (conf, path, sizeof (path)) < 0)
        return tier_errprintf (error, "socket path too long");
    if ((fd = tier_client_connect (path, timeout_ms, error)) < 0) {
        if (unreachable)
            *unreachable = errno != EPERM && errno != ENAMETOOLONG;
        return -1;
    }
    rc = tier_client_call (fd, body, NULL, 0, reply, &len, timeout_ms, error);
    /* closed before it answered (an agent's error reply carries other
     * errno values) */
    if (rc < 0 && unreachable
        && (errno == ECONNRESET || errno == EPIPE || errno == ENODATA))
        *unreachable = true;
    close (fd);
    return rc;
}

int spawn_call (const struct tier_conf *conf, const char *body, char **reply,
                int timeout_ms, tier_error_t *error)
{
    return spawn_call_ex (conf, body, reply, timeout_ms, NULL, error);
}

int spawn_call_sure (const struct tier_conf *conf, const char *conf_path,
                     uint32_t job_id, const char *what, const char *body,
                     char **reply, tier_error_t *error)
{
    return spawn_call_sure_ex (conf, conf_path, job_id, what, body, reply,
                               (int) conf->agent_timeout_ms, error);
}

int spawn_call_sure_ex (const struct tier_conf *conf, const char *conf_path,
                        uint32_t job_id, const char *what, const char *body,
                        char **reply, int timeout_ms, tier_error_t *error)
{
    int64_t start = tier_now_ms (), left;
    int64_t deadline = start + (int64_t) conf->agent_timeout_ms;
    int pause_ms = 100, tries = 0, rc;
    bool unreachable;
    tier_error_t e;

    for (;;) {
        tries++;
        rc = spawn_call_ex (conf, body, reply, timeout_ms, &unreachable, error);
        if (rc == 0 || !unreachable || (left = deadline - tier_now_ms ()) <= 0)
            break;
        /* it died or is restarting: start one where the plugin starts
         * agents (a supervisor's wins the lock), else give it time */
        if (conf->enabled && conf_path)
            (void) spawn_ensure (conf, conf_path, conf->node,
                                 (int) (left < 5000 ? left : 5000), &e);
        else {
            struct timespec ts = { 0, (long) pause_ms * 1000000L };
            (void) nanosleep (&ts, NULL);
            if (pause_ms < 1000)
                pause_ms *= 2;
        }
    }
    if (tries > 1 && rc == 0)
        slurm_info ("tier: job %u: %s: the node's agent was restarting; "
                    "it answered at try %d, after %lld ms",
                    job_id, what, tries, (long long) (tier_now_ms () - start));
    else if (tries > 1) {
        e = *error;
        tier_errprintf (error, "%s (asked %d times over %lld ms)", e.text,
                        tries, (long long) (tier_now_ms () - start));
    }
    return rc;
}

int spawn_ping (const struct tier_conf *conf, int timeout_ms,
                tier_error_t *error)
{
    char *reply = NULL;
    int rc = spawn_call (conf, "{\"op\":\"ping\"}", &reply, timeout_ms, error);

    free (reply);
    return rc;
}

/* The cgroup.procs files of every mounted cgroup hierarchy's root. */
static int cgroup_roots (char paths[][PATH_MAX], int max)
{
    FILE *f = fopen ("/proc/self/mountinfo", "re");
    char line[4096];
    int n = 0;

    if (!f)
        return 0;
    while (n < max && fgets (line, sizeof (line), f)) {
        char root[PATH_MAX], mnt[PATH_MAX];
        const char *sep = strstr (line, " - ");
        char fstype[64];

        if (!sep || sscanf (sep + 3, "%63s", fstype) != 1)
            continue;
        if (strcmp (fstype, "cgroup") && strcmp (fstype, "cgroup2"))
            continue;
        if (sscanf (line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2)
            continue;
        if (strcmp (root, "/") != 0)
            continue;                   /* a bind of a sub-cgroup */
        if (snprintf (paths[n], PATH_MAX, "%s/cgroup.procs", mnt)
            < PATH_MAX)
            n++;
    }
    fclose (f);
    return n;
}

/* Open TierdPath's directory, and check the binary in it: root code runs
 * only a root-owned file nobody else can change, in a directory nobody
 * else can change (lib/trust.h).  Returns the directory's descriptor and
 * the binary's name in it: the exec goes beneath that descriptor, so it
 * runs the file checked (and the process is still named "tierd").
 */
static int open_tierd (const char *path, const char **base, tier_error_t *error)
{
    const struct tier_trust dir = { .kind = TIER_TRUST_ROOT_DIR,
                                    .flags = O_PATH };
    const struct tier_trust bin = { .kind = TIER_TRUST_ROOT_FILE,
                                    .flags = O_PATH };
    const char *slash = strrchr (path, '/');
    char d[PATH_MAX];
    int dfd, fd, e;

    if (path[0] != '/' || !slash[1] || (size_t) (slash - path) >= sizeof (d)) {
        errno = EINVAL;
        return tier_errprintf (error,
                               "TierdPath %s: not an absolute file "
                               "name",
                               path);
    }
    (void) snprintf (d, sizeof (d), "%.*s", (int) (slash - path), path);
    if ((dfd = tier_trust_open (d[0] ? d : "/", &dir, error)) < 0)
        return -1;
    if ((fd = tier_trust_openat (dfd, d, slash + 1, &bin, error)) < 0) {
        e = errno;
        close (dfd);
        errno = e;
        return -1;
    }
    close (fd);
    *base = slash + 1;
    return dfd;
}

static void child_exec (int dirfd, const char *tierd, char *const argv[],
                        int nsfd, char cgpaths[][PATH_MAX], int ncg,
                        const struct tier_cred *root)
{
    static char *const envp[] = {
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL,
    };
    struct sigaction sa;
    sigset_t none;
    int fd;

    if (setsid () < 0)
        _exit (126);
    switch (fork ()) {
        case -1: _exit (126);
        case 0: break;
        default: _exit (0);
    }
    /* the grandchild: nothing of the job may stay with it (the binary's
     * directory stays open above stdio until the exec) */
    if (dirfd < 3 && (dirfd = fcntl (dirfd, F_DUPFD_CLOEXEC, 3)) < 0)
        _exit (126);
    if (nsfd >= 0)
        (void) setns (nsfd, CLONE_NEWNS);
    for (int i = 0; i < ncg; i++) {
        if ((fd = open (cgpaths[i], O_WRONLY | O_CLOEXEC)) >= 0) {
            (void) write (fd, "0\n", 2);
            close (fd);
        }
    }
    memset (&sa, 0, sizeof (sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        (void) sigaction (s, &sa, NULL);
    sigemptyset (&none);
    (void) sigprocmask (SIG_SETMASK, &none, NULL);
    if (tier_cred_drop (root, TIER_CRED_OWN) < 0)
        _exit (126);
    if (chdir ("/") < 0)
        _exit (126);
    umask (022);
    if ((fd = open ("/dev/null", O_RDWR)) >= 0) {
        (void) dup2 (fd, 0);
        (void) dup2 (fd, 1);
        (void) dup2 (fd, 2);
    }
    if (syscall (SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        /* before Linux 5.11: close all but dirfd (O_CLOEXEC) now */
        (void) syscall (SYS_close_range, 3U, (unsigned) dirfd - 1, 0U);
        (void) syscall (SYS_close_range, (unsigned) dirfd + 1, ~0U, 0U);
    }
    (void) syscall (SYS_execveat, dirfd, tierd, argv, envp,
                    AT_SYMLINK_NOFOLLOW);
    _exit (127);
}

int spawn_start (const struct tier_conf *conf, const char *conf_path,
                 const char *node, tier_error_t *error)
{
    static char cgpaths[CGROUPS_MAX][PATH_MAX];
    char *argv[] = { "tierd", "-c", (char *) conf_path, "-N", (char *) node,
                     NULL };
    struct tier_cred root;
    const char *base = NULL;
    int ncg, nsfd, dirfd, status;
    pid_t pid;

    if ((dirfd = open_tierd (conf->tierd_path, &base, error)) < 0)
        return -1;
    /* uid and gid 0 for real, no groups (slurmstepd's are the job's) */
    tier_cred_init (&root, 0, 0);
    ncg = cgroup_roots (cgpaths, CGROUPS_MAX);
    nsfd = open ("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);
    pid = fork ();
    if (pid == 0)
        child_exec (dirfd, base, argv, nsfd, cgpaths, ncg, &root);
    if (pid < 0)
        tier_errprintf (error, "fork: %s", strerror (errno));
    if (nsfd >= 0)
        close (nsfd);
    close (dirfd);
    while (pid > 0 && waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    return pid < 0 ? -1 : 0;
}

int spawn_ensure (const struct tier_conf *conf, const char *conf_path,
                  const char *node, int timeout_ms, tier_error_t *error)
{
    int64_t deadline;
    tier_error_t e;

    if (spawn_ping (conf, 2000, &e) == 0)
        return 0;
    if (spawn_start (conf, conf_path, node, error) < 0)
        return -1;
    deadline = tier_now_ms () + timeout_ms;
    while (tier_now_ms () < deadline) {
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        if (spawn_ping (conf, 1000, &e) == 0)
            return 0;
        nanosleep (&ts, NULL);
    }
    errno = ETIMEDOUT;
    return tier_errprintf (error, "tierd did not answer within %d ms after "
                           "it was started (%s)", timeout_ms, e.text);
}
