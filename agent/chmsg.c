/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* chmsg.c - typed messages between the agent and its children */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chmsg.h"

/* How long a child waits for its parent to take a message. */
#define TELL_TIMEOUT_MS 30000
#define SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
#define SEALS_NEEDED (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

const char *chmsg_name (const struct chmsg_proto *p, int type)
{
    for (int i = 0; i < p->ntypes; i++)
        if (p->types[i].type == type)
            return p->types[i].name;
    return "?";
}

int chmsg_refuse (const struct chmsg_proto *p, const char *fallback, int type,
                  const char *why, const char *detail, tier_error_t *error)
{
    errno = EPROTO;
    return tier_errprintf (error, "%s channel: message '%s' %s%s%s",
                           p ? p->channel : fallback,
                           p ? chmsg_name (p, type) : "?", why,
                           detail ? ": " : "", detail ? detail : "");
}

static int type_of (const struct chmsg_proto *p, const char *name)
{
    for (int i = 0; i < p->ntypes; i++)
        if (!strcmp (p->types[i].name, name))
            return p->types[i].type;
    return -1;
}

char *chmsg_encode (const struct chmsg_proto *p, int type, json_t *body)
{
    const char *name = chmsg_name (p, type);
    char *text;
    json_t *o;

    if (!strcmp (name, "?") || (body && !json_is_object (body))) {
        json_decref (body);
        errno = EINVAL;
        return NULL;
    }
    o = body ? body : json_object ();
    if (!o || json_object_set_new (o, "t", json_string (name)) < 0
        || json_object_set_new (o, "v", json_integer (p->version)) < 0
        || !(text = json_dumps (o, JSON_COMPACT))) {
        json_decref (o);
        errno = ENOMEM;
        return NULL;
    }
    json_decref (o);
    return text;
}

int chmsg_decode (const struct chmsg_proto *p, const char *text, size_t len,
                  int *type, json_t **body, tier_error_t *error)
{
    json_error_t jerr;
    const char *name = NULL;
    json_int_t v = 0;
    json_t *o;
    int t;

    if (!(o = json_loadb (text, len, JSON_REJECT_DUPLICATES, &jerr))) {
        errno = EPROTO;
        return tier_errprintf (error, "%s channel: not JSON: %s", p->channel,
                               jerr.text);
    }
    if (json_unpack (o, "{s:s s:I}", "t", &name, "v", &v) < 0) {
        json_decref (o);
        errno = EPROTO;
        return tier_errprintf (error, "%s channel: a message without its "
                               "name and version", p->channel);
    }
    if (v != p->version) {
        tier_errprintf (error, "%s channel: message '%.64s' of version %lld; "
                        "this side speaks %d", p->channel, name,
                        (long long) v, p->version);
        json_decref (o);
        errno = EPROTO;
        return -1;
    }
    if ((t = type_of (p, name)) < 0) {
        tier_errprintf (error, "%s channel: unknown message '%.64s'",
                        p->channel, name);
        json_decref (o);
        errno = EPROTO;
        return -1;
    }
    (void) json_object_del (o, "t");
    (void) json_object_del (o, "v");
    *type = t;
    *body = o;
    return 0;
}

int chmsg_send (int fd, const struct chmsg_proto *p, bool from_child,
                int type, json_t *body, const int *fds, int nfds,
                int timeout_ms, tier_error_t *error)
{
    char *text = chmsg_encode (p, type, body);
    int rc;

    if (!text)
        return tier_errprintf (error, "%s channel: cannot encode '%s'",
                               p->channel, chmsg_name (p, type));
    rc = tier_msg_send (fd, from_child ? TIER_MSG_RESPONSE : TIER_MSG_REQUEST,
                        0, text, (uint32_t) strlen (text), fds, nfds,
                        timeout_ms, error);
    free (text);
    return rc;
}

int chmsg_recv (int fd, const struct chmsg_proto *p, int *type, json_t **body,
                int *fds, int *nfds, int maxfds, int timeout_ms,
                tier_error_t *error)
{
    struct tier_msghdr h;
    char *text = NULL;
    int n = 0, rc;

    if (tier_msg_recv (fd, &h, &text, fds, &n, maxfds, CHMSG_MAX, timeout_ms,
                       error) < 0)
        return -1;
    if (h.version != TIER_PROTO_VERSION) {
        errno = EPROTO;
        rc = tier_errprintf (error, "%s channel: frame of version %u",
                             p->channel, (unsigned) h.version);
    }
    else
        rc = chmsg_decode (p, text, h.len, type, body, error);
    free (text);
    if (rc < 0) {
        for (int i = 0; i < n; i++)
            (void) close (fds[i]);
        n = 0;
    }
    if (nfds)
        *nfds = n;
    return rc;
}

int chmsg_tell (int fd, const struct chmsg_proto *p, int type,
                const char *fmt, ...)
{
    json_t *body = NULL;
    va_list ap;

    if (fmt) {
        json_error_t jerr;
        va_start (ap, fmt);
        body = json_vpack_ex (&jerr, 0, fmt, ap);
        va_end (ap);
        if (!body) {
            errno = EINVAL;
            return -1;
        }
    }
    return chmsg_send (fd, p, true, type, body, NULL, 0, TELL_TIMEOUT_MS,
                       NULL);
}

int chmsg_text_fd (const char *name, const char *text, size_t len)
{
    size_t off = 0;
    int fd, e;

    if ((fd = memfd_create (name, MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0)
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

int chmsg_text_read (int fd, uint64_t size, uint64_t max, char **text)
{
    struct stat st;
    size_t off = 0;
    char *buf;
    int seals;

    *text = NULL;
    /* only a memfd has seals: nothing else could make the agent wait */
    if (fd < 0 || (seals = fcntl (fd, F_GET_SEALS)) < 0
        || (seals & SEALS_NEEDED) != SEALS_NEEDED || fstat (fd, &st) < 0
        || !S_ISREG (st.st_mode) || (uint64_t) st.st_size != size
        || size > max) {
        errno = EPROTO;
        return -1;
    }
    if (!(buf = malloc (size + 1))) {
        errno = ENOMEM;
        return -1;
    }
    while (off < size) {
        ssize_t n = pread (fd, buf + off, size - off, (off_t) off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free (buf);
            errno = EIO;
            return -1;
        }
        off += (size_t) n;
    }
    buf[off] = '\0';
    *text = buf;
    return 0;
}
