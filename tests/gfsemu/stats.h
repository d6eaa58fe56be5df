/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stats.h - per-file and total counters of the GFS emulator */
#ifndef GFSEMU_STATS_H
#define GFSEMU_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One counter per FUSE request type that reaches the backing directory,
 * plus data bytes and failed requests.  The names are the keys of the
 * stats file (README.md says what each one counts).
 */
enum stats_field {
    STATS_LOOKUP = 0,
    STATS_LOOKUP_MISS,
    STATS_GETATTR,
    STATS_SETATTR,
    STATS_OPEN,
    STATS_CREATE,
    STATS_OPENDIR,
    STATS_READDIR,
    STATS_READ,
    STATS_READ_BYTES,
    STATS_WRITE,
    STATS_WRITE_BYTES,
    STATS_FLUSH,
    STATS_RELEASE,
    STATS_FSYNC,
    STATS_MKDIR,
    STATS_MKNOD,
    STATS_SYMLINK,
    STATS_READLINK,
    STATS_LINK,
    STATS_UNLINK,
    STATS_RMDIR,
    STATS_RENAME,
    STATS_STATFS,
    STATS_ERRORS,
    STATS_NFIELDS,
};

/* The counters of one path (relative to the backing root, "." for the
 * root itself).  Entries live until stats_destroy: reset only zeroes
 * them, so a pointer kept in an open file handle stays valid.
 */
struct stats_entry {
    struct stats_entry *next;
    uint64_t hash;
    uint64_t c[STATS_NFIELDS];
    char path[];
};

struct stats;

struct stats *stats_create (void);
void stats_destroy (struct stats *s);

/* The entry of path, created on first use; NULL with errno on ENOMEM. */
struct stats_entry *stats_get (struct stats *s, const char *path);

/* Add n to field of e (NULL-safe) and to the totals (lock-free). */
void stats_add (struct stats *s, struct stats_entry *e,
                enum stats_field field, uint64_t n);

/* Zero every counter, totals included. */
void stats_reset (struct stats *s);

/* Read one total. */
uint64_t stats_total (struct stats *s, enum stats_field field);

const char *stats_field_name (enum stats_field field);

/* Append "total.<field> <value>" for every field, then for every path with
 * a nonzero counter one "file.<field> <value> <path>" line per nonzero
 * field, paths in byte order ('\\' and newline in a path are escaped as
 * "\\\\" and "\\n").  Returns 0, or -1 with errno set.
 */
int stats_format (struct stats *s, FILE *out);

#endif /* !GFSEMU_STATS_H */
