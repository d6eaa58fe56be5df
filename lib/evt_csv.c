/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* evt_csv.c - per-node completion times (run,node,seconds) and block maxima */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "evt.h"

#define FIELDS_MAX 64
#define CLIP 40

/* A string -> index map (open addressing), for runs and (run, node). */
struct slot {
    char *key;
    size_t len;
    size_t val;
    uint64_t hash;
};

struct strmap {
    size_t cap;
    size_t count;
    struct slot *slots;
};

static uint64_t fnv1a (const char *s, size_t len)
{
    uint64_t h = 14695981039346656037ULL;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char) s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static void map_free (struct strmap *m)
{
    if (m->slots) {
        for (size_t i = 0; i < m->cap; i++)
            free (m->slots[i].key);
        free (m->slots);
    }
    m->slots = NULL;
    m->cap = m->count = 0;
}

static int map_grow (struct strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    struct slot *slots = calloc (cap, sizeof (*slots));

    if (!slots)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        struct slot *s = &m->slots[i];
        if (s->key) {
            size_t j = s->hash & (cap - 1);
            while (slots[j].key)
                j = (j + 1) & (cap - 1);
            slots[j] = *s;
        }
    }
    free (m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

/* Find key; if absent, add it with value val.  Returns 1 (found, *found
 * is its value), 0 (added) or -1 (out of memory).
 */
static int map_lookup_add (struct strmap *m, const char *key, size_t len,
                           size_t val, size_t *found)
{
    uint64_t h = fnv1a (key, len);
    size_t j;

    if ((m->count + 1) * 2 > m->cap && map_grow (m) < 0)
        return -1;
    for (j = h & (m->cap - 1); m->slots[j].key; j = (j + 1) & (m->cap - 1)) {
        struct slot *s = &m->slots[j];
        if (s->hash == h && s->len == len && !memcmp (s->key, key, len)) {
            *found = s->val;
            return 1;
        }
    }
    if (!(m->slots[j].key = malloc (len + 1)))
        return -1;
    memcpy (m->slots[j].key, key, len);
    m->slots[j].key[len] = '\0';
    m->slots[j].len = len;
    m->slots[j].val = val;
    m->slots[j].hash = h;
    m->count++;
    return 0;
}

/* A field for a message: clipped, control characters shown as '?'. */
static const char *clip (const char *s, size_t len, char *buf, size_t size)
{
    size_t n = len < size - 4 ? len : size - 4;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        buf[i] = c < 0x20 || c == 0x7f ? '?' : c;
    }
    if (n < len)
        memcpy (buf + n, "...", 4);
    else
        buf[n] = '\0';
    return buf;
}

static int cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y ? 1 : 0;
}

struct field {
    char *s;
    size_t len;
};

static bool is_blank (int c)
{
    return c == ' ' || c == '\t';
}

/* Split line in place into fields: commas separate, blanks around a field
 * are dropped, a field may be double-quoted ("" is a quote inside).
 */
static int split (char *line, struct field *f, size_t *count,
                  const char **problem)
{
    char *p = line;
    size_t n = 0;

    for (;;) {
        char *start, *out;

        while (is_blank (*p))
            p++;
        if (n == FIELDS_MAX) {
            *problem = "too many fields";
            return -1;
        }
        if (*p == '"') {
            start = out = ++p;
            for (;;) {
                if (*p == '\0') {
                    *problem = "unterminated quoted field";
                    return -1;
                }
                if (*p == '"') {
                    if (p[1] == '"') {
                        *out++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *out++ = *p++;
            }
            f[n].s = start;
            f[n].len = out - start;
            while (is_blank (*p))
                p++;
            if (*p != ',' && *p != '\0') {
                *problem = "text after a quoted field";
                return -1;
            }
        }
        else {
            start = p;
            while (*p != ',' && *p != '\0') {
                if (*p == '"') {
                    *problem = "a quote inside an unquoted field";
                    return -1;
                }
                p++;
            }
            out = p;
            while (out > start && is_blank (out[-1]))
                out--;
            f[n].s = start;
            f[n].len = out - start;
        }
        n++;
        if (*p == '\0')
            break;
        *p++ = '\0';    /* the comma */
    }
    for (size_t i = 0; i < n; i++)
        f[i].s[f[i].len] = '\0';
    *count = n;
    return 0;
}

/* Read one line without its newline (and a trailing CR).  Returns its
 * length, or -1 at the end of the file; *toolong and *nul report a line
 * over size - 1 bytes (the rest is skipped) and a NUL byte.
 */
static long read_line (FILE *f, char *buf, size_t size, bool *toolong,
                       bool *nul)
{
    size_t n = 0;
    int c;

    *toolong = *nul = false;
    while ((c = getc (f)) != EOF && c != '\n') {
        if (c == '\0')
            *nul = true;
        if (n < size - 1)
            buf[n++] = c;
        else
            *toolong = true;
    }
    if (c == EOF && n == 0 && !*toolong && !*nul)
        return -1;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    buf[n] = '\0';
    return n;
}

static int parse_seconds (const char *s, size_t len, double *v, char *why,
                          size_t size)
{
    char tmp[CLIP + 8];
    const char *p = s;
    char *end;

    if (len == 0)
        return snprintf (why, size, "seconds is missing"), -1;
    if (*p == '+' || *p == '-')
        p++;
    if (!strcasecmp (p, "nan"))
        return snprintf (why, size, "seconds is NaN"), -1;
    if (!strcasecmp (p, "inf") || !strcasecmp (p, "infinity"))
        return snprintf (why, size, "seconds is infinite"), -1;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit ((unsigned char) s[i]) && !strchr (".eE+-", s[i]))
            goto nan;
    }
    errno = 0;
    *v = strtod (s, &end);
    if (end == s || *end != '\0')
        goto nan;
    if (errno == ERANGE && fabs (*v) > 1.)
        return snprintf (why, size, "seconds '%s' is out of range",
                         clip (s, len, tmp, sizeof (tmp))), -1;
    if (*v < 0.)
        return snprintf (why, size, "seconds is negative (%s)",
                         clip (s, len, tmp, sizeof (tmp))), -1;
    if (*v == 0.)
        *v = 0.;        /* -0 */
    return 0;
nan:
    snprintf (why, size, "seconds '%s' is not a number",
              clip (s, len, tmp, sizeof (tmp)));
    return -1;
}

void tier_evt_times_destroy (struct tier_evt_times *t)
{
    if (t) {
        int saved = errno;
        for (size_t i = 0; i < t->nruns; i++) {
            free (t->runs[i].name);
            free (t->runs[i].seconds);
            free (t->runs[i].lines);
        }
        free (t->runs);
        free (t->file);
        free (t);
        errno = saved;
    }
}

static int run_add (struct tier_evt_run *r, double v, size_t line)
{
    if (r->count == r->alloc) {
        size_t alloc = r->alloc ? r->alloc * 2 : 8;
        double *s = realloc (r->seconds, alloc * sizeof (*s));
        size_t *l;
        if (!s)
            return -1;
        r->seconds = s;
        if (!(l = realloc (r->lines, alloc * sizeof (*l))))
            return -1;
        r->lines = l;
        r->alloc = alloc;
    }
    r->seconds[r->count] = v;
    r->lines[r->count] = line;
    r->count++;
    return 0;
}

struct parser {
    struct tier_evt_times *t;
    size_t nfields;
    int col_run, col_node, col_sec;
    size_t runs_alloc;
    struct strmap runs;
    struct strmap pairs;
    char *key;
};

static int parse_header (struct parser *ps, struct field *f, size_t n,
                         size_t line, tier_error_t *error)
{
    static const char *names[] = { "run", "node", "seconds" };
    int *cols[] = { &ps->col_run, &ps->col_node, &ps->col_sec };
    const char *file = ps->t->file;
    char tmp[CLIP + 8];

    ps->col_run = ps->col_node = ps->col_sec = -1;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++) {
            if (f[i].len == strlen (names[k])
                && !strcasecmp (f[i].s, names[k])) {
                if (*cols[k] >= 0) {
                    errno = EINVAL;
                    return tier_errprintf (error, "%s:%zu: bad header: "
                                           "column '%s' appears twice",
                                           file, line, names[k]);
                }
                *cols[k] = i;
            }
        }
    }
    for (int k = 0; k < 3; k++) {
        if (*cols[k] < 0) {
            errno = EINVAL;
            return tier_errprintf (error, "%s:%zu: bad header: no '%s' "
                                   "column (expected run,node,seconds, "
                                   "found '%s%s')", file, line, names[k],
                                   clip (f[0].s, f[0].len, tmp,
                                         sizeof (tmp)),
                                   n > 1 ? ",..." : "");
        }
    }
    ps->nfields = n;
    return 0;
}

static int parse_row (struct parser *ps, struct field *f, size_t n,
                      size_t line, tier_error_t *error)
{
    struct tier_evt_times *t = ps->t;
    const char *file = t->file;
    struct field *run = &f[ps->col_run], *node = &f[ps->col_node];
    char why[128], tmp[CLIP + 8];
    size_t idx, prev;
    double v;
    int rc;

    if (n != ps->nfields) {
        errno = EINVAL;
        return tier_errprintf (error, "%s:%zu: expected %zu fields, found "
                               "%zu", file, line, ps->nfields, n);
    }
    if (run->len == 0 || node->len == 0) {
        errno = EINVAL;
        return tier_errprintf (error, "%s:%zu: %s is empty", file, line,
                               run->len == 0 ? "run" : "node");
    }
    if (parse_seconds (f[ps->col_sec].s, f[ps->col_sec].len, &v, why,
                       sizeof (why)) < 0) {
        errno = EINVAL;
        return tier_errprintf (error, "%s:%zu: %s", file, line, why);
    }
    if (t->rows >= TIER_EVT_ROWS_MAX) {
        errno = EFBIG;
        return tier_errprintf (error, "%s:%zu: more than %d rows", file,
                               line, TIER_EVT_ROWS_MAX);
    }
    if ((rc = map_lookup_add (&ps->runs, run->s, run->len, t->nruns,
                              &idx)) < 0)
        goto nomem;
    if (rc == 0) {
        struct tier_evt_run *r;
        if (t->nruns == ps->runs_alloc) {
            size_t alloc = ps->runs_alloc ? ps->runs_alloc * 2 : 16;
            void *p = realloc (t->runs, alloc * sizeof (*t->runs));
            if (!p)
                goto nomem;
            t->runs = p;
            ps->runs_alloc = alloc;
        }
        r = &t->runs[t->nruns];
        memset (r, 0, sizeof (*r));
        if (!(r->name = strdup (run->s)))
            goto nomem;
        r->line = line;
        idx = t->nruns++;
    }
    /* the key of the pair: "<run index>:<node>" */
    {
        int k = snprintf (ps->key, TIER_EVT_LINE_MAX + 32, "%zu:", idx);
        memcpy (ps->key + k, node->s, node->len);
        if ((rc = map_lookup_add (&ps->pairs, ps->key, k + node->len, line,
                                  &prev)) < 0)
            goto nomem;
        if (rc == 1) {
            char tmp2[CLIP + 8];
            errno = EINVAL;
            return tier_errprintf (error, "%s:%zu: duplicate time for run "
                                   "'%s' node '%s' (first on line %zu)",
                                   file, line,
                                   clip (run->s, run->len, tmp,
                                         sizeof (tmp)),
                                   clip (node->s, node->len, tmp2,
                                         sizeof (tmp2)), prev);
        }
    }
    if (run_add (&t->runs[idx], v, line) < 0)
        goto nomem;
    t->rows++;
    return 0;
nomem:
    errno = ENOMEM;
    return tier_errprintf (error, "%s:%zu: out of memory", file, line);
}

struct tier_evt_times *tier_evt_times_read (FILE *f, const char *file,
                                            tier_error_t *error)
{
    struct parser ps = { .col_run = -1 };
    struct tier_evt_times *t;
    struct field fields[FIELDS_MAX];
    char *buf = NULL;
    bool header = false;
    size_t line = 0;

    if (!file)
        file = "<input>";
    if (!(t = calloc (1, sizeof (*t))) || !(t->file = strdup (file))
        || !(buf = malloc (TIER_EVT_LINE_MAX + 1))
        || !(ps.key = malloc (TIER_EVT_LINE_MAX + 32))) {
        errno = ENOMEM;
        tier_errprintf (error, "%s: out of memory", file);
        goto error;
    }
    ps.t = t;
    for (;;) {
        bool toolong, nul;
        long len = read_line (f, buf, TIER_EVT_LINE_MAX + 1, &toolong,
                              &nul);
        char *p = buf;
        const char *problem;
        size_t n;

        if (len < 0)
            break;
        line++;
        if (nul) {
            errno = EINVAL;
            tier_errprintf (error, "%s:%zu: NUL byte (not a text file?)",
                            file, line);
            goto error;
        }
        if (toolong) {
            errno = EINVAL;
            tier_errprintf (error, "%s:%zu: line longer than %d bytes",
                            file, line, TIER_EVT_LINE_MAX);
            goto error;
        }
        if (line == 1 && !strncmp (p, "\xef\xbb\xbf", 3))
            p += 3;     /* UTF-8 byte order mark */
        while (is_blank (*p))
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        if (split (p, fields, &n, &problem) < 0) {
            errno = EINVAL;
            tier_errprintf (error, "%s:%zu: %s", file, line, problem);
            goto error;
        }
        if (!header) {
            if (parse_header (&ps, fields, n, line, error) < 0)
                goto error;
            header = true;
        }
        else if (parse_row (&ps, fields, n, line, error) < 0)
            goto error;
    }
    if (ferror (f)) {
        errno = errno ? errno : EIO;
        tier_errprintf (error, "%s:%zu: read error: %s", file, line + 1,
                        strerror (errno));
        goto error;
    }
    t->last_line = line;
    if (!header) {
        errno = EINVAL;
        tier_errprintf (error, "%s:%zu: no header (expected "
                        "run,node,seconds)", file, line);
        goto error;
    }
    if (t->rows == 0) {
        errno = EINVAL;
        tier_errprintf (error, "%s:%zu: no times after the header", file,
                        line);
        goto error;
    }
    map_free (&ps.runs);
    map_free (&ps.pairs);
    free (ps.key);
    free (buf);
    return t;
error:
    map_free (&ps.runs);
    map_free (&ps.pairs);
    free (ps.key);
    free (buf);
    tier_evt_times_destroy (t);
    return NULL;
}

struct tier_evt_times *tier_evt_times_load (const char *path,
                                            tier_error_t *error)
{
    struct tier_evt_times *t;
    FILE *f;

    if (!path) {
        errno = EINVAL;
        tier_errprintf (error, "no file");
        return NULL;
    }
    if (!strcmp (path, "-"))
        return tier_evt_times_read (stdin, "<stdin>", error);
    if (!(f = fopen (path, "r"))) {
        tier_errprintf (error, "%s: %s", path, strerror (errno));
        return NULL;
    }
    t = tier_evt_times_read (f, path, error);
    fclose (f);
    return t;
}

void tier_evt_blocks_free (struct tier_evt_blocks *b)
{
    if (b) {
        int saved = errno;
        free (b->max);
        free (b->line);
        b->max = NULL;
        b->line = NULL;
        b->n = 0;
        errno = saved;
    }
}

int tier_evt_times_blocks (const struct tier_evt_times *t, size_t block,
                           struct tier_evt_blocks *b, tier_error_t *error)
{
    const char *file = t->file;
    size_t n, k = 0;

    memset (b, 0, sizeof (*b));
    if (block == 0) {
        const struct tier_evt_run *r0 = &t->runs[0];
        for (size_t i = 1; i < t->nruns; i++) {
            const struct tier_evt_run *r = &t->runs[i];
            char a[CLIP + 8], c[CLIP + 8];
            if (r->count != r0->count) {
                errno = EINVAL;
                return tier_errprintf (error, "%s:%zu: run '%s' has %zu "
                                       "node%s but run '%s' (line %zu) "
                                       "has %zu: one run cannot be one "
                                       "block; choose a block size",
                                       file, r->line,
                                       clip (r->name, strlen (r->name), a,
                                             sizeof (a)),
                                       r->count, r->count == 1 ? "" : "s",
                                       clip (r0->name, strlen (r0->name), c,
                                             sizeof (c)),
                                       r0->line, r0->count);
            }
        }
        b->block = r0->count;
        n = t->nruns;
    }
    else {
        b->block = block;
        n = t->rows / block;
        b->dropped = t->rows % block;
    }
    if (n < 3) {
        errno = EINVAL;
        return tier_errprintf (error, "%s:%zu: %zu block%s of %zu node%s "
                               "in the file; at least 3 blocks are needed",
                               file, t->last_line, n, n == 1 ? "" : "s",
                               b->block, b->block == 1 ? "" : "s");
    }
    if (!(b->max = malloc (n * sizeof (double)))
        || !(b->line = malloc (n * sizeof (size_t)))) {
        tier_evt_blocks_free (b);
        errno = ENOMEM;
        return tier_errprintf (error, "%s: out of memory", file);
    }
    b->n = n;
    /* walk the times in order, b->block at a time */
    {
        size_t used = 0, run0 = 0;
        for (size_t i = 0; i < t->nruns && k < n; i++) {
            const struct tier_evt_run *r = &t->runs[i];
            for (size_t j = 0; j < r->count && k < n; j++) {
                double v = r->seconds[j];
                if (used == 0 || v > b->max[k]) {
                    b->max[k] = v;
                    b->line[k] = r->lines[j];
                }
                if (used == 0)
                    run0 = i;
                else if (run0 != i)
                    b->straddle = true;
                if (++used == b->block) {
                    used = 0;
                    k++;
                }
            }
        }
    }
    /* a GEV needs at least 3 different values */
    {
        double *v = malloc (n * sizeof (double));
        size_t distinct = 1;
        if (!v) {
            tier_evt_blocks_free (b);
            errno = ENOMEM;
            return tier_errprintf (error, "%s: out of memory", file);
        }
        memcpy (v, b->max, n * sizeof (double));
        qsort (v, n, sizeof (double), cmp_double);
        for (size_t i = 1; i < n; i++)
            distinct += v[i] != v[i - 1];
        if (distinct < 3) {
            errno = EDOM;
            if (distinct == 1)
                tier_errprintf (error, "%s:%zu: all %zu block maxima are "
                                "%g s: a GEV needs maxima that vary", file,
                                t->runs[0].line, n, v[0]);
            else
                tier_errprintf (error, "%s:%zu: the %zu block maxima take "
                                "only 2 values (%g and %g s): a GEV needs "
                                "at least 3", file, t->runs[0].line, n, v[0],
                                v[n - 1]);
            free (v);
            tier_evt_blocks_free (b);
            return -1;
        }
        free (v);
    }
    return 0;
}
