/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* blogw.c - write a GFS file through the job's block cache as the
 * interposer will: blog.open with the file's descriptor, the log mapped,
 * each write a committed record (tests/t/0150-block-cache.t)
 *
 *   blogw FILE OP...
 *     w:OFF:LEN:BYTE   LEN bytes of BYTE (a character) at OFF; prints
 *                      "acked OFF LEN" once committed
 *     flush            blog.flush, then wait until the log's tail
 *                      passes every record written so far; prints
 *                      "flushed" (or "failed ERRNO TEXT")
 *     sleep:MS
 *
 * FILE is opened O_WRONLY|O_CREAT (0644).  Exit 2 if blog.open was
 * refused (its error on stderr), 1 on other errors.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/blog.h"
#include "lib/client.h"
#include "lib/tjson.h"

static int call (const char *sock, const char *body, int fd, char **reply,
                 int *rfd, tier_error_t *e)
{
    size_t len;
    int c, n = 0, rc;

    if ((c = tier_client_connect (sock, 2000, e)) < 0)
        return -1;
    rc = tier_client_call_fds (c, body, fd >= 0 ? &fd : NULL, fd >= 0, reply,
                               &len, rfd, &n, rfd ? 1 : 0, 30000, e);
    close (c);
    if (rc == 0 && rfd && n != 1) {
        errno = EPROTO;
        return -1;
    }
    return rc;
}

int main (int argc, char **argv)
{
    const char *sock = getenv ("TIER_SOCKET");
    char body[8192], real[4096], link[64], *reply = NULL;
    struct blog *b;
    tier_error_t e;
    int64_t id = -1;
    ssize_t n;
    int fd, logfd = -1;

    if (argc < 3 || !sock) {
        fprintf (stderr, "usage: blogw FILE OP... (in a job: TIER_SOCKET)\n");
        return 1;
    }
    if ((fd = open (argv[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        perror (argv[1]);
        return 1;
    }
    (void) snprintf (link, sizeof (link), "/proc/self/fd/%d", fd);
    if ((n = readlink (link, real, sizeof (real) - 1)) <= 0)
        return 1;
    real[n] = '\0';
    (void) snprintf (body, sizeof (body),
                     "{\"op\":\"blog.open\",\"path\":\"%s\"}", real);
    if (call (sock, body, fd, &reply, &logfd, &e) < 0) {
        fprintf (stderr, "blogw: blog.open: %s\n", e.text);
        return 2;
    }
    if (tier_jr_get_int (reply, strlen (reply), "file", &id) < 0 || id < 0)
        return 1;
    free (reply);
    if (!(b = blog_open (logfd, 0, &e))) {
        fprintf (stderr, "blogw: the log: %s\n", e.text);
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        unsigned long long off, len;
        char ch;

        if (sscanf (argv[i], "w:%llu:%llu:%c", &off, &len, &ch) == 3) {
            while (len > 0) {
                uint64_t part = len < blog_max_payload (b)
                                    ? len
                                    : blog_max_payload (b);
                struct blog_txn t;
                if (blog_reserve (b, BLOG_WRITE, (uint32_t) id, off, part, &t)
                    < 0) {
                    if (errno == EAGAIN) {
                        usleep (1000); /* the drain frees room */
                        continue;
                    }
                    perror ("blogw: reserve");
                    return 1;
                }
                memset (t.payload, ch, part);
                if (blog_commit (b, &t) < 0) {
                    perror ("blogw: commit");
                    return 1;
                }
                printf ("acked %llu %llu\n", off, (unsigned long long) part);
                fflush (stdout);
                off += part;
                len -= part;
            }
        }
        else if (!strcmp (argv[i], "flush")) {
            uint64_t upto = blog_head (b);
            int64_t ferr = 0;
            char failure[512] = "";
            for (int k = 0; blog_tail (b) < upto; k++) {
                if (k % 100 == 0) {
                    if (call (sock, "{\"op\":\"blog.flush\"}", -1, &reply, NULL,
                              &e)
                        < 0) {
                        fprintf (stderr, "blogw: blog.flush: %s\n", e.text);
                        return 1;
                    }
                    (void) tier_jr_get_int (reply, strlen (reply), "fail_errno",
                                            &ferr);
                    (void) tier_jr_get_str (reply, strlen (reply), "failure",
                                            failure, sizeof (failure));
                    free (reply);
                    if (ferr) {
                        printf ("failed %lld %s\n", (long long) ferr, failure);
                        fflush (stdout);
                        break;
                    }
                }
                usleep (10000);
            }
            if (!ferr)
                printf ("flushed\n");
            fflush (stdout);
        }
        else if (sscanf (argv[i], "sleep:%llu", &off) == 1)
            usleep ((useconds_t) off * 1000);
        else {
            fprintf (stderr, "blogw: %s: unknown operation\n", argv[i]);
            return 1;
        }
    }
    blog_close (b);
    return 0;
}
