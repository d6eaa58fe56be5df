/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fault.c - injected errors, short transfers and hangs of the GFS emulator
 *
 * The rule parser and matcher are pure (no FUSE) so that the unit test
 * drives them; fault_ctl adds the lock that lets the control file replace
 * the rules while requests check them, and the wait of hung requests.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fault.h"

enum fault_when {
    WHEN_EVERY = 0,
    WHEN_NTH,    /* only the Nth */
    WHEN_FROM,   /* the Nth and later */
    WHEN_CHANCE, /* ppm parts per million */
};

struct fault_rule {
    char *text; /* as written, trimmed */
    char *pattern;
    uint32_t ops; /* bit (1 << enum fault_op) */
    enum fault_kind kind;
    int err;
    enum fault_when when;
    uint64_t n;
    uint32_t ppm;
    uint64_t matched; /* atomic */
    uint64_t hits;    /* atomic */
};

struct fault_rules {
    struct fault_rule *v;
    size_t count;
    size_t alloc;
    uint64_t seed;
};

static const char *const op_names[FAULT_NOPS] = {
    [FAULT_LOOKUP] = "lookup",   [FAULT_GETATTR] = "getattr",
    [FAULT_SETATTR] = "setattr", [FAULT_OPEN] = "open",
    [FAULT_CREATE] = "create",   [FAULT_OPENDIR] = "opendir",
    [FAULT_READDIR] = "readdir", [FAULT_READ] = "read",
    [FAULT_WRITE] = "write",     [FAULT_FLUSH] = "flush",
    [FAULT_RELEASE] = "release", [FAULT_FSYNC] = "fsync",
    [FAULT_MKDIR] = "mkdir",     [FAULT_MKNOD] = "mknod",
    [FAULT_SYMLINK] = "symlink", [FAULT_READLINK] = "readlink",
    [FAULT_LINK] = "link",       [FAULT_UNLINK] = "unlink",
    [FAULT_RMDIR] = "rmdir",     [FAULT_RENAME] = "rename",
    [FAULT_STATFS] = "statfs",
};

static const struct {
    const char *name;
    int err;
} errors[] = {
    { "EIO", EIO },       { "ENOSPC", ENOSPC }, { "EACCES", EACCES },
    { "EDQUOT", EDQUOT }, { "EROFS", EROFS },   { "EPERM", EPERM },
    { "ENOENT", ENOENT }, { "ESTALE", ESTALE }, { "ETIMEDOUT", ETIMEDOUT },
    { "EFBIG", EFBIG },
};

#define ALL_OPS ((1u << FAULT_NOPS) - 1)
#define DATA_OPS ((1u << FAULT_READ) | (1u << FAULT_WRITE))

static void rule_free (struct fault_rule *r)
{
    free (r->text);
    free (r->pattern);
}

void fault_rules_destroy (struct fault_rules *r)
{
    size_t i;

    if (!r)
        return;
    for (i = 0; i < r->count; i++)
        rule_free (&r->v[i]);
    free (r->v);
    free (r);
}

static int parse_op (const char *s, uint32_t *ops)
{
    int i;

    if (!strcmp (s, "any")) {
        *ops = ALL_OPS;
        return 0;
    }
    for (i = 0; i < FAULT_NOPS; i++) {
        if (!strcmp (s, op_names[i])) {
            *ops = 1u << i;
            return 0;
        }
    }
    return -1;
}

static int parse_error (const char *s, struct fault_rule *r)
{
    size_t i;

    if (!strcasecmp (s, "short")) {
        r->kind = FAULT_SHORT;
        return 0;
    }
    if (!strcasecmp (s, "hang")) {
        r->kind = FAULT_HANG;
        return 0;
    }
    if (!strncasecmp (s, "delay", 5) && isdigit ((unsigned char) s[5])) {
        char *end;
        unsigned long ms;

        errno = 0;
        ms = strtoul (s + 5, &end, 10);
        if (errno || *end || ms == 0 || ms > 600000)
            return -1;
        r->kind = FAULT_DELAY;
        r->err = (int) ms;
        return 0;
    }
    for (i = 0; i < sizeof (errors) / sizeof (errors[0]); i++) {
        if (!strcasecmp (s, errors[i].name)) {
            r->kind = FAULT_ERROR;
            r->err = errors[i].err;
            return 0;
        }
    }
    return -1;
}

static int parse_count (const char *s, char **end, uint64_t *out)
{
    unsigned long long v;

    if (!isdigit ((unsigned char) *s))
        return -1;
    errno = 0;
    v = strtoull (s, end, 10);
    if (errno || v == 0)
        return -1;
    *out = v;
    return 0;
}

static int parse_when (const char *s, struct fault_rule *r)
{
    char *end;

    if (*s == 'p') {
        double p;

        s++;
        if (!isdigit ((unsigned char) *s))
            return -1;
        errno = 0;
        p = strtod (s, &end);
        if (errno || *end || !(p > 0 && p <= 100))
            return -1;
        r->when = WHEN_CHANCE;
        r->ppm = (uint32_t) llround (p * 10000);
        if (r->ppm == 0)
            r->ppm = 1;
        return 0;
    }
    if (parse_count (s, &end, &r->n) < 0)
        return -1;
    if (*end == '+') {
        r->when = WHEN_FROM;
        end++;
    }
    else
        r->when = WHEN_NTH;
    return *end ? -1 : 0;
}

/* Split one rule (trimmed, in a buffer of its own) into r.  Returns 0, or
 * -1 with what is wrong in msg. */
static int parse_rule (char *s, struct fault_rule *r, char *msg, size_t msglen)
{
    char *field[5];
    int n = 0;
    char *p = s;

    while (n < 5) {
        field[n++] = p;
        if (!(p = strchr (p, ':')))
            break;
        *p++ = '\0';
    }
    if (n < 3 || n > 4) {
        snprintf (msg, msglen, "expected PATTERN:OP:ERROR[:WHEN]");
        return -1;
    }
    if (!*field[0]) {
        snprintf (msg, msglen, "empty pattern");
        return -1;
    }
    if (parse_op (field[1], &r->ops) < 0) {
        snprintf (msg, msglen, "unknown request '%s'", field[1]);
        return -1;
    }
    if (parse_error (field[2], r) < 0) {
        snprintf (msg, msglen, "unknown error '%s'", field[2]);
        return -1;
    }
    if (r->kind == FAULT_SHORT) {
        if (!(r->ops & DATA_OPS)) {
            snprintf (msg, msglen, "short applies to read and write only");
            return -1;
        }
        r->ops &= DATA_OPS;
    }
    if (n == 4 && parse_when (field[3], r) < 0) {
        snprintf (msg, msglen, "bad WHEN '%s' (N, N+ or pP)", field[3]);
        return -1;
    }
    if (!(r->pattern = strdup (field[0])))
        return -1;
    return 0;
}

static int add_piece (struct fault_rules *rs, const char *piece, size_t len,
                      char *msg, size_t msglen)
{
    struct fault_rule r = { 0 };
    char sub[256];
    char *s = NULL;

    if (!(s = strndup (piece, len)) || !(r.text = strdup (s)))
        goto nomem;
    if (!strncmp (s, "seed=", 5)) {
        char *end;

        errno = 0;
        if (!isdigit ((unsigned char) s[5])
            || (rs->seed = strtoull (s + 5, &end, 10), errno) || *end) {
            snprintf (msg, msglen, "'%s': expected seed=N", r.text);
            goto inval;
        }
        free (r.text);
        free (s);
        return 0;
    }
    sub[0] = '\0';
    if (parse_rule (s, &r, sub, sizeof (sub)) < 0) {
        if (!sub[0])
            goto nomem;
        snprintf (msg, msglen, "rule %zu '%s': %s", rs->count + 1, r.text, sub);
        goto inval;
    }
    free (s);
    s = NULL;
    if (rs->count == rs->alloc) {
        size_t n = rs->alloc ? 2 * rs->alloc : 8;
        struct fault_rule *v = realloc (rs->v, n * sizeof (*v));

        if (!v)
            goto nomem;
        rs->v = v;
        rs->alloc = n;
    }
    rs->v[rs->count++] = r;
    return 0;
nomem:
    snprintf (msg, msglen, "out of memory");
    free (s);
    rule_free (&r);
    errno = ENOMEM;
    return -1;
inval:
    free (s);
    rule_free (&r);
    errno = EINVAL;
    return -1;
}

/* One line (without its newline): drop the comment, then each piece
 * between ';' trimmed. */
static int add_line (struct fault_rules *rs, const char *line, size_t len,
                     char *msg, size_t msglen)
{
    size_t i, start = 0;

    for (i = 0; i < len; i++) {
        if (line[i] == '#' && (i == 0 || isblank ((unsigned char) line[i - 1])))
            len = i;
    }
    for (i = 0; i <= len; i++) {
        if (i < len && line[i] != ';')
            continue;
        {
            const char *p = line + start;
            size_t n = i - start;

            while (n > 0 && isspace ((unsigned char) *p))
                p++, n--;
            while (n > 0 && isspace ((unsigned char) p[n - 1]))
                n--;
            if (n > 0 && add_piece (rs, p, n, msg, msglen) < 0)
                return -1;
        }
        start = i + 1;
    }
    return 0;
}

struct fault_rules *fault_rules_parse (const char *text, uint64_t seed,
                                       char *msg, size_t msglen)
{
    struct fault_rules *rs;
    const char *p = text ? text : "";

    if (msglen > 0)
        msg[0] = '\0';
    if (!(rs = calloc (1, sizeof (*rs)))) {
        snprintf (msg, msglen, "out of memory");
        return NULL;
    }
    rs->seed = seed;
    while (*p) {
        const char *nl = strchr (p, '\n');
        size_t len = nl ? (size_t) (nl - p) : strlen (p);

        if (add_line (rs, p, len, msg, msglen) < 0) {
            int e = errno;

            fault_rules_destroy (rs);
            errno = e;
            return NULL;
        }
        p += len;
        if (*p)
            p++;
    }
    return rs;
}

size_t fault_rules_count (const struct fault_rules *r)
{
    return r ? r->count : 0;
}

uint64_t fault_rules_seed (const struct fault_rules *r)
{
    return r ? r->seed : 0;
}

uint64_t fault_rules_hits (const struct fault_rules *r)
{
    uint64_t sum = 0;
    size_t i;

    for (i = 0; r && i < r->count; i++)
        sum += __atomic_load_n (&r->v[i].hits, __ATOMIC_RELAXED);
    return sum;
}

static uint64_t mix64 (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

int fault_chance (uint64_t seed, size_t idx, uint64_t n, uint32_t ppm)
{
    uint64_t h = mix64 (mix64 (mix64 (seed) ^ (uint64_t) idx) ^ n);

    return h % 1000000 < ppm;
}

static bool rule_fires (const struct fault_rules *rs, size_t idx, uint64_t n)
{
    const struct fault_rule *r = &rs->v[idx];

    switch (r->when) {
        case WHEN_NTH:
            return n == r->n;
        case WHEN_FROM:
            return n >= r->n;
        case WHEN_CHANCE:
            return fault_chance (rs->seed, idx, n, r->ppm);
        default:
            return true;
    }
}

enum fault_kind fault_rules_match (struct fault_rules *rs, const char *path,
                                   enum fault_op op, int *err)
{
    enum fault_kind kind = FAULT_NONE;
    size_t i;

    if (!rs || (unsigned int) op >= FAULT_NOPS || !strcmp (path, "."))
        return FAULT_NONE;
    for (i = 0; i < rs->count; i++) {
        struct fault_rule *r = &rs->v[i];
        uint64_t n;

        if (!(r->ops & (1u << op)) || fnmatch (r->pattern, path, 0) != 0)
            continue;
        n = __atomic_add_fetch (&r->matched, 1, __ATOMIC_RELAXED);
        if (kind != FAULT_NONE || !rule_fires (rs, i, n))
            continue;
        __atomic_add_fetch (&r->hits, 1, __ATOMIC_RELAXED);
        kind = r->kind;
        if (kind == FAULT_ERROR || kind == FAULT_DELAY)
            *err = r->err;
    }
    return kind;
}

int fault_rules_format (const struct fault_rules *rs, FILE *out)
{
    size_t i;

    fprintf (out, "seed=%" PRIu64 "\n", fault_rules_seed (rs));
    for (i = 0; rs && i < rs->count; i++)
        fprintf (out, "%s # hits %" PRIu64 " matched %" PRIu64 "\n",
                 rs->v[i].text,
                 __atomic_load_n (&rs->v[i].hits, __ATOMIC_RELAXED),
                 __atomic_load_n (&rs->v[i].matched, __ATOMIC_RELAXED));
    return ferror (out) ? -1 : 0;
}

/*
 * The rules at run time.
 */

struct fault_ctl {
    pthread_rwlock_t lock; /* rules: read to match, write to replace */
    struct fault_rules *rules;
    uint64_t nrules; /* atomic: 0 skips the lock */
    uint64_t seed;
    unsigned int hang_max;

    pthread_mutex_t hang_lock; /* generation and hung */
    pthread_cond_t hang_cond;
    uint64_t generation; /* sets so far */
    uint64_t hung;
};

struct fault_ctl *fault_ctl_create (struct fault_rules *rules, uint64_t seed,
                                    unsigned int hang_max)
{
    struct fault_ctl *c;
    pthread_condattr_t ca;

    if (!(c = calloc (1, sizeof (*c))))
        return NULL;
    pthread_rwlock_init (&c->lock, NULL);
    pthread_mutex_init (&c->hang_lock, NULL);
    pthread_condattr_init (&ca);
    pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
    pthread_cond_init (&c->hang_cond, &ca);
    pthread_condattr_destroy (&ca);
    c->rules = rules;
    c->nrules = fault_rules_count (rules);
    c->seed = seed;
    c->hang_max = hang_max;
    return c;
}

void fault_ctl_destroy (struct fault_ctl *c)
{
    if (!c)
        return;
    fault_rules_destroy (c->rules);
    pthread_rwlock_destroy (&c->lock);
    pthread_cond_destroy (&c->hang_cond);
    pthread_mutex_destroy (&c->hang_lock);
    free (c);
}

int fault_ctl_set (struct fault_ctl *c, const char *text, char *msg,
                   size_t msglen)
{
    struct fault_rules *rs, *old;

    if (!(rs = fault_rules_parse (text, c->seed, msg, msglen)))
        return -1;
    pthread_rwlock_wrlock (&c->lock);
    old = c->rules;
    c->rules = rs;
    __atomic_store_n (&c->nrules, fault_rules_count (rs), __ATOMIC_RELEASE);
    pthread_rwlock_unlock (&c->lock);
    fault_rules_destroy (old);

    pthread_mutex_lock (&c->hang_lock);
    c->generation++;
    pthread_cond_broadcast (&c->hang_cond);
    pthread_mutex_unlock (&c->hang_lock);
    return 0;
}

enum fault_kind fault_ctl_check (struct fault_ctl *c, const char *path,
                                 enum fault_op op, int *err)
{
    enum fault_kind kind;

    if (__atomic_load_n (&c->nrules, __ATOMIC_ACQUIRE) == 0)
        return FAULT_NONE;
    pthread_rwlock_rdlock (&c->lock);
    kind = fault_rules_match (c->rules, path, op, err);
    pthread_rwlock_unlock (&c->lock);
    return kind;
}

int fault_ctl_hang (struct fault_ctl *c, int (*stop_f) (void *), void *arg)
{
    uint64_t gen;
    int rc = 0;

    pthread_mutex_lock (&c->hang_lock);
    if (c->hung >= c->hang_max) {
        pthread_mutex_unlock (&c->hang_lock);
        return -1;
    }
    gen = c->generation;
    c->hung++;
    while (c->generation == gen) {
        struct timespec ts;

        if (stop_f && stop_f (arg)) {
            rc = 1;
            break;
        }
        clock_gettime (CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        (void) pthread_cond_timedwait (&c->hang_cond, &c->hang_lock, &ts);
    }
    c->hung--;
    pthread_mutex_unlock (&c->hang_lock);
    return rc;
}

void fault_ctl_get (struct fault_ctl *c, struct fault_ctl_stats *st)
{
    pthread_rwlock_rdlock (&c->lock);
    st->rules = fault_rules_count (c->rules);
    st->hits = fault_rules_hits (c->rules);
    st->seed = c->rules ? fault_rules_seed (c->rules) : c->seed;
    pthread_rwlock_unlock (&c->lock);
    pthread_mutex_lock (&c->hang_lock);
    st->hung = c->hung;
    pthread_mutex_unlock (&c->hang_lock);
}

int fault_ctl_format (struct fault_ctl *c, FILE *out)
{
    int rc;

    pthread_rwlock_rdlock (&c->lock);
    if (c->rules)
        rc = fault_rules_format (c->rules, out);
    else {
        fprintf (out, "seed=%" PRIu64 "\n", c->seed);
        rc = ferror (out) ? -1 : 0;
    }
    pthread_rwlock_unlock (&c->lock);
    return rc;
}
