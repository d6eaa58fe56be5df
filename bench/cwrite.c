/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cwrite.c - the concurrent-write benchmark of the CEFT-PVFS paper (MPI)
 *
 *   srun --mpi=pmi2 -N3 -n3 cwrite [-s SIZE] [-b BLOCK] [-r RUNS] [-c CUT]
 *          [--fsync] [--csv FILE] [--json FILE] DIR
 *
 * Per run and client (one rank each): barrier, t1; open DIR/cwrite.RANK;
 * barrier, t2; write SIZE in BLOCKs, t3; close, t4.  ct1 = t4 - t1
 * (overall, with open and close), ct2 = t3 - t2 (raw: the write loop).
 * Rank 0: overall throughput = total bytes / max ct1, raw = total / max
 * ct2 (the slowest client decides).  After RUNS runs (at least 20 by
 * default), the CUT highest and CUT lowest of each are dropped before
 * averaging (5 by default, as in the paper).  --csv writes every client's
 * ct1 as run,node,seconds (the input of tierctl predict); --json the
 * trimmed means and medians, every run's overall and raw throughput
 * (sorted) and every client's ct1 per run.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/units.h"
#include "trim.h"

static void die (const char *msg)
{
    fprintf (stderr, "cwrite: %s\n", msg);
    MPI_Abort (MPI_COMM_WORLD, 2);
    exit (2);
}

int main (int argc, char **argv)
{
    static const struct option longopts[] = {
        { "size", required_argument, NULL, 's' },
        { "block", required_argument, NULL, 'b' },
        { "runs", required_argument, NULL, 'r' },
        { "cut", required_argument, NULL, 'c' },
        { "fsync", no_argument, NULL, 'f' },
        { "csv", required_argument, NULL, 'C' },
        { "json", required_argument, NULL, 'J' },
        { NULL, 0, NULL, 0 },
    };
    uint64_t size = 16ULL << 20, block = 1ULL << 20;
    int runs = 20, cut = 5, do_fsync = 0, rank, nranks, c;
    const char *csv = NULL, *jsonf = NULL, *dir;
    char path[4096], node[128];
    double *ct1, *ct2, *all1 = NULL, *all2 = NULL, *over, *raw;
    char *buf, *names = NULL;
    FILE *cf = NULL;

    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &nranks);
    while ((c = getopt_long (argc, argv, "s:b:r:c:fC:J:", longopts, NULL))
           != -1) {
        switch (c) {
            case 's':
                if (tier_size_parse (optarg, &size) < 0 || size == 0)
                    die ("bad --size");
                break;
            case 'b':
                if (tier_size_parse (optarg, &block) < 0 || block == 0
                    || block > (1ULL << 30))
                    die ("bad --block");
                break;
            case 'r': runs = atoi (optarg); break;
            case 'c': cut = atoi (optarg); break;
            case 'f': do_fsync = 1; break;
            case 'C': csv = optarg; break;
            case 'J': jsonf = optarg; break;
            default: die ("usage: cwrite [options] DIR");
        }
    }
    if (optind != argc - 1 || runs < 1 || cut < 0 || runs < 2 * cut + 1)
        die ("usage: cwrite [-s SIZE] [-b BLOCK] [-r RUNS] [-c CUT] DIR "
             "(RUNS >= 2*CUT+1)");
    dir = argv[optind];
    (void) snprintf (path, sizeof (path), "%s/cwrite.%d", dir, rank);
    (void) snprintf (node, sizeof (node), "%s",
                     getenv ("SLURMD_NODENAME") ? getenv ("SLURMD_NODENAME")
                                                : "local");
    if (!(buf = malloc (block)) || !(ct1 = calloc (runs, sizeof (double)))
        || !(ct2 = calloc (runs, sizeof (double))))
        die ("out of memory");
    memset (buf, 'x', block);
    for (int r = 0; r < runs; r++) {
        double t1, t2, t3, t4;
        uint64_t left = size;
        int fd;

        MPI_Barrier (MPI_COMM_WORLD);
        t1 = MPI_Wtime ();
        if ((fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
            perror (path);
            die ("open failed");
        }
        MPI_Barrier (MPI_COMM_WORLD);
        t2 = MPI_Wtime ();
        while (left > 0) {
            size_t n = left < block ? (size_t) left : (size_t) block;
            ssize_t w = write (fd, buf, n);
            if (w < 0) {
                perror (path);
                die ("write failed");
            }
            left -= (uint64_t) w;
        }
        t3 = MPI_Wtime ();
        if ((do_fsync && fsync (fd) < 0) || close (fd) < 0)
            die ("close failed");
        t4 = MPI_Wtime ();
        ct1[r] = t4 - t1;
        ct2[r] = t3 - t2;
    }
    (void) unlink (path);
    if (rank == 0) {
        all1 = calloc ((size_t) runs * nranks, sizeof (double));
        all2 = calloc ((size_t) runs * nranks, sizeof (double));
        names = calloc ((size_t) nranks, sizeof (node));
        if (!all1 || !all2 || !names)
            die ("out of memory");
    }
    MPI_Gather (ct1, runs, MPI_DOUBLE, all1, runs, MPI_DOUBLE, 0,
                MPI_COMM_WORLD);
    MPI_Gather (ct2, runs, MPI_DOUBLE, all2, runs, MPI_DOUBLE, 0,
                MPI_COMM_WORLD);
    MPI_Gather (node, sizeof (node), MPI_CHAR, names, sizeof (node), MPI_CHAR,
                0, MPI_COMM_WORLD);
    if (rank == 0) {
        double total = (double) size * nranks, mo, mr, medo, medr;
        if (!(over = calloc (runs, sizeof (double)))
            || !(raw = calloc (runs, sizeof (double))))
            die ("out of memory");
        if (csv && !(cf = fopen (csv, "w")))
            die ("cannot write the CSV");
        if (cf)
            fprintf (cf, "run,node,seconds\n");
        for (int r = 0; r < runs; r++) {
            double m1 = 0, m2 = 0;
            for (int k = 0; k < nranks; k++) {
                double a = all1[(size_t) k * runs + r];
                double b = all2[(size_t) k * runs + r];
                if (a > m1) m1 = a;
                if (b > m2) m2 = b;
                if (cf)
                    fprintf (cf, "%d,%s.%d,%.6f\n", r + 1,
                             names + (size_t) k * sizeof (node), k, a);
            }
            over[r] = total / m1 / 1048576.0;
            raw[r] = total / m2 / 1048576.0;
        }
        if (cf)
            fclose (cf);
        if (trimmed_mean (over, runs, cut, &mo) < 0
            || trimmed_mean (raw, runs, cut, &mr) < 0)
            die ("not enough runs");
        (void) median (over, runs, &medo);
        (void) median (raw, runs, &medr);
        printf ("clients %d, %llu bytes each, %d runs (drop %d high, %d low): "
                "overall %.1f MiB/s, raw %.1f MiB/s (median %.1f / %.1f)\n",
                nranks, (unsigned long long) size, runs, cut, cut, mo, mr,
                medo, medr);
        if (jsonf) {
            FILE *jf = fopen (jsonf, "w");
            if (!jf)
                die ("cannot write the JSON");
            fprintf (jf, "{\"clients\": %d, \"bytes_per_client\": %llu, "
                     "\"runs\": %d, \"cut\": %d, \"overall_mib_s\": %.3f, "
                     "\"raw_mib_s\": %.3f, \"overall_median\": %.3f, "
                     "\"raw_median\": %.3f, ", nranks,
                     (unsigned long long) size, runs, cut, mo, mr, medo, medr);
            /* every run's throughput (sorted), trimmed or not */
            fprintf (jf, "\"overall_runs\": [");
            for (int r = 0; r < runs; r++)
                fprintf (jf, "%s%.3f", r ? ", " : "", over[r]);
            fprintf (jf, "], \"raw_runs\": [");
            for (int r = 0; r < runs; r++)
                fprintf (jf, "%s%.3f", r ? ", " : "", raw[r]);
            fprintf (jf, "], \"per_client_ct1\": [");
            for (int k = 0; k < nranks; k++) {
                fprintf (jf, "%s[", k ? ", " : "");
                for (int r = 0; r < runs; r++)
                    fprintf (jf, "%s%.6f", r ? ", " : "",
                             all1[(size_t) k * runs + r]);
                fprintf (jf, "]");
            }
            fprintf (jf, "]}\n");
            fclose (jf);
        }
    }
    MPI_Finalize ();
    return 0;
}
