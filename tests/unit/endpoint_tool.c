/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* endpoint_tool.c - drive lib/endpoint from integration tests
 *
 *   endpoint_tool [OPTIONS] get URL FILE|-    fetch an object
 *   endpoint_tool [OPTIONS] put FILE URL      send a file
 *   endpoint_tool [OPTIONS] rm URL            delete an object
 *   endpoint_tool [OPTIONS] head URL          "exists size etag" or "absent"
 *   endpoint_tool [OPTIONS] abort URL STATE   abort a persisted upload
 *
 * On success it prints one line of counters ("ok bytes=... parts=...");
 * on failure the library's error and errno's name on stderr, exit 1.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/copy.h"
#include "lib/endpoint.h"
#include "lib/units.h"

static atomic_int cancel_flag;
static uint64_t cancel_after;           /* bytes, 0: never */
static const char *state_file;

static void usage (void)
{
    fprintf (stderr,
             "usage: endpoint_tool [OPTIONS] get URL FILE|-  [--offset N]\n"
             "       endpoint_tool [OPTIONS] put FILE URL\n"
             "       endpoint_tool [OPTIONS] rm URL\n"
             "       endpoint_tool [OPTIONS] head URL\n"
             "       endpoint_tool [OPTIONS] abort URL STATEFILE\n"
             "  -c FILE  credentials file     -p NAME  profile\n"
             "  -C FILE  CA file              -R N     retries (-1: none)\n"
             "  -P SIZE  part size            -T SIZE  multipart threshold\n"
             "  -s FILE  persist/resume the multipart state in FILE\n"
             "  -r SIZE  bandwidth limit (bytes/s)\n"
             "  -x SIZE  cancel after SIZE bytes moved\n"
             "  -o N     get: the file already holds N bytes (resume)\n"
             "  -n       plain PUT (not WebDAV)   -u  unsigned payload\n"
             "  -k       keep a failed multipart upload\n");
    exit (2);
}

static uint64_t size_arg (const char *s)
{
    uint64_t v;

    if (tier_size_parse (s, &v) < 0) {
        fprintf (stderr, "endpoint_tool: bad size '%s'\n", s);
        exit (2);
    }
    return v;
}

static void progress (uint64_t done, uint64_t total, void *arg)
{
    if (cancel_after && done >= cancel_after)
        atomic_store (&cancel_flag, 1);
}

/* Keep the state the way a caller must: write, fsync, rename. */
static int save_state (const char *json, void *arg)
{
    char tmp[4200];
    int fd;
    size_t len;

    if (!json)
        return unlink (state_file) < 0 && errno != ENOENT ? -1 : 0;
    snprintf (tmp, sizeof (tmp), "%s.tmp", state_file);
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600))
        < 0)
        return -1;
    len = strlen (json);
    if (write (fd, json, len) != (ssize_t) len || fsync (fd) < 0) {
        close (fd);
        return -1;
    }
    if (close (fd) < 0 || rename (tmp, state_file) < 0)
        return -1;
    return 0;
}

static char *read_file (const char *path)
{
    FILE *f = fopen (path, "r");
    char *buf;
    long len;

    if (!f)
        return NULL;
    fseek (f, 0, SEEK_END);
    len = ftell (f);
    fseek (f, 0, SEEK_SET);
    if (len < 0 || !(buf = calloc (1, (size_t) len + 1))) {
        fclose (f);
        return NULL;
    }
    if (fread (buf, 1, (size_t) len, f) != (size_t) len) {
        free (buf);
        buf = NULL;
    }
    fclose (f);
    return buf;
}

static const char *errno_name (int e)
{
    switch (e) {
        case ENOENT: return "ENOENT";
        case EACCES: return "EACCES";
        case EPERM: return "EPERM";
        case EINVAL: return "EINVAL";
        case ECANCELED: return "ECANCELED";
        case ENOTSUP: return "ENOTSUP";
        case ESTALE: return "ESTALE";
        case EPROTO: return "EPROTO";
        case ECONNREFUSED: return "ECONNREFUSED";
        case ETIMEDOUT: return "ETIMEDOUT";
        case EIO: return "EIO";
        case EFBIG: return "EFBIG";
        case EHOSTUNREACH: return "EHOSTUNREACH";
        default: return "other";
    }
}

int main (int argc, char **argv)
{
    struct tier_endpoint_opts opts = { 0 };
    struct tier_endpoint_result res;
    struct tier_creds *creds = NULL;
    struct tier_url *url = NULL;
    struct tier_endpoint *ep = NULL;
    struct tier_copy_limit *limit = NULL;
    const char *creds_file = NULL, *profile = "default", *cmd;
    const char *url_text;
    char *resume = NULL;
    tier_error_t error = { { 0 } };
    uint64_t offset = 0, rate = 0;
    int c, rc = -1, fd = -1;

    while ((c = getopt (argc, argv, "c:p:C:R:P:T:s:r:x:o:nuk")) != -1) {
        switch (c) {
            case 'c': creds_file = optarg; break;
            case 'p': profile = optarg; break;
            case 'C': opts.ca_file = optarg; break;
            case 'R': opts.retries = atoi (optarg); break;
            case 'P': opts.part_size = size_arg (optarg); break;
            case 'T': opts.multipart_threshold = size_arg (optarg); break;
            case 's': state_file = optarg; break;
            case 'r': rate = size_arg (optarg); break;
            case 'x': cancel_after = size_arg (optarg); break;
            case 'o': offset = size_arg (optarg); break;
            case 'n': opts.flags |= TIER_ENDPOINT_PLAIN_PUT; break;
            case 'u': opts.flags |= TIER_ENDPOINT_UNSIGNED; break;
            case 'k': opts.flags |= TIER_ENDPOINT_KEEP_UPLOAD; break;
            default: usage ();
        }
    }
    if (optind + 2 > argc)
        usage ();
    cmd = argv[optind];
    url_text = !strcmp (cmd, "put") ? argv[optind + 2] : argv[optind + 1];
    if (!url_text || (strcmp (cmd, "rm") && strcmp (cmd, "head")
                      && optind + 3 > argc))
        usage ();
    if (tier_endpoint_init (&error) < 0)
        goto out;
    if (!(url = tier_url_parse (url_text, &error)))
        goto out;
    if (creds_file && !(creds = tier_creds_load (creds_file, profile,
                                                 geteuid (), &error)))
        goto out;
    if (rate && !(limit = tier_copy_limit_create (rate, rate / 10 + 1))) {
        tier_errprintf (&error, "limit: %s", strerror (errno));
        goto out;
    }
    opts.creds = creds;
    opts.cancel = &cancel_flag;
    opts.limit = limit;
    opts.progress = progress;
    if (state_file) {
        opts.state = save_state;
        if (access (state_file, F_OK) == 0
            && !(resume = read_file (state_file))) {
            tier_errprintf (&error, "%s: %s", state_file, strerror (errno));
            goto out;
        }
        opts.resume = resume;
    }
    if (!(ep = tier_endpoint_create (url, &opts, &error)))
        goto out;
    if (!strcmp (cmd, "get")) {
        const char *path = argv[optind + 2];

        if (!strcmp (path, "-"))
            fd = STDOUT_FILENO;
        else if ((fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC
                                       | (offset ? 0 : O_TRUNC), 0644)) < 0) {
            tier_errprintf (&error, "%s: %s", path, strerror (errno));
            goto out;
        }
        rc = tier_endpoint_get (ep, fd, offset, &res, &error);
    }
    else if (!strcmp (cmd, "put")) {
        const char *path = argv[optind + 1];

        if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0) {
            tier_errprintf (&error, "%s: %s", path, strerror (errno));
            goto out;
        }
        rc = tier_endpoint_put (ep, fd, &res, &error);
    }
    else if (!strcmp (cmd, "rm"))
        rc = tier_endpoint_remove (ep, &res, &error);
    else if (!strcmp (cmd, "head")) {
        struct tier_endpoint_info info;

        if ((rc = tier_endpoint_head (ep, &info, &res, &error)) == 0) {
            if (info.exists)
                printf ("exists %" PRIu64 " %s\n", info.size,
                        info.etag[0] ? info.etag : "-");
            else
                printf ("absent\n");
        }
    }
    else if (!strcmp (cmd, "abort")) {
        char *json = read_file (argv[optind + 2]);

        if (!json) {
            tier_errprintf (&error, "%s: %s", argv[optind + 2],
                            strerror (errno));
            goto out;
        }
        rc = tier_endpoint_abort_upload (ep, json, &res, &error);
        free (json);
    }
    else
        usage ();
    if (rc == 0)
        fprintf (fd == STDOUT_FILENO || !strcmp (cmd, "head") ? stderr
                 : stdout, "ok bytes=%" PRIu64 " size=%" PRIu64 " requests=%u "
                "retries=%u parts=%u resumed=%u aborted=%d status=%d etag=%s\n",
                res.bytes, res.size, res.requests, res.retries, res.parts,
                res.parts_resumed, res.aborted_upload, res.http_status,
                res.etag[0] ? res.etag : "-");
    else
        fprintf (stderr, "# parts=%u resumed=%u aborted=%d requests=%u\n",
                 res.parts, res.parts_resumed, res.aborted_upload,
                 res.requests);
out:
    if (rc < 0)
        fprintf (stderr, "endpoint_tool: %s (%s)\n", error.text,
                 errno_name (errno));
    if (fd > STDOUT_FILENO)
        close (fd);
    tier_endpoint_destroy (ep);
    tier_url_destroy (url);
    tier_creds_destroy (creds);
    tier_copy_limit_destroy (limit);
    free (resume);
    tier_endpoint_fini ();
    return rc < 0 ? 1 : 0;
}
