/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* endpoint_creds.c - the per-user S3 credentials file
 *
 * Secrets never reach a message: errors name the file, the line, the
 * profile and the key, and a line that cannot be parsed is not shown.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trust.h"
#include "endpoint.h"

#define CREDS_MAX_SIZE (64u << 10)

static void free_secret (char *s)
{
    if (s) {
        explicit_bzero (s, strlen (s));
        free (s);
    }
}

void tier_creds_destroy (struct tier_creds *c)
{
    if (c) {
        int saved = errno;

        free (c->file);
        free (c->profile);
        free (c->access_key);
        free_secret (c->secret_key);
        free_secret (c->session_token);
        free (c->region);
        free (c->endpoint);
        free (c);
        errno = saved;
    }
}

enum ckey {
    K_ACCESS, K_SECRET, K_TOKEN, K_REGION, K_ENDPOINT, K_ADDRESSING, K_COUNT
};

static const char *const key_names[K_COUNT] = {
    "access_key", "secret_key", "session_token", "region", "endpoint",
    "addressing",
};

static char *trim (char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen (s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        *--e = '\0';
    return s;
}

static int syntax (tier_error_t *error, const char *file, int line,
                   const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

static int syntax (tier_error_t *error, const char *file, int line,
                   const char *fmt, ...)
{
    char why[200];
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (why, sizeof (why), fmt, ap);
    va_end (ap);
    errno = EINVAL;
    return tier_errprintf (error, "%s:%d: %s", file, line, why);
}

static int check_values (struct tier_creds *c, tier_error_t *error)
{
    const char *f = c->file, *p = c->profile;

    if (!c->access_key) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: [%s]: no access_key", f, p);
    }
    if (!c->secret_key) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: [%s]: no secret_key", f, p);
    }
    for (const char *s = c->access_key; *s; s++) {
        if (!isascii ((unsigned char) *s) || !isgraph ((unsigned char) *s)) {
            errno = EINVAL;
            return tier_errprintf (error, "%s: [%s]: access_key holds a "
                                   "blank or non-ASCII character", f, p);
        }
    }
    if (!c->region && !(c->region = strdup ("us-east-1")))
        return -1;
    for (const char *s = c->region; *s; s++) {
        if (!isascii ((unsigned char) *s)
            || !(islower ((unsigned char) *s) || isdigit ((unsigned char) *s)
                 || *s == '-')) {
            errno = EINVAL;
            return tier_errprintf (error, "%s: [%s]: region '%s' is not a "
                                   "region name", f, p, c->region);
        }
    }
    if (c->endpoint) {
        tier_error_t e;
        struct tier_url *u = tier_url_parse (c->endpoint, &e);

        if (!u) {
            if (errno == ENOMEM)
                return -1;
            return tier_errprintf (error, "%s: [%s]: endpoint: %s", f, p,
                                   e.text);
        }
        if (u->scheme == TIER_URL_S3 || strcmp (u->path, "/") != 0
            || u->query) {
            tier_url_destroy (u);
            errno = EINVAL;
            return tier_errprintf (error, "%s: [%s]: endpoint must be "
                                   "http(s)://HOST[:PORT] without a path",
                                   f, p);
        }
        tier_url_destroy (u);
    }
    return 0;
}

/* Where tier_creds_parse is in the text. */
struct parse {
    const char *file, *profile;
    char **slot[K_COUNT];
    int lineno;
    bool in_profile; /* in the [profile] asked for */
    bool any_section;
    bool found;
};

/* A "[name]" line. */
static int parse_section (struct parse *p, char *line, tier_error_t *error)
{
    char *end = strchr (line, ']');
    char *name;

    if (!end || end[1] != '\0')
        return syntax (error, p->file, p->lineno, "expected '[profile]'");
    *end = '\0';
    name = trim (line + 1);
    if (!*name)
        return syntax (error, p->file, p->lineno, "empty profile name");
    if (!strcmp (name, p->profile) && p->found)
        return syntax (error, p->file, p->lineno, "profile [%s] appears twice",
                       p->profile);
    p->in_profile = !strcmp (name, p->profile);
    p->found |= p->in_profile;
    p->any_section = true;
    return 0;
}

/* A "key = value" line: -1 with errno ENOMEM (and no text) if out of
 * memory. */
static int parse_key (struct parse *p, char *line, tier_error_t *error)
{
    char *eq, *key, *value;
    int k;

    if (!(eq = strchr (line, '=')))
        return syntax (error, p->file, p->lineno,
                       "expected 'key = value' "
                       "(the line is not shown: it may hold a secret)");
    *eq = '\0';
    key = trim (line);
    value = trim (eq + 1);
    for (k = 0; k < K_COUNT; k++)
        if (!strcmp (key, key_names[k]))
            break;
    if (k == K_COUNT)
        return syntax (error, p->file, p->lineno,
                       "unknown key '%.60s' "
                       "(access_key, secret_key, session_token, region, "
                       "endpoint, addressing)",
                       key);
    if (!p->any_section)
        return syntax (error, p->file, p->lineno,
                       "%s outside a [profile] section", key_names[k]);
    if (*value == '\0')
        return syntax (error, p->file, p->lineno, "%s has no value",
                       key_names[k]);
    if (!p->in_profile)
        return 0;
    if (*p->slot[k])
        return syntax (error, p->file, p->lineno, "%s appears twice",
                       key_names[k]);
    if (!(*p->slot[k] = strdup (value))) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* The lines of copy (changed in place) into p's slots. */
static int parse_lines (struct parse *p, char *copy, tier_error_t *error)
{
    char *line, *next;

    for (line = copy; line; line = next) {
        p->lineno++;
        if ((next = strchr (line, '\n')))
            *next++ = '\0';
        line = trim (line);
        if (*line == '\0' || *line == '#' || *line == ';')
            continue;
        if ((*line == '[' ? parse_section (p, line, error)
                          : parse_key (p, line, error))
            < 0)
            return -1;
    }
    if (!p->found) {
        errno = ENOENT;
        return tier_errprintf (error, "%s: no [%s] profile", p->file,
                               p->profile);
    }
    return 0;
}

static int set_addressing (struct tier_creds *c, const char *addressing,
                           tier_error_t *error)
{
    if (!addressing)
        return 0;
    if (!strcmp (addressing, "path"))
        c->addressing = TIER_S3_ADDR_PATH;
    else if (!strcmp (addressing, "virtual"))
        c->addressing = TIER_S3_ADDR_VIRTUAL;
    else {
        errno = EINVAL;
        return tier_errprintf (error,
                               "%s: [%s]: addressing '%.20s' is not "
                               "path or virtual",
                               c->file, c->profile, addressing);
    }
    return 0;
}

struct tier_creds *tier_creds_parse (const char *text, const char *file,
                                     const char *profile, tier_error_t *error)
{
    struct tier_creds *c = NULL;
    char *copy = NULL, *addressing = NULL;
    struct parse p = { .file = file ? file : "credentials",
                       .profile = profile && *profile ? profile : "default" };

    file = p.file;
    if (!(c = calloc (1, sizeof (*c))) || !(c->file = strdup (p.file))
        || !(c->profile = strdup (p.profile)) || !(copy = strdup (text)))
        goto nomem;
    p.slot[K_ACCESS] = &c->access_key;
    p.slot[K_SECRET] = &c->secret_key;
    p.slot[K_TOKEN] = &c->session_token;
    p.slot[K_REGION] = &c->region;
    p.slot[K_ENDPOINT] = &c->endpoint;
    p.slot[K_ADDRESSING] = &addressing;
    if (parse_lines (&p, copy, error) < 0
        || set_addressing (c, addressing, error) < 0
        || check_values (c, error) < 0) {
        if (errno == ENOMEM)
            goto nomem;
        goto error;
    }
    free (addressing);
    explicit_bzero (copy, strlen (text));
    free (copy);
    return c;
nomem:
    errno = ENOMEM;
    tier_errprintf (error, "%s: out of memory", file);
error:
    free (addressing);
    if (copy) {
        explicit_bzero (copy, strlen (text));
        free (copy);
    }
    tier_creds_destroy (c);
    return NULL;
}

struct tier_creds *tier_creds_load (const char *path, const char *profile,
                                    uid_t uid, tier_error_t *error)
{
    enum tier_trust_why why;
    const struct tier_trust own = { .kind = TIER_TRUST_USER_PRIVATE,
                                    .uid = uid,
                                    .why = &why };
    struct tier_creds *c;
    tier_error_t e;
    struct stat st;
    char *buf;
    size_t len = 0;
    int fd;

    if ((fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY
                              | O_NONBLOCK)) < 0) {
        if (errno == ELOOP)
            errno = EPERM, tier_errprintf (error, "%s: is a symlink: "
                                           "refused", path);
        else
            tier_errprintf (error, "%s: %s", path, strerror (errno));
        return NULL;
    }
    if (fstat (fd, &st) < 0) {
        tier_errprintf (error, "%s: %s", path, strerror (errno));
        goto error;
    }
    if (!S_ISREG (st.st_mode)) {
        errno = EPERM;
        tier_errprintf (error, "%s: not a regular file: refused", path);
        goto error;
    }
    if (tier_trust_check (fd, path, &own, &e) < 0) {
        if (why == TIER_TRUST_MODE)
            tier_errprintf (error,
                            "%s: mode %04o lets others read it: "
                            "refused (chmod 600 %s)",
                            path, (unsigned) (st.st_mode & 07777), path);
        else
            tier_errprintf (error, "%s", e.text);
        goto error;
    }
    if (st.st_size > CREDS_MAX_SIZE) {
        errno = EFBIG;
        tier_errprintf (error, "%s: larger than %u bytes", path,
                        CREDS_MAX_SIZE);
        goto error;
    }
    if (!(buf = malloc ((size_t) st.st_size + 1))) {
        tier_errprintf (error, "%s: out of memory", path);
        goto error;
    }
    while (len < (size_t) st.st_size) {
        ssize_t n = read (fd, buf + len, (size_t) st.st_size - len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                break;
            tier_errprintf (error, "%s: %s", path, strerror (errno));
            explicit_bzero (buf, len);
            free (buf);
            goto error;
        }
        len += (size_t) n;
    }
    buf[len] = '\0';
    close (fd);
    c = tier_creds_parse (buf, path, profile, error);
    explicit_bzero (buf, len);
    free (buf);
    return c;
error : {
    int saved = errno;

    close (fd);
    errno = saved;
}
    return NULL;
}

int tier_creds_path (const char *shared_state_dir, const char *user,
                     char *buf, size_t size)
{
    int n;

    if (!shared_state_dir || !*shared_state_dir || !user || !*user
        || strchr (user, '/') || !strcmp (user, ".")
        || !strcmp (user, "..")) {
        errno = EINVAL;
        return -1;
    }
    n = snprintf (buf, size, "%s/users/%s/credentials", shared_state_dir,
                  user);
    if (n < 0 || (size_t) n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

struct tier_creds *tier_creds_for_bucket (const char *path,
                                          const char *bucket, uid_t uid,
                                          tier_error_t *error)
{
    struct tier_creds *c;
    struct stat st;

    if (lstat (path, &st) < 0) {
        tier_errprintf (error, "no S3 credentials: %s: %s (see "
                        "doc/endpoints.md)", path, strerror (errno));
        return NULL;
    }
    if ((c = tier_creds_load (path, bucket, uid, error)))
        return c;
    if (errno == ENOENT && (c = tier_creds_load (path, "default", uid,
                                                 error)))
        return c;
    if (errno == ENOENT) {
        tier_errprintf (error, "%s: no [%s] or [default] profile", path,
                        bucket);
        errno = ENOENT;
    }
    return NULL;
}
