/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cmd_replica.c - tierctl prefetch, evict, replicas: the batch replica
 * cache by hand (the Sunway paper's user preload command)
 *
 * prefetch opens every file itself, with the user's own credentials, and
 * passes the descriptor to the node's agent, exactly as the interposer
 * does on a miss: the agent never reads a user path with root's rights.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/client.h"
#include "lib/conf.h"
#include "lib/paths.h"
#include "lib/units.h"
#include "ctl.h"

struct prefetch {
    struct ctl *ctl;
    char sock[PATH_MAX];
    int timeout_ms;
    json_int_t files, bytes, copied, present, failed, skipped;
    json_t *errors;
    json_t *mirrors;
    char run[33]; /* this run's token: the agent reads the caller's
                   * policies once for all its requests */
};

/* A random token for p's requests ("" if the kernel gives none: each
 * request then reads the policies itself). */
static void run_token (struct prefetch *p)
{
    unsigned char b[16];

    p->run[0] = '\0';
    if (getrandom (b, sizeof (b), GRND_NONBLOCK) != (ssize_t) sizeof (b))
        return;
    for (size_t i = 0; i < sizeof (b); i++)
        (void) snprintf (p->run + 2 * i, 3, "%02x", b[i]);
}

static void note_error (struct prefetch *p, const char *path,
                        const char *why)
{
    p->failed++;
    if (!p->ctl->json)
        fprintf (stderr, "tierctl: prefetch %s: %s\n", path, why);
    (void) json_array_append_new (p->errors, json_pack ("{s:s s:s}", "path",
                                                        path, "error", why));
}

/* One open file: hand it to the agent. */
static void prefetch_fd (struct prefetch *p, int fd, const char *shown)
{
    char link[64], real[PATH_MAX], *body = NULL, *reply = NULL;
    tier_error_t error;
    json_error_t jerr;
    json_t *res;
    size_t len = 0;
    ssize_t n;
    int sfd;

    (void) snprintf (link, sizeof (link), "/proc/self/fd/%d", fd);
    if ((n = readlink (link, real, sizeof (real) - 1)) <= 0) {
        note_error (p, shown, "cannot tell its path");
        return;
    }
    real[n] = '\0';
    {
        json_t *req = json_pack ("{s:s s:s}", "op", "replica.prefetch",
                                 "path", real);
        if (req && p->run[0])
            json_object_set_new (req, "policy_run", json_string (p->run));
        body = req ? json_dumps (req, JSON_COMPACT) : NULL;
        json_decref (req);
    }
    if (!body) {
        note_error (p, shown, "out of memory");
        return;
    }
    if ((sfd = tier_client_connect (p->sock, 10000, &error)) < 0) {
        note_error (p, shown, error.text);
        free (body);
        return;
    }
    if (tier_client_call (sfd, body, &fd, 1, &reply, &len, p->timeout_ms,
                          &error) < 0)
        note_error (p, shown, error.text);
    else if ((res = json_loadb (reply, len, 0, &jerr))) {
        const char *ft = json_string_value (json_object_get (res,
                                                             "fallthrough"));
        if (ft)
            note_error (p, shown, ft);
        else {
            p->files++;
            p->bytes += json_integer_value (json_object_get (res, "size"));
            if (json_is_true (json_object_get (res, "hit")))
                p->present++;
            else
                p->copied++;
        }
        json_decref (res);
    }
    free (reply);
    free (body);
    close (sfd);
}

/* A file or a tree (never following symlinks). */
static void prefetch_at (struct prefetch *p, int atfd, const char *name,
                         const char *shown, int depth)
{
    struct stat st;
    /* a path given follows its symlinks (the agent checks where they
     * lead); a walk does not.  The system call itself: inside a job,
     * tierctl runs with the interposer, which would hand it the replica */
    int fd = (int) syscall (SYS_openat, atfd, name, O_RDONLY | O_CLOEXEC
                            | O_NONBLOCK | (depth ? O_NOFOLLOW : 0));

    if (fd < 0 && depth && errno == ELOOP) {
        p->skipped++;
        return;
    }
    if (fd < 0) {
        note_error (p, shown, strerror (errno));
        return;
    }
    if (fstat (fd, &st) < 0) {
        note_error (p, shown, strerror (errno));
        close (fd);
        return;
    }
    if (S_ISREG (st.st_mode))
        prefetch_fd (p, fd, shown);
    else if (S_ISDIR (st.st_mode) && depth < 64) {
        DIR *d = fdopendir (fd);
        struct dirent *de;
        if (!d) {
            note_error (p, shown, strerror (errno));
            close (fd);
            return;
        }
        while ((de = readdir (d))) {
            char sub[PATH_MAX];
            if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
                continue;
            (void) snprintf (sub, sizeof (sub), "%s/%s", shown, de->d_name);
            prefetch_at (p, dirfd (d), de->d_name, sub, depth + 1);
        }
        closedir (d);
        return;
    }
    close (fd);
}

/* Eager mode: the agent mirrors the prefetched directory, for binding
 * into later jobs' namespaces.
 */
static void mirror (struct prefetch *p, const char *dir)
{
    json_t *req = json_pack ("{s:s s:s}", "op", "replica.mirror", "path", dir);
    json_t *res;
    char a[32];

    if (req && p->run[0])
        json_object_set_new (req, "policy_run", json_string (p->run));
    res = ctl_call (p->ctl, req);

    if (!res) {
        p->failed++;
        return;
    }
    if (!p->ctl->json)
        printf ("%s: bound read-only into your jobs from now on (%lld "
                "files, %s), while it stays unchanged\n", dir,
                (long long) json_integer_value (json_object_get (res,
                                                                 "files")),
                tier_size_format ((uint64_t) json_integer_value (
                    json_object_get (res, "bytes")), a, sizeof (a)));
    (void) json_array_append (p->mirrors, res);
    json_decref (res);
}

int cmd_prefetch (struct ctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "bind", no_argument, NULL, 'b' },
        { NULL, 0, NULL, 0 },
    };
    struct prefetch p = { .ctl = ctl };
    struct tier_conf *conf;
    char cwd[PATH_MAX], abs[PATH_MAX];
    char a[32];
    bool bind = false;
    int c;

    run_token (&p);
    while ((c = getopt_long (argc, argv, "+", opts, NULL)) != -1) {
        if (c == 'b')
            bind = true;
        else
            return ctl_usage (ctl_cmd_find ("prefetch"));
    }
    argc -= optind - 1;
    argv += optind - 1;
    if (argc < 2 || argv[1][0] == '-')
        return ctl_usage (ctl_cmd_find ("prefetch"));
    if (!(conf = ctl_conf (ctl)) || !(p.errors = json_array ())
        || !(p.mirrors = json_array ()))
        return CTL_ERROR;
    if (tier_conf_socket_path (conf, p.sock, sizeof (p.sock)) < 0)
        return CTL_ERROR;
    p.timeout_ms = (int) ((conf->replica_wait + 60) * 1000);
    if (!getcwd (cwd, sizeof (cwd)))
        cwd[0] = '\0';
    for (int i = 1; i < argc; i++) {
        if (tier_path_absolute (argv[i], cwd, abs, sizeof (abs)) < 0) {
            note_error (&p, argv[i], "not a usable path");
            continue;
        }
        prefetch_at (&p, AT_FDCWD, abs, abs, 0);
        if (bind && !p.failed)
            mirror (&p, abs);
    }
    if (ctl->json) {
        json_t *o = json_pack ("{s:s s:I s:I s:I s:I s:I s:I s:O s:O}",
                               "node", conf->node, "files", p.files,
                               "bytes", p.bytes, "copied", p.copied,
                               "present", p.present, "failed", p.failed,
                               "skipped", p.skipped, "errors", p.errors,
                               "mirrors", p.mirrors);
        ctl_print_json (o);
        json_decref (o);
    }
    else
        printf ("node %s: %lld files (%s) on the burst buffer: %lld "
                "copied, %lld already there; %lld failed, %lld symlinks "
                "skipped\n", conf->node, (long long) p.files,
                tier_size_format ((uint64_t) p.bytes, a, sizeof (a)),
                (long long) p.copied, (long long) p.present,
                (long long) p.failed, (long long) p.skipped);
    json_decref (p.errors);
    json_decref (p.mirrors);
    return p.failed ? CTL_ERROR : CTL_OK;
}

static int path_arg (const char *arg, char *out, size_t size)
{
    char cwd[PATH_MAX];

    if (!getcwd (cwd, sizeof (cwd)))
        cwd[0] = '\0';
    if (tier_path_absolute (arg, cwd, out, size) < 0) {
        fprintf (stderr, "tierctl: %s: not a usable path\n", arg);
        return -1;
    }
    return 0;
}

int cmd_evict (struct ctl *ctl, int argc, char **argv)
{
    json_int_t files = 0, bytes = 0;
    char abs[PATH_MAX], a[32];
    int rc = CTL_OK;

    if (argc < 2 || argv[1][0] == '-')
        return ctl_usage (ctl_cmd_find ("evict"));
    for (int i = 1; i < argc; i++) {
        json_t *res;
        if (path_arg (argv[i], abs, sizeof (abs)) < 0) {
            rc = CTL_ERROR;
            continue;
        }
        if (!(res = ctl_call (ctl, json_pack ("{s:s s:s}", "op",
                                              "replica.evict", "path",
                                              abs)))) {
            rc = CTL_ERROR;
            continue;
        }
        files += json_integer_value (json_object_get (res, "files"));
        bytes += json_integer_value (json_object_get (res, "bytes"));
        json_decref (res);
    }
    if (ctl->json) {
        json_t *o = json_pack ("{s:s s:I s:I}", "node", ctl_node (ctl),
                               "files", files, "bytes", bytes);
        ctl_print_json (o);
        json_decref (o);
    }
    else
        printf ("node %s: %lld replicas (%s) evicted\n", ctl_node (ctl),
                (long long) files,
                tier_size_format ((uint64_t) bytes, a, sizeof (a)));
    return rc;
}

int cmd_replicas (struct ctl *ctl, int argc, char **argv)
{
    char abs[PATH_MAX], a[32], when[32];
    json_t *req, *res, *v;
    size_t i;

    if (argc > 2 || (argc == 2 && argv[1][0] == '-'))
        return ctl_usage (ctl_cmd_find ("replicas"));
    req = json_pack ("{s:s}", "op", "replica.list");
    if (argc == 2) {
        if (path_arg (argv[1], abs, sizeof (abs)) < 0) {
            json_decref (req);
            return CTL_ERROR;
        }
        json_object_set_new (req, "path", json_string (abs));
    }
    if (!(res = ctl_call (ctl, req)))
        return CTL_ERROR;
    if (ctl->json) {
        ctl_print_json (res);
        json_decref (res);
        return CTL_OK;
    }
    printf ("%-10s %6s %5s %-19s %s\n", "size", "opens", "owner", "fetched",
            "source");
    json_array_foreach (json_object_get (res, "replicas"), i, v) {
        time_t t = (time_t) json_integer_value (json_object_get (v,
                                                                 "fetched"));
        struct tm tm;
        (void) strftime (when, sizeof (when), "%Y-%m-%d %H:%M:%S",
                         localtime_r (&t, &tm));
        printf ("%-10s %6lld %5s %-19s %s\n",
                tier_size_format ((uint64_t) json_integer_value (
                    json_object_get (v, "size")), a, sizeof (a)),
                (long long) json_integer_value (json_object_get (v, "opens")),
                json_is_true (json_object_get (v, "owner")) ? "yes" : "no",
                when, json_string_value (json_object_get (v, "path")));
    }
    json_decref (res);
    return CTL_OK;
}
