/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* state.c - the shared state directory and its trust rules */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state.h"
#include "trust.h"

int tier_state_name_valid (const char *name)
{
    size_t n = name ? strlen (name) : 0;

    if (n == 0 || n > 64 || name[0] == '.' || name[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum ((unsigned char) name[i]) && !strchr ("._-$", name[i]))
            return 0;
    return 1;
}

/* Word a refusal of a directory root relies on as this module always
 * has; other errors as lib/trust.h put them. */
static int root_dir_error (tier_error_t *error, const char *shown,
                           enum tier_trust_why why, const tier_error_t *e)
{
    if (errno == EPERM && why == TIER_TRUST_LINK)
        return tier_errprintf (error, "%s: not a directory (a symlink?)",
                               shown);
    if (errno == EPERM && why != TIER_TRUST_PARENT)
        return tier_errprintf (error, "%s: must be owned by root and not "
                               "writable by others", shown);
    return tier_errprintf (error, "%s", e->text);
}

/* Open name beneath the root rootfd as a root-owned directory not
 * writable by group or others, creating it 0755 if missing. */
static int root_subdir (int rootfd, const char *root, const char *name,
                        tier_error_t *error)
{
    enum tier_trust_why why;
    const struct tier_trust rule = {
        .kind = TIER_TRUST_ROOT_DIR,
        .create = 0755,
        .why = &why,
    };
    char shown[PATH_MAX + 16];
    tier_error_t e;
    int fd;

    if ((fd = tier_trust_openat (rootfd, root, name, &rule, &e)) >= 0)
        return fd;
    (void) snprintf (shown, sizeof (shown), "%s/%s", root, name);
    return root_dir_error (error, shown, why, &e);
}

int tier_state_open_root (const char *root, tier_error_t *error)
{
    enum tier_trust_why why;
    const struct tier_trust rule = {
        .kind = TIER_TRUST_ROOT_DIR,
        .create = 0755,
        .why = &why,
    };
    tier_error_t e;
    int fd, sub;

    if (!root || root[0] != '/') {
        errno = EINVAL;
        return tier_errprintf (error, "SharedStateDir is not set");
    }
    if ((fd = tier_trust_open (root, &rule, &e)) < 0)
        return root_dir_error (error, root, why, &e);
    if ((sub = root_subdir (fd, root, "users", error)) < 0)
        goto error;
    close (sub);
    if ((sub = root_subdir (fd, root, "stats", error)) < 0)
        goto error;
    close (sub);
    return fd;
error:
    {
        int saved = errno;
        close (fd);
        errno = saved;
    }
    return -1;
}

int tier_state_user_dir (int rootfd, const char *user, uid_t uid, gid_t gid,
                         tier_error_t *error)
{
    enum tier_trust_why why;
    const struct tier_trust own = {
        .kind = TIER_TRUST_USER_PRIVATE,
        .uid = uid,
        .gid = gid,
        .create = 0700,
        .flags = O_DIRECTORY,
        .why = &why,
    };
    enum tier_trust_why rwhy;
    const struct tier_trust rootrule = { .kind = TIER_TRUST_ROOT_DIR,
                                         .why = &rwhy };
    tier_error_t e;
    int users, fd;

    if (!tier_state_name_valid (user)) {
        errno = EINVAL;
        return tier_errprintf (error, "'%.64s' is not a usable user name",
                               user ? user : "");
    }
    if ((users = tier_trust_openat (rootfd, "", "users", &rootrule, &e)) < 0)
        return errno == EPERM
                   ? root_dir_error (error, "users", rwhy, &e)
                   : tier_errprintf (error, "users: %s", strerror (errno));
    fd = tier_trust_openat (users, "users", user, &own, &e);
    close (users);
    if (fd >= 0)
        return fd;
    if (errno == EPERM && why == TIER_TRUST_LINK)
        return tier_errprintf (error,
                               "users/%s: not a directory (a "
                               "symlink?): refused",
                               user);
    if (errno == EPERM && why)
        return tier_errprintf (error, "users/%s: must be owned by uid %u "
                               "with mode 0700; refused (made by someone "
                               "else?)", user, (unsigned) uid);
    if (errno == EPERM)
        /* made, but not given: e.g. a root-squashed GFS */
        return tier_errprintf (error,
                               "%s (create it owned by the user, "
                               "mode 0700)",
                               e.text);
    return tier_errprintf (error, "%s", e.text);
}

int tier_state_publish (const char *root, const char *user, uid_t uid,
                        const char *dir, const char *sub, const char *name,
                        const char *text)
{
    char tmp[NAME_MAX + 1], rel[2 * 65 + 2];
    size_t len = strlen (text);
    int d, fd, e;

    if (!tier_state_name_valid (user) || !tier_state_name_valid (dir)
        || !tier_state_name_valid (sub) || !tier_state_name_valid (name)
        || strlen (name) > NAME_MAX - 24) {
        errno = EINVAL;
        return -1;
    }
    (void) snprintf (rel, sizeof (rel), "%s/%s", dir, sub);
    if ((d = tier_state_user_open (root, user, uid, rel, true, NULL)) < 0)
        return -1;
    (void) snprintf (tmp, sizeof (tmp), ".%s.%d", name, (int) getpid ());
    if ((fd = openat (d, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
                      | O_CLOEXEC, 0600)) < 0)
        goto error;
    if (write (fd, text, len) != (ssize_t) len || fsync (fd) < 0) {
        e = errno;
        close (fd);
        (void) unlinkat (d, tmp, 0);
        errno = e;
        goto error;
    }
    close (fd);
    if (renameat (d, tmp, d, name) < 0) {
        e = errno;
        (void) unlinkat (d, tmp, 0);
        errno = e;
        goto error;
    }
    close (d);
    return 0;
error:
    e = errno;
    close (d);
    errno = e;
    return -1;
}

int tier_state_user_path (const char *root, const char *user,
                          const char *sub, char *buf, size_t size)
{
    int n;

    if (!root || root[0] != '/' || !tier_state_name_valid (user)
        || (sub && (sub[0] == '/' || strstr (sub, "..")))) {
        errno = EINVAL;
        return -1;
    }
    n = sub ? snprintf (buf, size, "%s/users/%s/%s", root, user, sub)
            : snprintf (buf, size, "%s/users/%s", root, user);
    if (n < 0 || (size_t) n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

void tier_state_job_name (uint32_t job_id, uint32_t restart, char *buf,
                          size_t size)
{
    (void) snprintf (buf, size, "%u.%u", job_id, restart);
}

void tier_state_manifest_name (const char *node, char *buf, size_t size)
{
    (void) snprintf (buf, size, "outputs-%s.json", node);
}

int tier_state_user_open (const char *root, const char *user, uid_t uid,
                          const char *sub, bool create, tier_error_t *error)
{
    const struct tier_trust rootrule = { .kind = TIER_TRUST_ROOT_DIR };
    struct tier_trust own = {
        .kind = TIER_TRUST_USER_PRIVATE, .uid = uid, .flags = O_DIRECTORY,
        .create = create ? 0700 : 0, .parents = create,
    };
    char shown[PATH_MAX], rel[PATH_MAX];
    int rfd, fd, e;

    if (tier_state_user_path (root, user, sub, shown, sizeof (shown)) < 0) {
        if (errno == EINVAL)
            return tier_errprintf (error, "%s: not a usable user name or "
                                   "path (or no SharedStateDir)",
                                   user ? user : "");
        return tier_errprintf (error, "%s/users/%s: path too long", root,
                               user);
    }
    (void) snprintf (rel, sizeof (rel), "%s%s%s", user, sub ? "/" : "",
                     sub ? sub : "");
    (void) snprintf (shown, sizeof (shown), "%s/users", root);
    if ((rfd = tier_trust_open (shown, &rootrule, error)) < 0)
        return -1;
    own.gid = (gid_t) -1;               /* made by root: given to uid only */
    fd = tier_trust_openat (rfd, shown, rel, &own, error);
    e = errno;
    close (rfd);
    errno = e;
    return fd;
}
