/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stats.c - per-file and total counters of the GFS emulator */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

struct stats {
    pthread_mutex_t lock;       /* the table; counters are atomic */
    struct stats_entry **bucket;
    size_t nbuckets;            /* a power of two */
    size_t count;
    uint64_t total[STATS_NFIELDS];
};

static const char *field_names[STATS_NFIELDS] = {
    [STATS_LOOKUP] = "lookup",
    [STATS_LOOKUP_MISS] = "lookup_miss",
    [STATS_GETATTR] = "getattr",
    [STATS_SETATTR] = "setattr",
    [STATS_OPEN] = "open",
    [STATS_CREATE] = "create",
    [STATS_OPENDIR] = "opendir",
    [STATS_READDIR] = "readdir",
    [STATS_READ] = "read",
    [STATS_READ_BYTES] = "read_bytes",
    [STATS_WRITE] = "write",
    [STATS_WRITE_BYTES] = "write_bytes",
    [STATS_FLUSH] = "flush",
    [STATS_RELEASE] = "release",
    [STATS_FSYNC] = "fsync",
    [STATS_MKDIR] = "mkdir",
    [STATS_MKNOD] = "mknod",
    [STATS_SYMLINK] = "symlink",
    [STATS_READLINK] = "readlink",
    [STATS_LINK] = "link",
    [STATS_UNLINK] = "unlink",
    [STATS_RMDIR] = "rmdir",
    [STATS_RENAME] = "rename",
    [STATS_STATFS] = "statfs",
    [STATS_ERRORS] = "errors",
};

const char *stats_field_name (enum stats_field field)
{
    if ((unsigned int)field >= STATS_NFIELDS)
        return NULL;
    return field_names[field];
}

/* FNV-1a */
static uint64_t hash_path (const char *path)
{
    uint64_t h = 14695981039346656037ULL;

    for (; *path; path++) {
        h ^= (unsigned char)*path;
        h *= 1099511628211ULL;
    }
    return h;
}

struct stats *stats_create (void)
{
    struct stats *s;

    if (!(s = calloc (1, sizeof (*s))))
        return NULL;
    s->nbuckets = 1024;
    if (!(s->bucket = calloc (s->nbuckets, sizeof (s->bucket[0])))) {
        free (s);
        return NULL;
    }
    pthread_mutex_init (&s->lock, NULL);
    return s;
}

void stats_destroy (struct stats *s)
{
    int saved_errno = errno;
    struct stats_entry *e, *next;
    size_t i;

    if (!s)
        return;
    for (i = 0; i < s->nbuckets; i++) {
        for (e = s->bucket[i]; e; e = next) {
            next = e->next;
            free (e);
        }
    }
    free (s->bucket);
    pthread_mutex_destroy (&s->lock);
    free (s);
    errno = saved_errno;
}

/* Double the table when it is twice as full as it has buckets; on ENOMEM
 * the chains just get longer. */
static void grow (struct stats *s)
{
    size_t n = s->nbuckets * 2;
    struct stats_entry **b, *e, *next;
    size_t i;

    if (!(b = calloc (n, sizeof (b[0]))))
        return;
    for (i = 0; i < s->nbuckets; i++) {
        for (e = s->bucket[i]; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free (s->bucket);
    s->bucket = b;
    s->nbuckets = n;
}

struct stats_entry *stats_get (struct stats *s, const char *path)
{
    uint64_t h = hash_path (path);
    struct stats_entry *e;
    size_t len;

    pthread_mutex_lock (&s->lock);
    for (e = s->bucket[h & (s->nbuckets - 1)]; e; e = e->next) {
        if (e->hash == h && !strcmp (e->path, path))
            goto out;
    }
    len = strlen (path);
    if (!(e = calloc (1, sizeof (*e) + len + 1)))
        goto out;
    memcpy (e->path, path, len + 1);
    e->hash = h;
    e->next = s->bucket[h & (s->nbuckets - 1)];
    s->bucket[h & (s->nbuckets - 1)] = e;
    if (++s->count > 2 * s->nbuckets)
        grow (s);
out:
    pthread_mutex_unlock (&s->lock);
    return e;
}

void stats_add (struct stats *s, struct stats_entry *e,
                enum stats_field field, uint64_t n)
{
    if (e)
        __atomic_fetch_add (&e->c[field], n, __ATOMIC_RELAXED);
    __atomic_fetch_add (&s->total[field], n, __ATOMIC_RELAXED);
}

uint64_t stats_total (struct stats *s, enum stats_field field)
{
    return __atomic_load_n (&s->total[field], __ATOMIC_RELAXED);
}

void stats_reset (struct stats *s)
{
    struct stats_entry *e;
    size_t i;
    int f;

    pthread_mutex_lock (&s->lock);
    for (i = 0; i < s->nbuckets; i++) {
        for (e = s->bucket[i]; e; e = e->next) {
            for (f = 0; f < STATS_NFIELDS; f++)
                __atomic_store_n (&e->c[f], 0, __ATOMIC_RELAXED);
        }
    }
    for (f = 0; f < STATS_NFIELDS; f++)
        __atomic_store_n (&s->total[f], 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock (&s->lock);
}

static int cmp_path (const void *a, const void *b)
{
    const struct stats_entry *ea = *(struct stats_entry *const *)a;
    const struct stats_entry *eb = *(struct stats_entry *const *)b;

    return strcmp (ea->path, eb->path);
}

static void put_path (FILE *out, const char *path)
{
    for (; *path; path++) {
        if (*path == '\\')
            fputs ("\\\\", out);
        else if (*path == '\n')
            fputs ("\\n", out);
        else
            fputc (*path, out);
    }
}

int stats_format (struct stats *s, FILE *out)
{
    struct stats_entry **v = NULL;
    struct stats_entry *e;
    uint64_t c[STATS_NFIELDS];
    size_t i, n = 0;
    int f, nonzero;

    for (f = 0; f < STATS_NFIELDS; f++)
        fprintf (out, "total.%s %" PRIu64 "\n", field_names[f],
                 stats_total (s, f));

    pthread_mutex_lock (&s->lock);
    if (s->count > 0 && !(v = malloc (s->count * sizeof (v[0])))) {
        pthread_mutex_unlock (&s->lock);
        return -1;
    }
    for (i = 0; i < s->nbuckets; i++) {
        for (e = s->bucket[i]; e; e = e->next)
            v[n++] = e;
    }
    /* Entries are never freed while the table exists, so they can be
     * read after the lock is dropped. */
    pthread_mutex_unlock (&s->lock);
    if (n > 0)
        qsort (v, n, sizeof (v[0]), cmp_path);
    for (i = 0; i < n; i++) {
        nonzero = 0;
        for (f = 0; f < STATS_NFIELDS; f++) {
            c[f] = __atomic_load_n (&v[i]->c[f], __ATOMIC_RELAXED);
            nonzero |= c[f] != 0;
        }
        if (!nonzero)
            continue;
        for (f = 0; f < STATS_NFIELDS; f++) {
            if (c[f] == 0)
                continue;
            fprintf (out, "file.%s %" PRIu64 " ", field_names[f], c[f]);
            put_path (out, v[i]->path);
            fputc ('\n', out);
        }
    }
    free (v);
    return ferror (out) ? -1 : 0;
}
