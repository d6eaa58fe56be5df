/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* main.c - tierd, the per-node agent
 *
 *   tierd [-c CONF] [-N NODE] [-F] [-V]
 *
 * One per node, as root, started from the host namespace: by the plugin
 * when a tier job reaches a node and no agent answers (spank_plugin/
 * spawn.c), or by the site's service manager (-F, etc/tierd.service.in).  A
 * lock in StateDir makes it a single instance per node.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/trust.h"
#include "agent.h"
#include "child.h"
#include "streams.h"

#ifndef TIER_SYSCONFDIR
#define TIER_SYSCONFDIR "/etc/tier"
#endif

static void usage (FILE *f)
{
    fprintf (f, "usage: tierd [-c CONF] [-N NODE] [-F] [-V]\n"
                "  -c, --conf FILE     tier.conf (default %s/tier.conf)\n"
                "  -N, --node NAME     this node's NodeName (%%n in tier.conf)\n"
                "  -F, --foreground    do not daemonize\n"
                "  -V, --version       print the version\n",
             TIER_SYSCONFDIR);
}

/* StateDir: root's, never a symlink, in directories nobody else may
 * change (lib/trust.h's ROOT_DIR), made 0700 with its parents if missing
 * and kept 0700.  Returns a descriptor, or -1 with errno and a text.
 */
static int state_dir_open (const char *dir, tier_error_t *error)
{
    const struct tier_trust rule = {
        .kind = TIER_TRUST_ROOT_DIR,
        .create = 0700,
        .parents = true,
    };
    struct stat st;
    int fd;

    if ((fd = tier_trust_open (dir, &rule, error)) < 0)
        return -1;
    if (fstat (fd, &st) == 0 && (st.st_mode & 07777) != 0700)
        (void) fchmod (fd, 0700);
    return fd;
}

/* The single-instance lock and the pid file beside it, in StateDir. */
static int take_lock (struct agent *a, int dirfd)
{
    char path[4096], buf[32];
    const char *tmp = "tierd.pid.tmp";
    int fd, n;

    if ((fd = openat (dirfd, "tierd.lock",
                      O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600))
        < 0)
        return -1;
    if (flock (fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close (fd);
        errno = e;
        return -1;
    }
    a->lockfd = fd;
    (void) snprintf (path, sizeof (path), "%s/tierd.pid", a->conf->state_dir);
    n = snprintf (buf, sizeof (buf), "%d\n", (int) getpid ());
    if ((fd = openat (dirfd, tmp,
                      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                      0644))
        >= 0) {
        if (write (fd, buf, n) != n
            || renameat (dirfd, tmp, dirfd, "tierd.pid") < 0)
            tier_log_error ("%s", path);
        close (fd);
    }
    return 0;
}

/* The command line into a and *node.  Return 0 to go on, or -1 to exit
 * with *status (after -V, -h or a usage message).
 */
static int parse_args (int argc, char **argv, struct agent *a,
                       const char **node, int *status)
{
    static const struct option longopts[] = {
        { "conf", required_argument, NULL, 'c' },
        { "node", required_argument, NULL, 'N' },
        { "foreground", no_argument, NULL, 'F' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    while ((c = getopt_long (argc, argv, "c:N:FVh", longopts, NULL)) != -1) {
        switch (c) {
            case 'c':
                a->conf_path = optarg;
                break;
            case 'N':
                *node = optarg;
                break;
            case 'F':
                a->foreground = true;
                break;
            case 'V':
                printf ("tierd %s\n", PACKAGE_VERSION);
                *status = 0;
                return -1;
            case 'h':
                usage (stdout);
                *status = 0;
                return -1;
            default:
                goto error;
        }
    }
    if (optind < argc)
        goto error;
    return 0;
error:
    usage (stderr);
    *status = 2;
    return -1;
}

/* This node's name: -N, else SLURMD_NODENAME, else the short host name. */
static const char *node_name (const char *node)
{
    static char host[256];

    if (!node)
        node = getenv ("SLURMD_NODENAME");
    if (!node && gethostname (host, sizeof (host)) == 0) {
        host[strcspn (host, ".")] = '\0';
        node = host;
    }
    if (!node || !tier_conf_nodename_valid (node))
        tier_log_exit ("invalid node name '%s' (use -N NAME)",
                       node ? node : "");
    return node;
}

/* Logging as tier.conf says: LogFile, else syslog unless -F (stderr). */
static void log_setup (const struct agent *a)
{
    if (a->conf->log_file[0]) {
        if (tier_log_init ("tierd", TIER_LOG_FILE, a->conf->log_file,
                           a->conf->log_level)
            < 0)
            tier_log_errn_exit (errno, "%s", a->conf->log_file);
    }
    else if (!a->foreground)
        tier_log_init ("tierd", TIER_LOG_SYSLOG, NULL, a->conf->log_level);
    else
        tier_log_set_level (a->conf->log_level);
}

int main (int argc, char **argv)
{
    struct agent a = { .conf_path = TIER_SYSCONFDIR "/tier.conf",
                       .lockfd = -1,
                       .slurm_uid = (uid_t) -1 };
    const char *node = NULL;
    tier_error_t error;
    char path[4096];
    int status, sfd;

    if (parse_args (argc, argv, &a, &node, &status) < 0)
        return status;
    child_title_init (argc, argv);
    tier_log_init ("tierd", TIER_LOG_STDERR, NULL, LOG_INFO);
    if (geteuid () != 0)
        tier_log_exit ("must run as root");
    node = node_name (node);
    (void) snprintf (a.node, sizeof (a.node), "%.63s", node);
    umask (022);
    if (!(a.conf = tier_conf_create (a.node)))
        tier_log_errn_exit (errno, "configuration");
    if (tier_conf_load (a.conf, a.conf_path, true, &error) < 0)
        tier_log_exit ("%s", error.text);
    log_setup (&a);

    if ((sfd = state_dir_open (a.conf->state_dir, &error)) < 0) {
        int e = errno;
        tier_log (LOG_ERR, "%s", error.text);
        tier_log_errn_exit (e,
                            "StateDir %s (must be a root-owned "
                            "directory)",
                            a.conf->state_dir);
    }
    if (!a.foreground && child_daemonize () < 0)
        tier_log_errn_exit (errno, "fork");
    if (take_lock (&a, sfd) < 0) {
        if (errno == EWOULDBLOCK) {
            tier_log (LOG_INFO, "another tierd already serves node %s",
                      a.node);
            close (sfd);
            tier_conf_destroy (a.conf);
            tier_log_fini ();
            return 0;
        }
        tier_log_errn_exit (errno, "lock in %s", a.conf->state_dir);
    }
    a.slurm_uid = agent_slurm_uid (a.conf);
    a.disabled = faccessat (sfd, "disabled", F_OK, 0) == 0;
    close (sfd);
    (void) snprintf (path, sizeof (path), "%s/registry", a.conf->state_dir);
    if (!(a.store = store_open (path, STORE_MAPSIZE_DEFAULT, &error)))
        tier_log_exit ("%s", error.text);
    tiers_init (&a);
    (void) child_usercg_init (a.conf);
    a.started_ms = a.last_flush_ms = tier_now_ms ();
    if (server_init (&a, &error) < 0)
        tier_log_exit ("%s", error.text);
    if (streams_init (&a) < 0)
        tier_log_exit ("GFS streams: out of memory");
    if (replica_init (&a) < 0)
        tier_log_exit ("the replica cache cannot start");
    if (migrate_init (&a) < 0)
        tier_log_exit ("stage-out cannot start");
    tier_log (LOG_NOTICE, "tierd %s serving node %s on %s", PACKAGE_VERSION,
              a.node, a.sockpath);
    (void) server_run (&a);
    replica_fini (&a);
    server_fini (&a);
    migrate_fini (&a);
    streams_fini (&a);
    store_close (a.store);
    free (a.pending);
    tier_log (LOG_NOTICE, "tierd stopped");
    tier_conf_destroy (a.conf);
    tier_log_fini ();
    return 0;
}
