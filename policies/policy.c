/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy.c - policies and sets: attributes, validation, layer documents */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/paths.h"
#include "lib/units.h"
#include "lib/url.h"
#include "policy.h"

#define COMMENT_MAX 512
#define BLOCK_MIN 4096ULL
#define BLOCK_MAX (1ULL << 30)
#define SOURCE_MAX 1024

#define ROLE_BIT(r) (1u << (r))
#define ROLES_ALL (ROLE_BIT (TIER_POLICY_NONE) | ROLE_BIT (TIER_POLICY_BATCH) \
                   | ROLE_BIT (TIER_POLICY_PIPELINE) \
                   | ROLE_BIT (TIER_POLICY_ENDPOINT))

static const char *role_names[] = { "none", "batch", "pipeline", "endpoint",
                                    NULL };
static const char *layer_names[] = { "site", "user", "job", NULL };
static const char *keep_names[] = { "never", "on-failure", "always", NULL };
static const char *tier_names[] = { "bb", "nvdimm", NULL };
static const char *share_names[] = { "user", "world", NULL };
static const char *prefetch_names[] = { "off", "sequential", "stride", NULL };
static const char *stage_names[] = { "out", "in", "none", NULL };

enum attr_type {
    ATTR_DURATION,
    ATTR_SIZE,
    ATTR_ENUM,
    ATTR_BOOL,
    ATTR_STRING,
};

struct attr {
    const char *name;
    unsigned bit;
    enum attr_type type;
    unsigned roles;             /* ROLE_BIT of the roles it applies to */
    bool site_only;
    const char **names;         /* ATTR_ENUM */
    size_t offset;
};

#define OFF(f) offsetof (struct tier_policy, f)

static const struct attr attrs[] = {
    { "ttl", TIER_PA_TTL, ATTR_DURATION, ROLE_BIT (TIER_POLICY_BATCH),
      false, NULL, OFF (ttl) },
    { "revalidate", TIER_PA_REVALIDATE, ATTR_DURATION,
      ROLE_BIT (TIER_POLICY_BATCH), false, NULL, OFF (revalidate) },
    { "keep", TIER_PA_KEEP, ATTR_ENUM, ROLE_BIT (TIER_POLICY_PIPELINE),
      false, keep_names, OFF (keep) },
    { "tier", TIER_PA_TIER, ATTR_ENUM, ROLES_ALL
      & ~ROLE_BIT (TIER_POLICY_NONE), false, tier_names, OFF (tier) },
    { "share", TIER_PA_SHARE, ATTR_ENUM, ROLE_BIT (TIER_POLICY_BATCH),
      true, share_names, OFF (share) },
    { "size", TIER_PA_SIZE, ATTR_SIZE, ROLE_BIT (TIER_POLICY_PIPELINE),
      false, NULL, OFF (size) },
    { "window", TIER_PA_WINDOW, ATTR_SIZE, ROLE_BIT (TIER_POLICY_ENDPOINT),
      false, NULL, OFF (window) },
    { "block", TIER_PA_BLOCK, ATTR_SIZE, ROLE_BIT (TIER_POLICY_ENDPOINT)
      | ROLE_BIT (TIER_POLICY_BATCH), false, NULL, OFF (block) },
    { "prefetch", TIER_PA_PREFETCH, ATTR_ENUM, ROLE_BIT (TIER_POLICY_ENDPOINT)
      | ROLE_BIT (TIER_POLICY_BATCH), false, prefetch_names, OFF (prefetch) },
    { "stage", TIER_PA_STAGE, ATTR_ENUM, ROLE_BIT (TIER_POLICY_ENDPOINT),
      false, stage_names, OFF (stage) },
    { "locked", TIER_PA_LOCKED, ATTR_BOOL, ROLES_ALL, true, NULL,
      OFF (locked) },
    { "comment", TIER_PA_COMMENT, ATTR_STRING, ROLES_ALL, false, NULL,
      OFF (comment) },
};

#define NATTRS (sizeof (attrs) / sizeof (attrs[0]))

static const char *enum_name (const char **names, int v)
{
    for (int i = 0; names[i]; i++)
        if (i == v)
            return names[i];
    return NULL;
}

static int enum_parse (const char **names, const char *s)
{
    for (int i = 0; s && names[i]; i++)
        if (!strcmp (names[i], s))
            return i;
    return -1;
}

const char *tier_policy_role_name (enum tier_policy_role role)
{
    return enum_name (role_names, (int) role);
}

int tier_policy_role_parse (const char *name)
{
    return enum_parse (role_names, name);
}

const char *tier_policy_layer_name (enum tier_policy_layer layer)
{
    return enum_name (layer_names, (int) layer);
}

int tier_policy_layer_parse (const char *name)
{
    return enum_parse (layer_names, name);
}

const char *tier_policy_keep_name (enum tier_policy_keep keep)
{
    return enum_name (keep_names, (int) keep);
}

const char *tier_policy_tier_name (enum tier_policy_tier tier)
{
    return enum_name (tier_names, (int) tier);
}

const char *tier_policy_share_name (enum tier_policy_share share)
{
    return enum_name (share_names, (int) share);
}

const char *tier_policy_prefetch_name (enum tier_policy_prefetch p)
{
    return enum_name (prefetch_names, (int) p);
}

const char *tier_policy_stage_name (enum tier_policy_stage stage)
{
    return enum_name (stage_names, (int) stage);
}

bool tier_policy_role_mounts (enum tier_policy_role role)
{
    return role == TIER_POLICY_PIPELINE || role == TIER_POLICY_ENDPOINT;
}

bool tier_policy_is_input (const struct tier_policy *p)
{
    return p && p->role == TIER_POLICY_ENDPOINT && (p->set & TIER_PA_STAGE)
           && p->stage == TIER_PSTAGE_IN;
}

bool tier_policy_is_window (const struct tier_policy *p)
{
    return p && p->role == TIER_POLICY_ENDPOINT && (p->set & TIER_PA_WINDOW)
           && (!(p->set & TIER_PA_STAGE) || p->stage == TIER_PSTAGE_NONE);
}

bool tier_policy_is_output (const struct tier_policy *p)
{
    return p && p->role == TIER_POLICY_ENDPOINT && !tier_policy_is_input (p)
           && !tier_policy_is_window (p);
}

/* A name from input, fit for a message: clipped, control bytes as '?'. */
static const char *shown (const char *s, char *buf, size_t size)
{
    size_t i, n = s ? strlen (s) : 0;

    if (size == 0)
        return "";
    for (i = 0; i < n && i + 4 < size; i++) {
        unsigned char c = s[i];
        buf[i] = (c < 0x20 || c == 0x7f) ? '?' : (char) c;
    }
    if (i < n && size >= 4) {
        i = i > size - 4 ? size - 4 : i;
        memcpy (buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

/* Durations and sizes: largest unit that divides exactly. */
char *tier_policy_fmt_duration (uint64_t s, char *buf, size_t size)
{
    static const struct { uint64_t n; char c; } u[] = {
        { 86400, 'd' }, { 3600, 'h' }, { 60, 'm' },
    };

    for (size_t i = 0; s && i < sizeof (u) / sizeof (u[0]); i++)
        if (s % u[i].n == 0) {
            (void) snprintf (buf, size, "%" PRIu64 "%c", s / u[i].n, u[i].c);
            return buf;
        }
    (void) snprintf (buf, size, "%" PRIu64 "s", s);
    return buf;
}

char *tier_policy_fmt_size (uint64_t b, char *buf, size_t size)
{
    static const char units[] = "PTGMK";

    for (int i = 0; b && units[i]; i++) {
        uint64_t n = 1ULL << (10 * (5 - i));
        if (b % n == 0) {
            (void) snprintf (buf, size, "%" PRIu64 "%c", b / n, units[i]);
            return buf;
        }
    }
    (void) snprintf (buf, size, "%" PRIu64, b);
    return buf;
}

void tier_policy_clear (struct tier_policy *p)
{
    if (p) {
        free (p->dir);
        free (p->comment);
        free (p->source);
        memset (p, 0, sizeof (*p));
    }
}

static int norm_dir (const char *dir, char *out, size_t size,
                     const char **problem)
{
    if (!dir || dir[0] != '/') {
        *problem = "is not an absolute path";
        return -1;
    }
    if (tier_path_has_dotdot (dir)) {
        *problem = "must not contain '..'";
        return -1;
    }
    if (strlen (dir) >= PATH_MAX
        || tier_path_normalize (dir, out, size) < 0) {
        *problem = "is too long";
        return -1;
    }
    if (!strcmp (out, "/")) {
        *problem = "is '/': a policy needs a directory below it";
        return -1;
    }
    return 0;
}

int tier_policy_init (struct tier_policy *p, const char *dir,
                      enum tier_policy_role role, enum tier_policy_layer layer,
                      const char *source, tier_error_t *error)
{
    char norm[PATH_MAX], b[80];
    const char *problem;

    memset (p, 0, sizeof (*p));
    if (!source)
        source = "?";
    if (norm_dir (dir, norm, sizeof (norm), &problem) < 0) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: policy '%s': the directory %s",
                               source, shown (dir, b, sizeof (b)), problem);
    }
    if ((unsigned) role > TIER_POLICY_ENDPOINT
        || (unsigned) layer >= TIER_LAYER_COUNT) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: invalid role or layer", source);
    }
    p->role = role;
    p->layer = layer;
    if (!(p->dir = strdup (norm)) || !(p->source = strdup (source))) {
        tier_policy_clear (p);
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    return 0;
}

static const struct attr *attr_find (const char *key)
{
    for (size_t i = 0; i < NATTRS; i++)
        if (!strcmp (attrs[i].name, key))
            return &attrs[i];
    return NULL;
}

static const char *role_list (unsigned roles, char *buf, size_t size)
{
    size_t o = 0;

    buf[0] = '\0';
    for (int r = 0; role_names[r]; r++)
        if (roles & ROLE_BIT (r))
            o += snprintf (buf + o, o < size ? size - o : 0, "%s%s",
                           o ? ", " : "", role_names[r]);
    return buf;
}

/* Value checks beyond the type: returns a problem or NULL. */
static const char *value_problem (const struct attr *a, uint64_t v)
{
    switch (a->bit) {
        case TIER_PA_TTL:
            return v == 0 ? "must be at least 1s" : NULL;
        case TIER_PA_SIZE:
            return v == 0 ? "must be more than 0" : NULL;
        case TIER_PA_WINDOW:
            return v < BLOCK_MIN ? "must be at least 4K" : NULL;
        case TIER_PA_BLOCK:
            return v < BLOCK_MIN || v > BLOCK_MAX || (v & (v - 1))
                   ? "must be a power of two from 4K to 1G" : NULL;
    }
    return NULL;
}

static const char *type_hint (const struct attr *a, char *buf, size_t size)
{
    switch (a->type) {
        case ATTR_DURATION:
            return "not a duration (e.g. 30s, 10m, 7d)";
        case ATTR_SIZE:
            return "not a size (e.g. 512K, 16M, 4G)";
        case ATTR_BOOL:
            return "must be true or false";
        case ATTR_STRING:
            return "must be a string of at most 512 bytes";
        case ATTR_ENUM: {
            size_t o = snprintf (buf, size, "must be one of ");
            for (int i = 0; a->names[i]; i++)
                o += snprintf (buf + o, o < size ? size - o : 0, "%s%s",
                               i ? ", " : "", a->names[i]);
            return buf;
        }
    }
    return "invalid";
}

/* Store one attribute from a JSON value (string, or an integer for
 * durations and sizes, a boolean for flags).  Returns a problem or NULL.
 */
static const char *store_attr (struct tier_policy *p, const struct attr *a,
                               json_t *v, char *hint, size_t hsize,
                               bool *nomem)
{
    char *base = (char *) p;
    const char *s = json_is_string (v) ? json_string_value (v) : NULL;
    uint64_t u = 0;
    int e;

    if (s && strlen (s) != json_string_length (v))
        return "contains a NUL byte";
    switch (a->type) {
        case ATTR_DURATION:
        case ATTR_SIZE:
            if (json_is_integer (v) && json_integer_value (v) >= 0)
                u = (uint64_t) json_integer_value (v);
            else if (!s || (a->type == ATTR_DURATION
                            ? tier_duration_parse (s, &u)
                            : tier_size_parse (s, &u)) < 0)
                return type_hint (a, hint, hsize);
            if (value_problem (a, u))
                return value_problem (a, u);
            *(uint64_t *) (base + a->offset) = u;
            break;
        case ATTR_ENUM:
            if ((e = enum_parse (a->names, s)) < 0)
                return type_hint (a, hint, hsize);
            *(int *) (base + a->offset) = e;
            break;
        case ATTR_BOOL:
            if (!json_is_boolean (v))
                return type_hint (a, hint, hsize);
            *(bool *) (base + a->offset) = json_is_true (v);
            break;
        case ATTR_STRING: {
            char *c;
            if (!s || strlen (s) > COMMENT_MAX)
                return type_hint (a, hint, hsize);
            if (!(c = strdup (s))) {
                *nomem = true;
                return "out of memory";
            }
            free (*(char **) (base + a->offset));
            *(char **) (base + a->offset) = c;
            break;
        }
    }
    p->set |= a->bit;
    return NULL;
}

static int attr_error (const struct tier_policy *p, const char *key,
                       const char *problem, tier_error_t *error)
{
    char b1[80], b2[80];

    return tier_errprintf (error, "%s: policy '%s': key '%s': %s",
                           p->source ? p->source : "?",
                           shown (p->dir, b1, sizeof (b1)),
                           shown (key, b2, sizeof (b2)), problem);
}

static int set_attr_json (struct tier_policy *p, const char *key, json_t *v,
                          tier_error_t *error)
{
    const struct attr *a = attr_find (key);
    const char *problem;
    char hint[128];
    bool nomem = false;

    if (!a) {
        errno = EINVAL;
        return attr_error (p, key, "unknown key", error);
    }
    if (!(problem = store_attr (p, a, v, hint, sizeof (hint), &nomem)))
        return 0;
    errno = nomem ? ENOMEM : EINVAL;
    return attr_error (p, key, problem, error);
}

int tier_policy_set_attr (struct tier_policy *p, const char *key,
                          const char *value, tier_error_t *error)
{
    const struct attr *a = key ? attr_find (key) : NULL;
    json_t *v;
    int rc;

    if (!value) {
        errno = EINVAL;
        return attr_error (p, key ? key : "", "needs a value", error);
    }
    if (a && a->type == ATTR_BOOL)
        v = !strcmp (value, "true") || !strcmp (value, "yes")
            ? json_true ()
            : !strcmp (value, "false") || !strcmp (value, "no")
            ? json_false () : json_string (value);
    else
        v = json_string (value);
    if (!v) {
        errno = EINVAL;
        return attr_error (p, key ? key : "", "is not valid UTF-8", error);
    }
    rc = set_attr_json (p, key ? key : "", v, error);
    json_decref (v);
    return rc;
}

int tier_policy_validate (const struct tier_policy *p, tier_error_t *error)
{
    char buf[80];

    if (!p || !p->dir || (unsigned) p->role > TIER_POLICY_ENDPOINT
        || (unsigned) p->layer >= TIER_LAYER_COUNT) {
        errno = EINVAL;
        return tier_errprintf (error, "invalid policy");
    }
    for (size_t i = 0; i < NATTRS; i++) {
        const struct attr *a = &attrs[i];
        if (!(p->set & a->bit))
            continue;
        if (a->site_only && p->layer != TIER_LAYER_SITE) {
            errno = EINVAL;
            return attr_error (p, a->name, "is for site policies only",
                               error);
        }
        if (!(a->roles & ROLE_BIT (p->role))) {
            char msg[160];
            (void) snprintf (msg, sizeof (msg), "does not apply to role %s "
                             "(only to %s)", role_names[p->role],
                             role_list (a->roles, buf, sizeof (buf)));
            errno = EINVAL;
            return attr_error (p, a->name, msg, error);
        }
    }
    if (p->set & TIER_PA_TIER) {
        /* where each role's data can live (DESIGN 3.1) */
        if (p->role == TIER_POLICY_BATCH && p->tier != TIER_PTIER_BB) {
            errno = EINVAL;
            return attr_error (p, "tier", "batch replicas live on the burst "
                               "buffer: only bb", error);
        }
        if (p->role == TIER_POLICY_PIPELINE && p->tier != TIER_PTIER_NVDIMM) {
            errno = EINVAL;
            return attr_error (p, "tier", "pipeline data lives on the "
                               "node's NVDIMM tier: only nvdimm", error);
        }
    }
    if (tier_policy_is_input (p)) {
        /* an input is a read-only snapshot on the node's NVDIMM tier (as
         * --tier-stage-in): nothing is written to cache */
        if (p->set & TIER_PA_WINDOW) {
            errno = EINVAL;
            return attr_error (p, "window", "does not apply to an input "
                               "directory (stage = in): it is read-only",
                               error);
        }
        if ((p->set & TIER_PA_TIER) && p->tier != TIER_PTIER_NVDIMM) {
            errno = EINVAL;
            return attr_error (p, "tier", "inputs are staged to the node's "
                               "NVDIMM tier: only nvdimm", error);
        }
    }
    if ((p->set & TIER_PA_WINDOW) && (p->set & TIER_PA_STAGE)
        && p->stage == TIER_PSTAGE_OUT) {
        /* the block cache writes files in place on the GFS; an output
         * directory's files are written whole to its write cache */
        errno = EINVAL;
        return attr_error (p, "window",
                           "does not apply to an output "
                           "directory (stage = out): its files already go "
                           "to the write cache; window asks for the block "
                           "cache (stage = none, the default with window)",
                           error);
    }
    if (tier_policy_is_window (p) && (p->set & TIER_PA_TIER)
        && p->tier != TIER_PTIER_NVDIMM) {
        errno = EINVAL;
        return attr_error (p, "tier",
                           "the block cache's log is on the "
                           "node's NVDIMM tier: only nvdimm",
                           error);
    }
    if ((p->set & TIER_PA_STAGE) && p->stage == TIER_PSTAGE_NONE
        && !(p->set & TIER_PA_WINDOW)) {
        errno = EINVAL;
        return attr_error (p, "stage",
                           "none is for the block cache: it "
                           "needs a window",
                           error);
    }
    if ((p->set & TIER_PA_WINDOW) && (p->set & TIER_PA_BLOCK)
        && p->window < p->block) {
        errno = EINVAL;
        return attr_error (p, "window", "must be at least one block",
                           error);
    }
    return 0;
}

/* Sets */

struct tier_policy_set *tier_policy_set_create (void)
{
    return calloc (1, sizeof (struct tier_policy_set));
}

void tier_policy_set_destroy (struct tier_policy_set *set)
{
    if (set) {
        int saved = errno;
        for (int i = 0; i < set->n; i++)
            tier_policy_clear (&set->v[i]);
        free (set->v);
        free (set);
        errno = saved;
    }
}

static int copy_policy (struct tier_policy *dst, const struct tier_policy *p)
{
    *dst = *p;
    dst->dir = dst->comment = dst->source = NULL;
    if (!(dst->dir = strdup (p->dir))
        || (p->comment && !(dst->comment = strdup (p->comment)))
        || !(dst->source = strdup (p->source ? p->source : "?"))) {
        tier_policy_clear (dst);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

const struct tier_policy *tier_policy_find (const struct tier_policy_set *set,
                                            const char *dir,
                                            enum tier_policy_layer layer)
{
    for (int i = 0; set && i < set->n; i++)
        if (set->v[i].layer == layer && !strcmp (set->v[i].dir, dir))
            return &set->v[i];
    return NULL;
}

int tier_policy_add (struct tier_policy_set *set, const struct tier_policy *p,
                     tier_error_t *error)
{
    struct tier_policy copy;

    if (!set || !p || !p->dir) {
        errno = EINVAL;
        return tier_errprintf (error, "invalid policy");
    }
    if (copy_policy (&copy, p) < 0)
        return tier_errprintf (error, "out of memory");
    for (int i = 0; i < set->n; i++)
        if (set->v[i].layer == p->layer && !strcmp (set->v[i].dir, p->dir)) {
            tier_policy_clear (&set->v[i]);
            set->v[i] = copy;
            return 0;
        }
    if (set->n >= TIER_POLICY_MAX) {
        tier_policy_clear (&copy);
        errno = E2BIG;
        return tier_errprintf (error, "more than %d policies",
                               TIER_POLICY_MAX);
    }
    if (set->n == set->cap) {
        int cap = set->cap ? set->cap * 2 : 8;
        struct tier_policy *v = realloc (set->v, cap * sizeof (*v));
        if (!v) {
            tier_policy_clear (&copy);
            errno = ENOMEM;
            return tier_errprintf (error, "out of memory");
        }
        set->v = v;
        set->cap = cap;
    }
    set->v[set->n++] = copy;
    return 0;
}

int tier_policy_remove (struct tier_policy_set *set, const char *dir,
                        enum tier_policy_layer layer)
{
    for (int i = 0; set && i < set->n; i++)
        if (set->v[i].layer == layer && !strcmp (set->v[i].dir, dir)) {
            tier_policy_clear (&set->v[i]);
            memmove (&set->v[i], &set->v[i + 1],
                     (set->n - i - 1) * sizeof (set->v[0]));
            set->n--;
            return 1;
        }
    return 0;
}

/* One policy from its JSON object: "role" and attributes (and with
 * origin, also "dir", "layer" and "source", which are then required).
 */
static int policy_from_json (struct tier_policy *p, const char *dir,
                             json_t *o, enum tier_policy_layer layer,
                             const char *name, bool origin,
                             tier_error_t *error)
{
    char b[80];
    const char *key, *source = name;
    json_t *v, *role;
    int r;

    memset (p, 0, sizeof (*p));
    if (!json_is_object (o)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: policy '%s': must be an object",
                               name, shown (dir, b, sizeof (b)));
    }
    if (origin) {
        json_t *d = json_object_get (o, "dir");
        json_t *l = json_object_get (o, "layer");
        json_t *s = json_object_get (o, "source");
        if (!json_is_string (d) || !json_is_string (l) || !json_is_string (s)
            || (r = tier_policy_layer_parse (json_string_value (l))) < 0
            || json_string_length (s) > SOURCE_MAX
            || strlen (json_string_value (s)) != json_string_length (s)
            || strlen (json_string_value (d)) != json_string_length (d)) {
            errno = EINVAL;
            return tier_errprintf (error, "%s: a policy needs 'dir', a "
                                   "'layer' (site, user, job) and a "
                                   "'source'", name);
        }
        dir = json_string_value (d);
        layer = r;
        source = json_string_value (s);
    }
    role = json_object_get (o, "role");
    if (!role) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: policy '%s': key 'role' is "
                               "missing", name, shown (dir, b, sizeof (b)));
    }
    if ((r = tier_policy_role_parse (json_string_value (role))) < 0) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: policy '%s': key 'role': must be "
                               "one of batch, pipeline, endpoint, none",
                               name, shown (dir, b, sizeof (b)));
    }
    if (tier_policy_init (p, dir, r, layer, source, error) < 0)
        return -1;
    json_object_foreach (o, key, v) {
        if (!strcmp (key, "role")
            || (origin && (!strcmp (key, "dir") || !strcmp (key, "layer")
                           || !strcmp (key, "source"))))
            continue;
        if (set_attr_json (p, key, v, error) < 0)
            goto error;
    }
    if (tier_policy_validate (p, error) < 0)
        goto error;
    return 0;
error:
    tier_policy_clear (p);
    return -1;
}

/* Add every policy of tmp to set, or none (all or nothing). */
static int merge (struct tier_policy_set *set, struct tier_policy_set *tmp,
                  tier_error_t *error)
{
    int n0 = set->n;

    if (set->n + tmp->n > TIER_POLICY_MAX) {
        errno = E2BIG;
        return tier_errprintf (error, "more than %d policies",
                               TIER_POLICY_MAX);
    }
    for (int i = 0; i < tmp->n; i++)
        if (tier_policy_add (set, &tmp->v[i], error) < 0) {
            /* _add appends (layers and directories differ from set's own
             * unless they replace): undo what was appended */
            while (set->n > n0)
                tier_policy_clear (&set->v[--set->n]);
            return -1;
        }
    return 0;
}

static char *jerr_text (const json_error_t *jerr, char *buf, size_t size)
{
    const char *near;

    /* Jansson quotes the input ("near '...'"): never echo the file */
    (void) snprintf (buf, size, "%s", jerr->text);
    if ((near = strstr (buf, " near ")))
        buf[near - buf] = '\0';
    return buf;
}

int tier_policy_parse (struct tier_policy_set *set, const char *text,
                       size_t len, enum tier_policy_layer layer,
                       const char *name, tier_error_t *error)
{
    struct tier_policy_set tmp = { 0 };
    json_error_t jerr;
    json_t *doc = NULL, *pols = NULL, *v;
    const char *key;
    char b[80], jt[160];
    int rc = -1;

    if (!name)
        name = "policies";
    if (!set || !text || (unsigned) layer >= TIER_LAYER_COUNT) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: invalid arguments", name);
    }
    if (len > TIER_POLICY_TEXT_MAX) {
        errno = EFBIG;
        return tier_errprintf (error, "%s: larger than %d bytes", name,
                               TIER_POLICY_TEXT_MAX);
    }
    if (memchr (text, '\0', len)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: contains a NUL byte", name);
    }
    if (!(doc = json_loadb (text, len, JSON_REJECT_DUPLICATES, &jerr))) {
        errno = EINVAL;
        return tier_errprintf (error, "%s:%d:%d: %s", name, jerr.line,
                               jerr.column, jerr_text (&jerr, jt,
                                                       sizeof (jt)));
    }
    if (!json_is_object (doc)) {
        errno = EINVAL;
        tier_errprintf (error, "%s: must be a JSON object with 'version' "
                        "and 'policies'", name);
        goto out;
    }
    json_object_foreach (doc, key, v) {
        if (!strcmp (key, "version")) {
            if (!json_is_integer (v)
                || json_integer_value (v) != TIER_POLICY_FORMAT) {
                errno = EINVAL;
                tier_errprintf (error, "%s: key 'version': must be %d",
                                name, TIER_POLICY_FORMAT);
                goto out;
            }
        }
        else if (!strcmp (key, "policies")) {
            if (!json_is_object (v)) {
                errno = EINVAL;
                tier_errprintf (error, "%s: key 'policies': must be an "
                                "object of directories", name);
                goto out;
            }
            pols = v;
        }
        else {
            errno = EINVAL;
            tier_errprintf (error, "%s: unknown key '%s' (only 'version' "
                            "and 'policies')", name,
                            shown (key, b, sizeof (b)));
            goto out;
        }
    }
    json_object_foreach (pols, key, v) {
        struct tier_policy p;
        if (policy_from_json (&p, key, v, layer, name, false, error) < 0)
            goto out;
        if (tier_policy_find (&tmp, p.dir, layer)) {
            errno = EINVAL;
            tier_errprintf (error, "%s: policy '%s': the directory is given "
                            "twice", name, shown (p.dir, b, sizeof (b)));
            tier_policy_clear (&p);
            goto out;
        }
        rc = tier_policy_add (&tmp, &p, error);
        tier_policy_clear (&p);
        if (rc < 0)
            goto out;
        rc = -1;
    }
    rc = merge (set, &tmp, error);
out:
    for (int i = 0; i < tmp.n; i++)
        tier_policy_clear (&tmp.v[i]);
    free (tmp.v);
    json_decref (doc);
    return rc;
}

static int set_str (json_t *o, const char *key, const char *s)
{
    json_t *v = s ? json_string (s) : NULL;

    return v ? json_object_set_new (o, key, v) : -1;
}

json_t *tier_policy_to_json (const struct tier_policy *p, bool origin)
{
    json_t *o = json_object ();
    char buf[64];
    int rc = 0;

    if (!o)
        return NULL;
    if (origin) {
        rc |= set_str (o, "dir", p->dir);
        rc |= set_str (o, "layer", tier_policy_layer_name (p->layer));
        rc |= set_str (o, "source", p->source ? p->source : "?");
    }
    rc |= set_str (o, "role", tier_policy_role_name (p->role));
    for (size_t i = 0; i < NATTRS; i++) {
        const struct attr *a = &attrs[i];
        const char *base = (const char *) p;
        if (!(p->set & a->bit))
            continue;
        switch (a->type) {
            case ATTR_DURATION:
                rc |= set_str (o, a->name, tier_policy_fmt_duration (
                               *(const uint64_t *) (base + a->offset), buf,
                               sizeof (buf)));
                break;
            case ATTR_SIZE:
                rc |= set_str (o, a->name, tier_policy_fmt_size (
                               *(const uint64_t *) (base + a->offset), buf,
                               sizeof (buf)));
                break;
            case ATTR_ENUM:
                rc |= set_str (o, a->name, enum_name (a->names,
                               *(const int *) (base + a->offset)));
                break;
            case ATTR_BOOL:
                rc |= json_object_set_new (o, a->name, json_boolean (
                                           *(const bool *) (base
                                                            + a->offset)));
                break;
            case ATTR_STRING:
                rc |= set_str (o, a->name,
                               *(char *const *) (base + a->offset));
                break;
        }
    }
    if (rc) {
        json_decref (o);
        errno = ENOMEM;
        return NULL;
    }
    return o;
}

json_t *tier_policy_effective_json (const struct tier_policy *p)
{
    struct tier_policy e = *p;

    /* the defaults a policy gets for what it does not say */
    if (p->role != TIER_POLICY_NONE && !(p->set & TIER_PA_TIER)) {
        e.tier = p->role == TIER_POLICY_PIPELINE || tier_policy_is_input (p)
                         || tier_policy_is_window (p)
                     ? TIER_PTIER_NVDIMM
                     : TIER_PTIER_BB;
        e.set |= TIER_PA_TIER;
    }
    if (p->role == TIER_POLICY_ENDPOINT && !(p->set & TIER_PA_STAGE)) {
        e.set |= TIER_PA_STAGE; /* out; none with a window */
        e.stage = (p->set & TIER_PA_WINDOW) ? TIER_PSTAGE_NONE
                                            : TIER_PSTAGE_OUT;
    }
    if (p->role == TIER_POLICY_BATCH) {
        if (!(p->set & TIER_PA_REVALIDATE)) {
            e.revalidate = TIER_POLICY_REVALIDATE_DEFAULT;
            e.set |= TIER_PA_REVALIDATE;
        }
        if (!(p->set & TIER_PA_SHARE))
            e.set |= TIER_PA_SHARE;             /* user */
    }
    if (p->role == TIER_POLICY_PIPELINE && !(p->set & TIER_PA_KEEP))
        e.set |= TIER_PA_KEEP;                  /* never */
    if ((p->role == TIER_POLICY_BATCH || p->role == TIER_POLICY_ENDPOINT)
        && !(p->set & TIER_PA_PREFETCH))
        e.set |= TIER_PA_PREFETCH;              /* off */
    if ((p->set & TIER_PA_PREFETCH || e.set & TIER_PA_PREFETCH)
        && e.prefetch != TIER_PREFETCH_OFF && !(p->set & TIER_PA_BLOCK)) {
        e.block = TIER_POLICY_BLOCK_DEFAULT;
        e.set |= TIER_PA_BLOCK;
    }
    e.set &= ~TIER_PA_COMMENT;
    return tier_policy_to_json (&e, false);
}

char *tier_policy_dump (const struct tier_policy_set *set,
                        enum tier_policy_layer layer)
{
    json_t *doc, *pols;
    char *s;

    /* json_object_set_new consumes pols even when it fails */
    if (!(doc = json_object ())
        || json_object_set_new (doc, "version",
                                json_integer (TIER_POLICY_FORMAT)) < 0
        || !(pols = json_object ())
        || json_object_set_new (doc, "policies", pols) < 0)
        goto nomem;
    for (int i = 0; set && i < set->n; i++) {
        json_t *o;
        if (set->v[i].layer != layer)
            continue;
        if (!(o = tier_policy_to_json (&set->v[i], false))
            || json_object_set_new (pols, set->v[i].dir, o) < 0)
            goto nomem;
    }
    s = json_dumps (doc, JSON_INDENT (2) | JSON_SORT_KEYS);
    json_decref (doc);
    if (!s)
        errno = ENOMEM;
    return s;
nomem:
    json_decref (doc);
    errno = ENOMEM;
    return NULL;
}

json_t *tier_policy_set_to_json (const struct tier_policy_set *set)
{
    json_t *a = json_array (), *o;

    if (!a)
        return NULL;
    for (int i = 0; set && i < set->n; i++)
        if (!(o = tier_policy_to_json (&set->v[i], true))
            || json_array_append_new (a, o) < 0) {
            json_decref (a);
            errno = ENOMEM;
            return NULL;
        }
    return a;
}

int tier_policy_set_from_json (struct tier_policy_set *set, json_t *array,
                               const char *name, tier_error_t *error)
{
    struct tier_policy_set tmp = { 0 };
    size_t i;
    json_t *o;
    int rc = -1;

    if (!name)
        name = "frozen policy set";
    if (!set || !json_is_array (array)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: 'policies' must be an array",
                               name);
    }
    json_array_foreach (array, i, o) {
        struct tier_policy p;
        if (policy_from_json (&p, NULL, o, TIER_LAYER_SITE, name, true,
                              error) < 0)
            goto out;
        rc = tier_policy_add (&tmp, &p, error);
        tier_policy_clear (&p);
        if (rc < 0)
            goto out;
        rc = -1;
    }
    rc = merge (set, &tmp, error);
out:
    for (int k = 0; k < tmp.n; k++)
        tier_policy_clear (&tmp.v[k]);
    free (tmp.v);
    return rc;
}

/* The job layer */

/* The items of one --tier-* list ("DIR[,DIR]"; '\' escapes, and for
 * --tier-scratch "DIR[:SIZE][:keep=WHEN]", see tier_item_split).  An
 * item's own keep= wins over --tier-keep.
 */
static int add_items (struct tier_policy_set *set, const char *list,
                      enum tier_policy_role role, const char *option,
                      int keep, tier_error_t *error)
{
    const char *p = list;
    char raw[PATH_MAX + 64];

    while ((p = tier_list_next (p, raw, sizeof (raw)))) {
        char item[PATH_MAX], when[16] = "";
        struct tier_policy pol;
        uint64_t size = 0;
        int rc, k = keep;

        if (!raw[0] || strlen (raw) >= PATH_MAX) {
            errno = EINVAL;
            return tier_errprintf (error, "%s: an empty or too long item",
                                   option);
        }
        if (role == TIER_POLICY_PIPELINE) {
            if (tier_item_split (raw, item, sizeof (item), &size, when,
                                 sizeof (when)) < 0) {
                int e = errno;
                errno = EINVAL;
                return tier_errprintf (error, "%s: '%s': %s", option, raw,
                                       e == ERANGE      ? "a zero size"
                                       : e == EOVERFLOW ? "a size larger "
                                                          "than 8 EiB"
                                       : e == EINVAL
                                           ? "keep= is not one "
                                             "of never, on-failure, always"
                                           : "too long");
            }
            if (when[0])
                k = enum_parse (keep_names, when);
        }
        else if (role == TIER_POLICY_ENDPOINT
                 && tier_url_out_item_is_url (raw)) {
            /* DIR=URL: DIR is an output directory all the same (its
             * files go to the URL, which the plugin takes from the
             * option itself) */
            char url[PATH_MAX];
            if (tier_url_out_item_split (raw, item, sizeof (item), url,
                                         sizeof (url)) < 0) {
                errno = EINVAL;
                return tier_errprintf (error, "%s: an item holds a URL but "
                                       "is not DIR=URL", option);
            }
        }
        else
            (void) snprintf (item, sizeof (item), "%s", raw);
        if (strchr (item, '%'))
            continue;                   /* per task: not a directory policy */
        if (tier_policy_init (&pol, item, role, TIER_LAYER_JOB, option,
                              error) < 0)
            return -1;
        if (size) {
            pol.size = size;
            pol.set |= TIER_PA_SIZE;
        }
        if (k >= 0 && role == TIER_POLICY_PIPELINE) {
            pol.keep = k;
            pol.set |= TIER_PA_KEEP;
        }
        rc = tier_policy_add (set, &pol, error);
        tier_policy_clear (&pol);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int tier_policy_from_options (struct tier_policy_set *set, json_t *options,
                              tier_error_t *error)
{
    static const struct {
        const char *key;
        const char *option;
        enum tier_policy_role role;
    } lists[] = {
        /* later ones win for a directory named twice */
        { "stage_out", "--tier-stage-out", TIER_POLICY_ENDPOINT },
        { "batch", "--tier-batch", TIER_POLICY_BATCH },
        { "scratch", "--tier-scratch", TIER_POLICY_PIPELINE },
    };
    struct tier_policy_set tmp = { 0 };
    json_t *k;
    int keep = -1, rc = 0;

    if (!set) {
        errno = EINVAL;
        return tier_errprintf (error, "invalid arguments");
    }
    if (!options)
        return 0;
    if (!json_is_object (options)) {
        errno = EINVAL;
        return tier_errprintf (error, "job options: not an object");
    }
    if ((k = json_object_get (options, "keep")))
        keep = enum_parse (keep_names, json_string_value (k));
    for (size_t i = 0; i < sizeof (lists) / sizeof (lists[0]) && rc == 0;
         i++) {
        json_t *v = json_object_get (options, lists[i].key);
        if (!v)
            continue;
        if (!json_is_string (v)
            || strlen (json_string_value (v)) != json_string_length (v)) {
            errno = EINVAL;
            rc = tier_errprintf (error, "%s: not a list of directories",
                                 lists[i].option);
            break;
        }
        rc = add_items (&tmp, json_string_value (v), lists[i].role,
                        lists[i].option, keep, error);
    }
    if (rc == 0)
        rc = merge (set, &tmp, error);
    for (int i = 0; i < tmp.n; i++)
        tier_policy_clear (&tmp.v[i]);
    free (tmp.v);
    return rc;
}
