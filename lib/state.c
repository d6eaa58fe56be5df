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

/* Open dir (a single component) beneath dirfd as a root-owned directory
 * not writable by group or others, creating it with mode if missing.
 */
static int root_subdir (int dirfd, const char *name, const char *shown,
                        mode_t mode, tier_error_t *error)
{
    struct stat st;
    int fd;

    if (mkdirat (dirfd, name, mode) < 0 && errno != EEXIST)
        return tier_errprintf (error, "%s: %s", shown, strerror (errno));
    if ((fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                      | O_CLOEXEC)) < 0)
        return tier_errprintf (error, "%s: %s", shown,
                               errno == ELOOP || errno == ENOTDIR
                               ? "not a directory (a symlink?)"
                               : strerror (errno));
    if (fstat (fd, &st) < 0 || st.st_uid != 0
        || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        close (fd);
        errno = EPERM;
        return tier_errprintf (error, "%s: must be owned by root and not "
                               "writable by others", shown);
    }
    return fd;
}

int tier_state_open_root (const char *root, tier_error_t *error)
{
    char shown[4200];
    int fd, sub;

    if (!root || root[0] != '/') {
        errno = EINVAL;
        return tier_errprintf (error, "SharedStateDir is not set");
    }
    if ((fd = root_subdir (AT_FDCWD, root, root, 0755, error)) < 0)
        return -1;
    (void) snprintf (shown, sizeof (shown), "%s/users", root);
    if ((sub = root_subdir (fd, "users", shown, 0755, error)) < 0)
        goto error;
    close (sub);
    (void) snprintf (shown, sizeof (shown), "%s/stats", root);
    if ((sub = root_subdir (fd, "stats", shown, 0755, error)) < 0)
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
    struct stat st;
    int users, fd;
    int made = 0;

    if (!tier_state_name_valid (user)) {
        errno = EINVAL;
        return tier_errprintf (error, "'%.64s' is not a usable user name",
                               user ? user : "");
    }
    if ((users = openat (rootfd, "users", O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                         | O_CLOEXEC)) < 0)
        return tier_errprintf (error, "users: %s", strerror (errno));
    if (mkdirat (users, user, 0700) == 0)
        made = 1;
    else if (errno != EEXIST) {
        tier_errprintf (error, "users/%s: %s", user, strerror (errno));
        close (users);
        return -1;
    }
    fd = openat (users, user, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                 | O_CLOEXEC);
    close (users);
    if (fd < 0)
        return tier_errprintf (error, "users/%s: %s", user,
                               errno == ELOOP || errno == ENOTDIR
                               ? "not a directory (a symlink?): refused"
                               : strerror (errno));
    if (made && (fchown (fd, uid, gid) < 0 || fchmod (fd, 0700) < 0)) {
        /* e.g. a root-squashed GFS: the admin must make it */
        tier_errprintf (error, "users/%s: cannot give it to uid %u: %s "
                        "(create it owned by the user, mode 0700)", user,
                        (unsigned) uid, strerror (errno));
        close (fd);
        return -1;
    }
    if (fstat (fd, &st) < 0 || st.st_uid != uid || (st.st_mode & 077)) {
        close (fd);
        errno = EPERM;
        return tier_errprintf (error, "users/%s: must be owned by uid %u "
                               "with mode 0700; refused (made by someone "
                               "else?)", user, (unsigned) uid);
    }
    return fd;
}

int tier_state_publish (const char *root, const char *user, uid_t uid,
                        const char *dir, const char *sub, const char *name,
                        const char *text)
{
    const char *comps[] = { "users", user, dir, sub, NULL };
    char tmp[NAME_MAX + 1];
    size_t len = strlen (text);
    struct stat st;
    int d, fd, e;

    if (!tier_state_name_valid (user) || !tier_state_name_valid (dir)
        || !tier_state_name_valid (sub) || !tier_state_name_valid (name)
        || strlen (name) > NAME_MAX - 24) {
        errno = EINVAL;
        return -1;
    }
    if ((d = open (root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return -1;
    for (int i = 0; comps[i]; i++) {
        int nd;
        if (i >= 2 && mkdirat (d, comps[i], 0700) < 0 && errno != EEXIST)
            goto fail;
        if ((nd = openat (d, comps[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                          | O_CLOEXEC)) < 0)
            goto fail;
        close (d);
        d = nd;
        /* the user's own directory, and everything below it */
        if (i >= 1 && (fstat (d, &st) < 0 || st.st_uid != uid)) {
            errno = EPERM;
            goto fail;
        }
    }
    (void) snprintf (tmp, sizeof (tmp), ".%s.%d", name, (int) getpid ());
    if ((fd = openat (d, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
                      | O_CLOEXEC, 0600)) < 0)
        goto fail;
    if (write (fd, text, len) != (ssize_t) len || fsync (fd) < 0) {
        e = errno;
        close (fd);
        (void) unlinkat (d, tmp, 0);
        errno = e;
        goto fail;
    }
    close (fd);
    if (renameat (d, tmp, d, name) < 0) {
        e = errno;
        (void) unlinkat (d, tmp, 0);
        errno = e;
        goto fail;
    }
    close (d);
    return 0;
fail:
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
