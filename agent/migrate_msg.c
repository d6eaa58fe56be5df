/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate_msg.c - the messages between the agent and a migrator
 *
 * Owns the table of the channel's messages and of their members, and
 * their packing to and from JSON (see migrate_msg.h).  Calls jansson and
 * chmsg.c only.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "migrate_msg.h"

/* The members, by kind of value. */
enum kind {
    K_INT = 1, /* int, 0..INT_MAX */
    K_U32,     /* uint32_t */
    K_NAT,     /* int64_t, >= 0 */
    K_I64,     /* int64_t */
    K_BOOL,
    K_STR,  /* const char * */
    K_TIME, /* struct timespec as [s, ns] */
};

enum member {
    F_K,
    F_REL,
    F_SEQ,
    F_FLUSH,
    F_PENDING,
    F_FAILED,
    F_CONFLICTS,
    F_ERROR,
    F_ERRNO,
    F_FIRST,
    F_OURS,
    F_SIZE,
    F_MTIME,
    F_SHA256,
    F_INO,
    F_GFS_SIZE,
    F_GFS_MTIME,
    F_GFS_CTIME,
    F_US,
    F_ETAG,
    F_UPLOAD_ID,
    F_PART_SIZE,
    F_MTIME_NS,
    F_N,
    F_SIDE,
    F_ON,
    F_COUNT
};

struct field {
    const char *name;
    enum kind kind;
    size_t off;
};

#define FIELD(id, nm, kd, mb) \
    [id] = { .name = nm, .kind = kd, .off = offsetof (struct migmsg, mb) }

static const struct field fields[F_COUNT] = {
    FIELD (F_K, "k", K_INT, k),
    FIELD (F_REL, "rel", K_STR, rel),
    FIELD (F_SEQ, "seq", K_U32, seq),
    FIELD (F_FLUSH, "flush", K_BOOL, flush),
    FIELD (F_PENDING, "pending", K_INT, pending),
    FIELD (F_FAILED, "failed", K_INT, failed),
    FIELD (F_CONFLICTS, "conflicts", K_INT, conflicts),
    FIELD (F_ERROR, "error", K_STR, error),
    FIELD (F_ERRNO, "errno", K_INT, err),
    FIELD (F_FIRST, "first", K_BOOL, first),
    FIELD (F_OURS, "ours", K_BOOL, ours),
    FIELD (F_SIZE, "size", K_NAT, size),
    FIELD (F_MTIME, "mtime", K_TIME, mtime),
    FIELD (F_SHA256, "sha256", K_STR, sha256),
    FIELD (F_INO, "ino", K_I64, ino), /* an ino_t, as it casts */
    FIELD (F_GFS_SIZE, "gfs_size", K_NAT, gfs_size),
    FIELD (F_GFS_MTIME, "gfs_mtime", K_TIME, gfs_mtime),
    FIELD (F_GFS_CTIME, "gfs_ctime", K_TIME, gfs_ctime),
    FIELD (F_US, "us", K_NAT, us),
    FIELD (F_ETAG, "etag", K_STR, etag),
    FIELD (F_UPLOAD_ID, "upload_id", K_STR, upload_id),
    FIELD (F_PART_SIZE, "part_size", K_NAT, part_size),
    FIELD (F_MTIME_NS, "mtime_ns", K_I64, mtime_ns),
    FIELD (F_N, "n", K_U32, n),
    FIELD (F_SIDE, "side", K_STR, side),
    FIELD (F_ON, "on", K_BOOL, on),
};

#define B(f) (1u << (f))
#define FILE_ID (B (F_K) | B (F_REL))
#define INTENT \
    (FILE_ID | B (F_OURS) | B (F_SIZE) | B (F_MTIME) | B (F_SHA256) \
     | B (F_INO) | B (F_GFS_SIZE))

struct msgdef {
    enum migmsg_dir dir;
    unsigned need; /* members it must have */
    unsigned may;  /* and may have */
};

static const struct msgdef defs[MIGMSG_NTYPES + 1] = {
    [MIGMSG_SYNC] = { MIGMSG_COMMAND, B (F_SEQ) | B (F_FLUSH), 0 },
    [MIGMSG_DIRTY] = { MIGMSG_COMMAND, FILE_ID, 0 },
    [MIGMSG_SCAN] = { MIGMSG_COMMAND, FILE_ID, 0 },
    [MIGMSG_QUIT] = { MIGMSG_COMMAND, 0, 0 },
    [MIGMSG_KNOWN] = { MIGMSG_COMMAND,
                       FILE_ID | B (F_OURS) | B (F_INO) | B (F_GFS_SIZE)
                           | B (F_GFS_MTIME) | B (F_GFS_CTIME) | B (F_SIZE)
                           | B (F_MTIME),
                       0 },
    [MIGMSG_KNOWN_OBJECT] = { MIGMSG_COMMAND,
                              FILE_ID | B (F_SIZE) | B (F_MTIME) | B (F_ETAG),
                              0 },
    [MIGMSG_CLAIM] = { MIGMSG_COMMAND, FILE_ID, 0 },
    [MIGMSG_UPLOAD] = { MIGMSG_COMMAND,
                        FILE_ID | B (F_UPLOAD_ID) | B (F_PART_SIZE) | B (F_SIZE)
                            | B (F_MTIME_NS),
                        0 },
    [MIGMSG_PART] = { MIGMSG_COMMAND, FILE_ID | B (F_N) | B (F_ETAG), 0 },
    [MIGMSG_INTENT] = { MIGMSG_COMMAND, INTENT, 0 },
    [MIGMSG_NOTED] = { MIGMSG_COMMAND, FILE_ID, 0 },
    [MIGMSG_READY] = { MIGMSG_RESULT, 0, 0 },
    [MIGMSG_ERROR] = { MIGMSG_RESULT, B (F_ERROR), 0 },
    [MIGMSG_DONE] = { MIGMSG_RESULT,
                      FILE_ID | B (F_SIZE) | B (F_SHA256) | B (F_OURS)
                          | B (F_INO) | B (F_GFS_SIZE) | B (F_GFS_MTIME)
                          | B (F_GFS_CTIME) | B (F_US) | B (F_FIRST),
                      0 },
    [MIGMSG_FAILED] = { MIGMSG_RESULT,
                        FILE_ID | B (F_ERRNO) | B (F_ERROR) | B (F_FIRST), 0 },
    [MIGMSG_CONFLICT] = { MIGMSG_RESULT, FILE_ID, B (F_SIDE) },
    [MIGMSG_GONE] = { MIGMSG_RESULT, FILE_ID, 0 },
    [MIGMSG_SYNCED] = { MIGMSG_RESULT,
                        B (F_SEQ) | B (F_PENDING) | B (F_FAILED)
                            | B (F_CONFLICTS),
                        B (F_SIZE) },
    [MIGMSG_CLAIMED] = { MIGMSG_RESULT, FILE_ID, 0 },
    [MIGMSG_UPLOAD_BEGUN] = { MIGMSG_RESULT,
                              FILE_ID | B (F_UPLOAD_ID) | B (F_PART_SIZE)
                                  | B (F_SIZE) | B (F_MTIME_NS),
                              0 },
    [MIGMSG_PART_DONE] = { MIGMSG_RESULT, FILE_ID | B (F_N) | B (F_ETAG), 0 },
    [MIGMSG_UPLOAD_GONE] = { MIGMSG_RESULT, FILE_ID, 0 },
    [MIGMSG_OBJECT_DONE] = { MIGMSG_RESULT,
                             FILE_ID | B (F_SIZE) | B (F_MTIME) | B (F_SHA256)
                                 | B (F_US) | B (F_FIRST) | B (F_ETAG),
                             0 },
    [MIGMSG_PUBLISHING] = { MIGMSG_RESULT, INTENT, 0 },
    [MIGMSG_ALIVE] = { MIGMSG_RESULT, 0, 0 },
    [MIGMSG_QUEUED] = { MIGMSG_RESULT, B (F_ON), 0 },
};

static const struct chmsg_type types[] = {
    { MIGMSG_SYNC, "sync" },
    { MIGMSG_DIRTY, "dirty" },
    { MIGMSG_SCAN, "scan" },
    { MIGMSG_QUIT, "quit" },
    { MIGMSG_KNOWN, "known" },
    { MIGMSG_KNOWN_OBJECT, "known_object" },
    { MIGMSG_CLAIM, "claim" },
    { MIGMSG_UPLOAD, "upload" },
    { MIGMSG_PART, "part" },
    { MIGMSG_INTENT, "intent" },
    { MIGMSG_NOTED, "noted" },
    { MIGMSG_READY, "ready" },
    { MIGMSG_ERROR, "error" },
    { MIGMSG_DONE, "done" },
    { MIGMSG_FAILED, "failed" },
    { MIGMSG_CONFLICT, "conflict" },
    { MIGMSG_GONE, "gone" },
    { MIGMSG_SYNCED, "synced" },
    { MIGMSG_CLAIMED, "claimed" },
    { MIGMSG_UPLOAD_BEGUN, "upload_begun" },
    { MIGMSG_PART_DONE, "part_done" },
    { MIGMSG_UPLOAD_GONE, "upload_gone" },
    { MIGMSG_OBJECT_DONE, "object_done" },
    { MIGMSG_PUBLISHING, "publishing" },
    { MIGMSG_ALIVE, "alive" },
    { MIGMSG_QUEUED, "queued" },
};

const struct chmsg_proto migmsg_proto = {
    .channel = "migrator",
    .version = MIGMSG_VERSION,
    .types = types,
    .ntypes = (int) (sizeof (types) / sizeof (types[0])),
};

enum migmsg_dir migmsg_dir (int type)
{
    return type >= 1 && type <= MIGMSG_NTYPES ? defs[type].dir : 0;
}

/* --------------------------------------------------------------- pack */

static json_t *pack_time (const struct timespec *ts)
{
    return json_pack ("[I,I]", (json_int_t) ts->tv_sec,
                      (json_int_t) ts->tv_nsec);
}

static json_t *pack_field (const struct migmsg *m, const struct field *f)
{
    const char *p = (const char *) m + f->off;

    switch (f->kind) {
        case K_INT:
            return json_integer (*(const int *) p);
        case K_U32:
            return json_integer (*(const uint32_t *) p);
        case K_NAT:
        case K_I64:
            return json_integer (*(const int64_t *) p);
        case K_BOOL:
            return json_boolean (*(const bool *) p);
        case K_STR:
            return *(const char *const *) p
                       ? json_string (*(const char *const *) p)
                       : NULL;
        case K_TIME:
            return pack_time ((const struct timespec *) p);
    }
    return NULL;
}

json_t *migmsg_pack (const struct migmsg *m)
{
    const struct msgdef *d;
    json_t *o;

    if (!migmsg_dir (m->type)) {
        errno = EINVAL;
        return NULL;
    }
    d = &defs[m->type];
    if (!(o = json_object ())) {
        errno = ENOMEM;
        return NULL;
    }
    for (int i = 0; i < F_COUNT; i++) {
        json_t *v;
        if (!((d->need | d->may) & B (i)))
            continue;
        if (!(v = pack_field (m, &fields[i]))) {
            if (!(d->need & B (i)) && fields[i].kind == K_STR)
                continue; /* an optional string, absent */
            json_decref (o);
            errno = fields[i].kind == K_STR ? EINVAL : ENOMEM;
            return NULL;
        }
        if (json_object_set_new (o, fields[i].name, v) < 0) {
            json_decref (o);
            errno = ENOMEM;
            return NULL;
        }
    }
    return o;
}

/* ------------------------------------------------------------- unpack */

static int unpack_int (json_t *v, const struct field *f, char *p)
{
    json_int_t i;

    if (!json_is_integer (v))
        return -1;
    i = json_integer_value (v);
    switch (f->kind) {
        case K_INT:
            if (i < 0 || i > INT_MAX)
                return -1;
            *(int *) p = (int) i;
            return 0;
        case K_U32:
            if (i < 0 || i > UINT32_MAX)
                return -1;
            *(uint32_t *) p = (uint32_t) i;
            return 0;
        case K_NAT:
            if (i < 0)
                return -1;
            /* fall through */
        default:
            *(int64_t *) p = (int64_t) i;
            return 0;
    }
}

static int unpack_time (json_t *v, struct timespec *ts)
{
    json_int_t s, ns;

    if (!json_is_array (v) || json_array_size (v) != 2
        || json_unpack (v, "[II]", &s, &ns) < 0 || ns < 0 || ns > 999999999)
        return -1;
    ts->tv_sec = (time_t) s;
    ts->tv_nsec = (long) ns;
    return 0;
}

static int unpack_field (json_t *v, const struct field *f, struct migmsg *m)
{
    char *p = (char *) m + f->off;

    switch (f->kind) {
        case K_INT:
        case K_U32:
        case K_NAT:
        case K_I64:
            return unpack_int (v, f, p);
        case K_BOOL:
            if (!json_is_boolean (v))
                return -1;
            *(bool *) p = json_is_true (v);
            return 0;
        case K_STR:
            if (!json_is_string (v))
                return -1;
            *(const char **) p = json_string_value (v);
            return 0;
        case K_TIME:
            return unpack_time (v, (struct timespec *) p);
    }
    return -1;
}

static const char *kind_name (enum kind k)
{
    switch (k) {
        case K_INT:
        case K_U32:
        case K_NAT:
            return "a count";
        case K_I64:
            return "an integer";
        case K_BOOL:
            return "a boolean";
        case K_STR:
            return "a string";
        case K_TIME:
            return "a time [s, ns]";
    }
    return "?";
}

int migmsg_unpack (int type, json_t *body, enum migmsg_dir dir,
                   struct migmsg *m, tier_error_t *error)
{
    const char *name = chmsg_name (&migmsg_proto, type);
    const struct msgdef *d;

    memset (m, 0, sizeof (*m));
    if (migmsg_dir (type) != dir || !json_is_object (body)) {
        errno = EPROTO;
        return tier_errprintf (error,
                               "migrator channel: '%s' is not a "
                               "message of the %s",
                               name,
                               dir == MIGMSG_COMMAND ? "agent" : "migrator");
    }
    d = &defs[type];
    m->type = (enum migmsg_type) type;
    for (int i = 0; i < F_COUNT; i++) {
        json_t *v;
        if (!((d->need | d->may) & B (i)))
            continue;
        if (!(v = json_object_get (body, fields[i].name))) {
            if (!(d->need & B (i)))
                continue;
            errno = EPROTO;
            return tier_errprintf (error,
                                   "migrator channel: '%s' without "
                                   "'%s'",
                                   name, fields[i].name);
        }
        if (unpack_field (v, &fields[i], m) < 0) {
            errno = EPROTO;
            return tier_errprintf (error,
                                   "migrator channel: '%s': '%s' is "
                                   "not %s",
                                   name, fields[i].name,
                                   kind_name (fields[i].kind));
        }
    }
    return 0;
}

char *migmsg_encode (const struct migmsg *m)
{
    json_t *body = migmsg_pack (m);

    return body ? chmsg_encode (&migmsg_proto, m->type, body) : NULL;
}

int migmsg_send (int fd, const struct migmsg *m)
{
    json_t *body = migmsg_pack (m);

    if (!body)
        return -1;
    return chmsg_send (fd, &migmsg_proto, true, m->type, body, NULL, 0, -1,
                       NULL);
}

/* -------------------------------------------------------------- batch */

int migmsg_batch_add (struct migmsg_batch *b, const struct migmsg *m)
{
    char *text = migmsg_encode (m);
    size_t n;

    if (!text)
        return -1;
    n = strlen (text) + 1;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        char *p;
        while (cap < b->len + n)
            cap *= 2;
        if (!(p = realloc (b->buf, cap))) {
            free (text);
            errno = ENOMEM;
            return -1;
        }
        b->buf = p;
        b->cap = cap;
    }
    memcpy (b->buf + b->len, text, n);
    b->len += n;
    b->count++;
    free (text);
    return 0;
}

int migmsg_batch_next (const struct migmsg_batch *b, size_t *off, int *type,
                       json_t **body, tier_error_t *error)
{
    const char *text;
    size_t n;

    if (!b->buf || *off >= b->len)
        return 0;
    text = b->buf + *off;
    n = strnlen (text, b->len - *off);
    *off += n + 1;
    if (chmsg_decode (&migmsg_proto, text, n, type, body, error) < 0)
        return -1;
    return 1;
}

void migmsg_batch_fini (struct migmsg_batch *b)
{
    free (b->buf);
    memset (b, 0, sizeof (*b));
}
