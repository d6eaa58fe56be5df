/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* openbench.c - the interposer's cost, measured from inside a task
 *
 *   openbench open PATH N     N x (open + close) of PATH: prints the
 *                             median of 9 rounds, in ns per open+close
 *   openbench read PATH       read PATH whole (1 MiB reads): MiB/s
 *
 * Run with and without LD_PRELOAD of libtier_preload.so (bench/run does),
 * on a path outside the batch directories (the pass-through cost) and on
 * a batch file (a replica hit against an open of the GFS).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}

static int bench_open (const char *path, long n)
{
    double rounds[9];

    for (int r = 0; r < 9; r++) {
        double t0 = now_s ();
        for (long i = 0; i < n; i++) {
            int fd = open (path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                perror (path);
                return 1;
            }
            close (fd);
        }
        rounds[r] = (now_s () - t0) / (double) n * 1e9;
    }
    qsort (rounds, 9, sizeof (rounds[0]), cmp);
    printf ("%.1f\n", rounds[4]);
    return 0;
}

static int bench_read (const char *path)
{
    static char buf[1 << 20];
    uint64_t total = 0;
    double t0 = now_s (), dt;
    ssize_t n;
    int fd = open (path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        perror (path);
        return 1;
    }
    while ((n = read (fd, buf, sizeof (buf))) > 0)
        total += (uint64_t) n;
    close (fd);
    if (n < 0) {
        perror (path);
        return 1;
    }
    dt = now_s () - t0;
    printf ("%.1f\n", (double) total / 1048576.0 / (dt > 0 ? dt : 1e-9));
    return 0;
}

int main (int argc, char **argv)
{
    if (argc == 4 && !strcmp (argv[1], "open"))
        return bench_open (argv[2], atol (argv[3]));
    if (argc == 3 && !strcmp (argv[1], "read"))
        return bench_read (argv[2]);
    fprintf (stderr, "usage: openbench open PATH N | openbench read PATH\n");
    return 2;
}
