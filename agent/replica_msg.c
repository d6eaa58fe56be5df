/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* replica_msg.c - the messages of the replica cache's children (see
 * replica_msg.h)
 *
 * Owns the two channels' tables and the packing of their messages to and
 * from JSON.  Calls jansson and chmsg.c only.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "replica_msg.h"

/* How long a child waits for its parent to take a message. */
#define SEND_TIMEOUT_MS 30000

static const struct chmsg_type fetch_types[] = {
    { REPMSG_COPIED, "copied" },
    { REPMSG_FOUND, "found" },
    { REPMSG_FAILED, "failed" },
    { REPMSG_PROGRESS, "progress" },
};

static const struct chmsg_type walk_types[] = {
    { REPMSG_MANIFEST, "manifest" },
    { REPMSG_WALK_ERROR, "error" },
};

static const struct chmsg_type mirror_types[] = {
    { REPMSG_BUILT, "built" },
    { REPMSG_BUILD_ERROR, "error" },
};

static const struct chmsg_type binds_types[] = {
    { REPMSG_BINDS, "binds" },
};

const struct chmsg_proto repmsg_binds_proto = {
    .channel = "mirror checker",
    .version = REPMSG_VERSION,
    .types = binds_types,
    .ntypes = CHMSG_NTYPES (binds_types),
};

const struct chmsg_proto repmsg_mirror_proto = {
    .channel = "mirror builder",
    .version = REPMSG_VERSION,
    .types = mirror_types,
    .ntypes = CHMSG_NTYPES (mirror_types),
};

const struct chmsg_proto repmsg_fetch_proto = {
    .channel = "replica fetcher",
    .version = REPMSG_VERSION,
    .types = fetch_types,
    .ntypes = CHMSG_NTYPES (fetch_types),
};

const struct chmsg_proto repmsg_walk_proto = {
    .channel = "mirror walker",
    .version = REPMSG_VERSION,
    .types = walk_types,
    .ntypes = CHMSG_NTYPES (walk_types),
};

const struct chmsg_proto *repmsg_proto (int type)
{
    switch (type) {
        case REPMSG_COPIED:
        case REPMSG_FOUND:
        case REPMSG_FAILED:
        case REPMSG_PROGRESS:
            return &repmsg_fetch_proto;
        case REPMSG_MANIFEST:
        case REPMSG_WALK_ERROR:
            return &repmsg_walk_proto;
        case REPMSG_BUILT:
        case REPMSG_BUILD_ERROR:
            return &repmsg_mirror_proto;
        case REPMSG_BINDS:
            return &repmsg_binds_proto;
    }
    return NULL;
}

json_t *repmsg_pack (const struct repmsg *m)
{
    json_t *o = NULL;

    switch (m->type) {
        case REPMSG_COPIED:
        case REPMSG_PROGRESS:
            if (m->bytes <= (uint64_t) INT64_MAX)
                o = json_pack ("{s:I}", "bytes", (json_int_t) m->bytes);
            break;
        case REPMSG_FOUND:
            o = json_object ();
            break;
        case REPMSG_MANIFEST:
            if (m->bytes <= REPMSG_MANIFEST_MAX)
                o = json_pack ("{s:I}", "bytes", (json_int_t) m->bytes);
            break;
        case REPMSG_BUILT:
            if (m->bytes <= (uint64_t) INT64_MAX
                && m->files <= (uint64_t) INT64_MAX)
                o = json_pack ("{s:I s:I}", "files", (json_int_t) m->files,
                               "bytes", (json_int_t) m->bytes);
            break;
        case REPMSG_FAILED:
        case REPMSG_WALK_ERROR:
        case REPMSG_BUILD_ERROR:
            if (m->error)
                o = json_pack ("{s:s}", "error", m->error);
            break;
        case REPMSG_BINDS:
            if (m->binds && strlen (m->binds) < REPMSG_BINDS_MAX)
                o = json_pack ("{s:s}", "binds", m->binds);
            break;
        default:
            break;
    }
    if (!o)
        errno = EINVAL; /* or out of memory */
    return o;
}

static int refuse (int type, tier_error_t *error, const char *why,
                   const char *detail)
{
    return chmsg_refuse (repmsg_proto (type), "replica", type, why, detail,
                         error);
}

static int unpack_bytes (int type, json_t *body, uint64_t max, struct repmsg *m,
                         tier_error_t *error)
{
    json_error_t jerr;
    json_int_t bytes;

    if (json_unpack_ex (body, &jerr, 0, "{s:I}", "bytes", &bytes) < 0)
        return refuse (type, error, "is malformed", jerr.text);
    if (bytes < 0 || (uint64_t) bytes > max)
        return refuse (type, error, "has no usable size", NULL);
    m->bytes = (uint64_t) bytes;
    return 0;
}

int repmsg_unpack (int type, json_t *body, struct repmsg *m,
                   tier_error_t *error)
{
    json_error_t jerr;

    memset (m, 0, sizeof (*m));
    m->type = type;
    switch (type) {
        case REPMSG_COPIED:
        case REPMSG_PROGRESS:
            return unpack_bytes (type, body, INT64_MAX, m, error);
        case REPMSG_MANIFEST:
            return unpack_bytes (type, body, REPMSG_MANIFEST_MAX, m, error);
        case REPMSG_FOUND:
            if (!json_is_object (body))
                return refuse (type, error, "is not an object", NULL);
            return 0;
        case REPMSG_BUILT: {
            json_int_t files = -1, bytes = -1;
            if (json_unpack_ex (body, &jerr, 0, "{s:I s:I}", "files", &files,
                                "bytes", &bytes)
                < 0)
                return refuse (type, error, "is malformed", jerr.text);
            if (files < 0 || bytes < 0)
                return refuse (type, error, "has a negative count", NULL);
            m->files = (uint64_t) files;
            m->bytes = (uint64_t) bytes;
            return 0;
        }
        case REPMSG_FAILED:
        case REPMSG_WALK_ERROR:
        case REPMSG_BUILD_ERROR:
            if (json_unpack_ex (body, &jerr, 0, "{s:s}", "error", &m->error)
                < 0)
                return refuse (type, error, "is malformed", jerr.text);
            return 0;
        case REPMSG_BINDS:
            if (json_unpack_ex (body, &jerr, 0, "{s:s}", "binds", &m->binds)
                < 0)
                return refuse (type, error, "is malformed", jerr.text);
            if (strlen (m->binds) >= REPMSG_BINDS_MAX)
                return refuse (type, error, "is too long", NULL);
            return 0;
    }
    return refuse (type, error, "is of no replica channel", NULL);
}

int repmsg_send (int chan, const struct repmsg *m, int fd)
{
    const struct chmsg_proto *p = repmsg_proto (m->type);
    json_t *body;

    if (!p || !(body = repmsg_pack (m))) {
        errno = EINVAL;
        return -1;
    }
    return chmsg_send (chan, p, true, m->type, body, &fd, fd >= 0 ? 1 : 0,
                       SEND_TIMEOUT_MS, NULL);
}
