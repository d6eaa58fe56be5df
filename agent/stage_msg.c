/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stage_msg.c - the messages of stage-in's children (see stage_msg.h)
 *
 * Owns the three channels' tables and the packing of their messages to
 * and from JSON.  Calls jansson and chmsg.c only.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "stage_msg.h"

/* How long a child waits for its parent to take a message. */
#define SEND_TIMEOUT_MS 30000

static const struct chmsg_type copier_types[] = {
    { STAGEMSG_TOTAL, "total" },   { STAGEMSG_PROGRESS, "progress" },
    { STAGEMSG_QUEUED, "queued" }, { STAGEMSG_MADE, "made" },
    { STAGEMSG_ERROR, "error" },   { STAGEMSG_DONE, "done" },
    { STAGEMSG_SOURCE, "source" },
};

static const struct chmsg_type stager_types[] = {
    { STAGEMSG_LOG, "log" },
};

static const struct chmsg_type unmake_types[] = {
    { STAGEMSG_REMOVED, "removed" },
};

const struct chmsg_proto stagemsg_copier_proto = {
    .channel = "stage-in copier",
    .version = STAGEMSG_VERSION,
    .types = copier_types,
    .ntypes = CHMSG_NTYPES (copier_types),
};

const struct chmsg_proto stagemsg_stager_proto = {
    .channel = "stager",
    .version = STAGEMSG_VERSION,
    .types = stager_types,
    .ntypes = CHMSG_NTYPES (stager_types),
};

const struct chmsg_proto stagemsg_unmake_proto = {
    .channel = "mount point remover",
    .version = STAGEMSG_VERSION,
    .types = unmake_types,
    .ntypes = CHMSG_NTYPES (unmake_types),
};

const struct chmsg_proto *stagemsg_proto (int type)
{
    switch (type) {
        case STAGEMSG_TOTAL:
        case STAGEMSG_PROGRESS:
        case STAGEMSG_QUEUED:
        case STAGEMSG_MADE:
        case STAGEMSG_ERROR:
        case STAGEMSG_DONE:
        case STAGEMSG_SOURCE:
            return &stagemsg_copier_proto;
        case STAGEMSG_LOG:
            return &stagemsg_stager_proto;
        case STAGEMSG_REMOVED:
            return &stagemsg_unmake_proto;
    }
    return NULL;
}

/* A count as JSON: -1 (not representable) is refused by the caller. */
static json_int_t count (uint64_t v)
{
    return v > (uint64_t) INT64_MAX ? -1 : (json_int_t) v;
}

static bool ref_ok (const char *ref)
{
    return ref && strlen (ref) < STAGEMSG_REF_MAX && !strchr (ref, '/');
}

/* An absolute path that fits a PATH_MAX buffer. */
static bool path_ok (const char *path)
{
    return path && path[0] == '/' && strlen (path) < PATH_MAX;
}

json_t *stagemsg_pack (const struct stagemsg *m)
{
    json_t *o = NULL;

    switch (m->type) {
        case STAGEMSG_TOTAL:
            if (count (m->total) >= 0)
                o = json_pack ("{s:I}", "total", count (m->total));
            break;
        case STAGEMSG_PROGRESS:
            if (count (m->done) >= 0)
                o = json_pack ("{s:I}", "done", count (m->done));
            break;
        case STAGEMSG_QUEUED:
            o = json_pack ("{s:b}", "on", m->on);
            break;
        case STAGEMSG_MADE:
            /* dev and ino as their bits: an ino_t may use all 64 */
            if (m->k >= 0 && ref_ok (m->ref))
                o = json_pack ("{s:i s:I s:I s:s}", "k", m->k, "dev",
                               (json_int_t) m->dev, "ino", (json_int_t) m->ino,
                               "ref", m->ref);
            break;
        case STAGEMSG_ERROR:
            if (m->error)
                o = json_pack ("{s:s}", "error", m->error);
            break;
        case STAGEMSG_DONE:
            if (count (m->files) >= 0 && count (m->bytes) >= 0
                && count (m->gfs) >= 0 && count (m->meta) >= 0)
                o = json_pack ("{s:I s:I s:I s:I}", "files", count (m->files),
                               "bytes", count (m->bytes), "gfs", count (m->gfs),
                               "meta", count (m->meta));
            break;
        case STAGEMSG_SOURCE:
            if (m->k >= 0 && path_ok (m->path))
                o = json_pack ("{s:i s:s}", "k", m->k, "path", m->path);
            break;
        case STAGEMSG_LOG:
            if (m->level >= 0 && m->level <= 7 && m->text)
                o = json_pack ("{s:i s:s}", "level", m->level, "text", m->text);
            break;
        case STAGEMSG_REMOVED:
            if (m->removed >= 0)
                o = json_pack ("{s:i}", "removed", m->removed);
            break;
        default:
            break;
    }
    if (!o)
        errno = EINVAL; /* or out of memory */
    return o;
}

static int refuse (int type, tier_error_t *error, const char *why)
{
    return chmsg_refuse (stagemsg_proto (type), "stage-in", type, why, NULL,
                         error);
}

/* json_unpack's error, as a refusal. */
static int unpacked (int rc, int type, const json_error_t *jerr,
                     tier_error_t *error)
{
    char why[200];

    if (rc == 0)
        return 0;
    (void) snprintf (why, sizeof (why), "is malformed: %s", jerr->text);
    return refuse (type, error, why);
}

static int unpack_made (json_t *body, struct stagemsg *m, tier_error_t *error)
{
    json_int_t k, dev, ino;
    json_error_t jerr;

    if (unpacked (json_unpack_ex (body, &jerr, 0, "{s:I s:I s:I s:s}", "k", &k,
                                  "dev", &dev, "ino", &ino, "ref", &m->ref),
                  STAGEMSG_MADE, &jerr, error)
        < 0)
        return -1;
    if (k < 0 || k > INT_MAX)
        return refuse (STAGEMSG_MADE, error, "names no item");
    if (!ref_ok (m->ref))
        return refuse (STAGEMSG_MADE, error, "has a bad reference name");
    m->k = (int) k;
    m->dev = (uint64_t) dev;
    m->ino = (uint64_t) ino;
    return 0;
}

static int unpack_source (json_t *body, struct stagemsg *m, tier_error_t *error)
{
    json_error_t jerr;
    json_int_t k;

    if (unpacked (json_unpack_ex (body, &jerr, 0, "{s:I s:s}", "k", &k, "path",
                                  &m->path),
                  STAGEMSG_SOURCE, &jerr, error)
        < 0)
        return -1;
    if (k < 0 || k > INT_MAX)
        return refuse (STAGEMSG_SOURCE, error, "names no item");
    if (!path_ok (m->path))
        return refuse (STAGEMSG_SOURCE, error, "has no absolute path");
    m->k = (int) k;
    return 0;
}

static int unpack_done (json_t *body, struct stagemsg *m, tier_error_t *error)
{
    json_int_t v[4];
    json_error_t jerr;

    if (unpacked (json_unpack_ex (body, &jerr, 0, "{s:I s:I s:I s:I}", "files",
                                  &v[0], "bytes", &v[1], "gfs", &v[2], "meta",
                                  &v[3]),
                  STAGEMSG_DONE, &jerr, error)
        < 0)
        return -1;
    if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0)
        return refuse (STAGEMSG_DONE, error, "has a negative count");
    m->files = (uint64_t) v[0];
    m->bytes = (uint64_t) v[1];
    m->gfs = (uint64_t) v[2];
    m->meta = (uint64_t) v[3];
    return 0;
}

/* A message of one member that is a count. */
static int unpack_count (json_t *body, int type, const char *name,
                         uint64_t *out, tier_error_t *error)
{
    json_error_t jerr;
    json_int_t v;

    if (unpacked (json_unpack_ex (body, &jerr, 0, "{s:I}", name, &v), type,
                  &jerr, error)
        < 0)
        return -1;
    if (v < 0)
        return refuse (type, error, "has a negative count");
    *out = (uint64_t) v;
    return 0;
}

int stagemsg_unpack (int type, json_t *body, struct stagemsg *m,
                     tier_error_t *error)
{
    json_error_t jerr;
    json_int_t level;
    uint64_t n;
    int bit;

    memset (m, 0, sizeof (*m));
    m->type = type;
    switch (type) {
        case STAGEMSG_TOTAL:
            return unpack_count (body, type, "total", &m->total, error);
        case STAGEMSG_PROGRESS:
            return unpack_count (body, type, "done", &m->done, error);
        case STAGEMSG_QUEUED:
            if (unpacked (json_unpack_ex (body, &jerr, 0, "{s:b}", "on", &bit),
                          type, &jerr, error)
                < 0)
                return -1;
            m->on = bit != 0;
            return 0;
        case STAGEMSG_MADE:
            return unpack_made (body, m, error);
        case STAGEMSG_ERROR:
            return unpacked (json_unpack_ex (body, &jerr, 0, "{s:s}", "error",
                                             &m->error),
                             type, &jerr, error);
        case STAGEMSG_DONE:
            return unpack_done (body, m, error);
        case STAGEMSG_SOURCE:
            return unpack_source (body, m, error);
        case STAGEMSG_LOG:
            if (unpacked (json_unpack_ex (body, &jerr, 0, "{s:I s:s}", "level",
                                          &level, "text", &m->text),
                          type, &jerr, error)
                < 0)
                return -1;
            if (level < 0 || level > 7)
                return refuse (type, error, "has no syslog level");
            m->level = (int) level;
            return 0;
        case STAGEMSG_REMOVED:
            if (unpack_count (body, type, "removed", &n, error) < 0)
                return -1;
            if (n > INT_MAX)
                return refuse (type, error, "counts too many");
            m->removed = (int) n;
            return 0;
    }
    return refuse (type, error, "is of no stage-in channel");
}

int stagemsg_send (int fd, const struct stagemsg *m)
{
    const struct chmsg_proto *p = stagemsg_proto (m->type);
    json_t *body;

    if (!p || !(body = stagemsg_pack (m))) {
        errno = EINVAL;
        return -1;
    }
    return chmsg_send (fd, p, true, m->type, body, NULL, 0, SEND_TIMEOUT_MS,
                       NULL);
}
