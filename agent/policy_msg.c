/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy_msg.c - the messages of the policy freezer (see policy_msg.h)
 *
 * Owns the channel's table, the packing of its messages and the memfd
 * that carries a set.  Calls jansson, libc and chmsg.c only.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy_msg.h"

/* How long the freezer waits for the agent to take its answer. */
#define SEND_TIMEOUT_MS 30000
#define SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
#define SEALS_NEEDED (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

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
    errno = EPROTO;
    return tier_errprintf (error, "%s channel: message '%s' %s%s%s",
                           polmsg_proto.channel,
                           chmsg_name (&polmsg_proto, type), why,
                           detail ? ": " : "", detail ? detail : "");
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
    size_t off = 0;
    int fd, e;

    if ((fd = memfd_create ("tier-policy", MFD_CLOEXEC | MFD_ALLOW_SEALING))
        < 0)
        return -1;
    while (off < len) {
        ssize_t n = write (fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto error;
        off += (size_t) n;
    }
    if (fcntl (fd, F_ADD_SEALS, SEALS) < 0)
        goto error;
    return fd;
error:
    e = errno ? errno : EIO;
    close (fd);
    errno = e;
    return -1;
}

int polmsg_text_read (const struct polmsg *m, int fd, char **text,
                      tier_error_t *error)
{
    struct stat st;
    size_t off = 0;
    char *buf;
    int seals;

    *text = NULL;
    if (fd < 0)
        return refuse (m->type, error, "came without its text", NULL);
    /* only a memfd has seals: nothing else could make the agent wait */
    if ((seals = fcntl (fd, F_GET_SEALS)) < 0
        || (seals & SEALS_NEEDED) != SEALS_NEEDED || fstat (fd, &st) < 0
        || !S_ISREG (st.st_mode) || (uint64_t) st.st_size != m->bytes
        || m->bytes > POLMSG_TEXT_MAX)
        return refuse (m->type, error,
                       "came with a text that is not a "
                       "sealed memfd of its size",
                       NULL);
    if (!(buf = malloc (m->bytes + 1))) {
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    while (off < m->bytes) {
        ssize_t n = pread (fd, buf + off, m->bytes - off, (off_t) off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free (buf);
            return refuse (m->type, error,
                           "came with a text that cannot "
                           "be read",
                           NULL);
        }
        off += (size_t) n;
    }
    buf[off] = '\0';
    *text = buf;
    return 0;
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
