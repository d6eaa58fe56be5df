/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* replay.c - one stage of a scaled batch-pipelined workload (bench/run f)
 *
 *   replay OP...
 *
 *   w:FILE:BYTES[:SIZE]  write BYTES in total to FILE as passes over a
 *                        SIZE-byte file (default SIZE = BYTES): the first
 *                        pass creates or truncates it, each later pass
 *                        opens it again and overwrites it from offset 0
 *                        (a checkpoint rewritten in place)
 *   r:FILE:BYTES         read BYTES from FILE as whole-file passes, each
 *                        through its own open (so that every pass reaches
 *                        the file system, as the paper's re-reads did);
 *                        when less than the file is left to read, the
 *                        pass reads a prefix with POSIX_FADV_RANDOM, so
 *                        that no read-ahead is counted beyond it
 *
 * BYTES and SIZE take K, M, G suffixes (powers of 1024).  Operations run
 * in order; bench/run turns bench/replay.spec into one replay per stage.
 * With sizes in multiples of 4 KiB the GFS emulator counts exactly BYTES
 * per operation.  Exit status: 0, 1 on an I/O error, 2 on a usage error.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/units.h"

#define BLOCK (1 << 20)

static char buf[BLOCK];

static int write_pass (const char *path, uint64_t n, int first)
{
    int flags = O_WRONLY | O_CLOEXEC | (first ? O_CREAT | O_TRUNC : 0);
    int fd = open (path, flags, 0644);

    if (fd < 0) {
        fprintf (stderr, "replay: %s: %s\n", path, strerror (errno));
        return -1;
    }
    while (n > 0) {
        size_t len = n < BLOCK ? (size_t) n : BLOCK;
        ssize_t w = write (fd, buf, len);
        if (w <= 0) {
            fprintf (stderr, "replay: write %s: %s\n", path,
                     w < 0 ? strerror (errno) : "short write");
            (void) close (fd);
            return -1;
        }
        n -= (uint64_t) w;
    }
    if (close (fd) < 0) {
        fprintf (stderr, "replay: close %s: %s\n", path, strerror (errno));
        return -1;
    }
    return 0;
}

static int do_write (const char *path, uint64_t bytes, uint64_t size)
{
    int first = 1;

    if (size == 0)
        size = bytes;
    while (bytes > 0) {
        uint64_t n = bytes < size ? bytes : size;
        if (write_pass (path, n, first) < 0)
            return -1;
        first = 0;
        bytes -= n;
    }
    return 0;
}

/* One pass through one open: the whole file when at least its size is
 * left to read, else a prefix of `left` bytes without read-ahead.  *got
 * is what was read.
 */
static int read_pass (const char *path, uint64_t left, uint64_t *got)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    uint64_t limit = 0;
    struct stat st;
    ssize_t r;

    *got = 0;
    if (fd < 0) {
        fprintf (stderr, "replay: %s: %s\n", path, strerror (errno));
        return -1;
    }
    if (fstat (fd, &st) < 0) {
        fprintf (stderr, "replay: fstat %s: %s\n", path, strerror (errno));
        (void) close (fd);
        return -1;
    }
    if ((uint64_t) st.st_size > left) {
        limit = left;
        (void) posix_fadvise (fd, 0, 0, POSIX_FADV_RANDOM);
    }
    for (;;) {
        size_t len = BLOCK;
        if (limit > 0 && limit - *got < len)
            len = (size_t) (limit - *got);
        if (len == 0)
            break;
        if ((r = read (fd, buf, len)) < 0) {
            fprintf (stderr, "replay: read %s: %s\n", path, strerror (errno));
            (void) close (fd);
            return -1;
        }
        if (r == 0)
            break;
        *got += (uint64_t) r;
    }
    (void) close (fd);
    return 0;
}

static int do_read (const char *path, uint64_t bytes)
{
    uint64_t got;

    while (bytes > 0) {
        if (read_pass (path, bytes, &got) < 0)
            return -1;
        if (got == 0) {
            fprintf (stderr, "replay: %s is empty\n", path);
            return -1;
        }
        bytes -= got < bytes ? got : bytes;
    }
    return 0;
}

/* Split "x:FILE:BYTES[:SIZE]" in place.  FILE may not contain ':'. */
static int parse (char *op, char *kind, char **file, uint64_t *bytes,
                  uint64_t *size)
{
    char *f, *b, *s;

    if (!op[0] || op[1] != ':' || (op[0] != 'r' && op[0] != 'w'))
        return -1;
    *kind = op[0];
    f = op + 2;
    if (!(b = strchr (f, ':')) || b == f)
        return -1;
    *b++ = '\0';
    if ((s = strchr (b, ':')))
        *s++ = '\0';
    *file = f;
    *size = 0;
    if (tier_size_parse (b, bytes) < 0 || *bytes == 0)
        return -1;
    if (s && (*kind != 'w' || tier_size_parse (s, size) < 0 || *size == 0))
        return -1;
    return 0;
}

int main (int argc, char **argv)
{
    if (argc < 2) {
        fprintf (stderr, "usage: replay w:FILE:BYTES[:SIZE] | r:FILE:BYTES "
                 "...\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof (buf); i++)
        buf[i] = (char) ('a' + i % 23);
    /* check every operation before doing any */
    for (int i = 1; i < argc; i++) {
        char *op = strdup (argv[i]), kind, *file;
        uint64_t bytes, size;

        if (!op || parse (op, &kind, &file, &bytes, &size) < 0) {
            fprintf (stderr, "replay: bad operation '%s'\n", argv[i]);
            return 2;
        }
        free (op);
    }
    for (int i = 1; i < argc; i++) {
        char kind, *file;
        uint64_t bytes, size;

        (void) parse (argv[i], &kind, &file, &bytes, &size);
        if ((kind == 'w' ? do_write (file, bytes, size)
                         : do_read (file, bytes)) < 0)
            return 1;
    }
    return 0;
}
