/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy_msg.c - the messages of the policy freezer (see policy_msg.h)
 *
 * Owns the channel's table and the packing of its messages; a set
 * travels as chmsg.h's sealed memfd.  Calls jansson, libc and chmsg.c
 * only.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy_msg.h"

/* How long the freezer waits for the agent to take its answer. */
#define SEND_TIMEOUT_MS 30000

static const struct chmsg_type types[] = {
    { POLMSG_NONE, "none" },
    { POLMSG_FROZEN, "frozen" },
    { POLMSG_USER, "user" },
    { POLMSG_ERROR, "error" },
};

const struct chmsg_proto polmsg_proto = {
    .channel = "policy freezer",
    .version = POLMSG_VERSION,
    .types = types,
    .ntypes = (int) (sizeof (types) / sizeof (types[0])),
};

json_t *polmsg_pack (const struct polmsg *m)
{
    json_t *o = NULL;

    switch (m->type) {
        case POLMSG_NONE:
            o = json_object ();
            break;
        case POLMSG_FROZEN:
        case POLMSG_USER:
            if (m->bytes <= POLMSG_TEXT_MAX)
                o = json_pack ("{s:I}", "bytes", (json_int_t) m->bytes);
            break;
        case POLMSG_ERROR:
            if (m->error)
                o = json_pack ("{s:s}", "error", m->error);
            break;
    }
    if (!o)
        errno = EINVAL; /* or out of memory */
    return o;
}

static int refuse (int type, tier_error_t *error, const char *why,
                   const char *detail)
{
    return chmsg_refuse (&polmsg_proto, NULL, type, why, detail, error);
}

int polmsg_unpack (int type, json_t *body, struct polmsg *m,
                   tier_error_t *error)
{
    json_error_t jerr;
    json_int_t bytes;

    memset (m, 0, sizeof (*m));
    m->type = type;
    switch (type) {
        case POLMSG_NONE:
            if (!json_is_object (body))
                return refuse (type, error, "is not an object", NULL);
            return 0;
        case POLMSG_FROZEN:
        case POLMSG_USER:
            if (json_unpack_ex (body, &jerr, 0, "{s:I}", "bytes", &bytes) < 0)
                return refuse (type, error, "is malformed", jerr.text);
            if (bytes < 0 || bytes > POLMSG_TEXT_MAX)
                return refuse (type, error, "has no usable size", NULL);
            m->bytes = (uint64_t) bytes;
            return 0;
        case POLMSG_ERROR:
            if (json_unpack_ex (body, &jerr, 0, "{s:s}", "error", &m->error)
                < 0)
                return refuse (type, error, "is malformed", jerr.text);
            return 0;
    }
    errno = EPROTO;
    return tier_errprintf (error, "%s channel: no message %d",
                           polmsg_proto.channel, type);
}

int polmsg_text_fd (const char *text, size_t len)
{
    return chmsg_text_fd ("tier-policy", text, len);
}

int polmsg_text_read (const struct polmsg *m, int fd, char **text,
                      tier_error_t *error)
{
    *text = NULL;
    if (fd < 0)
        return refuse (m->type, error, "came without its text", NULL);
    if (chmsg_text_read (fd, m->bytes, POLMSG_TEXT_MAX, text) == 0)
        return 0;
    if (errno == ENOMEM)
        return tier_errprintf (error, "out of memory");
    return refuse (m->type, error,
                   errno == EIO ? "came with a text that cannot be read"
                                : "came with a text that is not a sealed "
                                  "memfd of its size",
                   NULL);
}

int polmsg_send (int fd, enum polmsg_type type, const char *text)
{
    struct polmsg m = { .type = type };
    int tfd = -1, rc, e;
    json_t *body;

    if (type == POLMSG_FROZEN || type == POLMSG_USER) {
        m.bytes = text ? strlen (text) : 0;
        if ((tfd = polmsg_text_fd (text ? text : "", m.bytes)) < 0)
            return -1;
    }
    else if (type == POLMSG_ERROR)
        m.error = text ? text : "";
    if (!(body = polmsg_pack (&m))) {
        e = errno;
        if (tfd >= 0)
            close (tfd);
        errno = e;
        return -1;
    }
    rc = chmsg_send (fd, &polmsg_proto, true, type, body, &tfd,
                     tfd >= 0 ? 1 : 0, SEND_TIMEOUT_MS, NULL);
    e = errno;
    if (tfd >= 0)
        close (tfd);
    errno = e;
    return rc;
}
