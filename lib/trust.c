/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* trust.c - opening what root relies on; the rules are in trust.h */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"
#include "trust.h"

#define WRITE_OTHERS (S_IWGRP | S_IWOTH)

bool tier_trust_safe_parent (const struct stat *st)
{
    return S_ISDIR (st->st_mode) && st->st_uid == 0
           && (!(st->st_mode & WRITE_OTHERS) || (st->st_mode & S_ISVTX));
}

static bool is_dir_kind (const struct tier_trust *t)
{
    return t->kind == TIER_TRUST_ROOT_DIR
           || (t->kind == TIER_TRUST_USER_PRIVATE && (t->flags & O_DIRECTORY));
}

/* EPERM: the rule why is broken (text says how) */
static int refuse (const struct tier_trust *t, enum tier_trust_why why,
                   tier_error_t *error, const char *shown, const char *text)
{
    if (t->why)
        *t->why = why;
    errno = EPERM;
    return tier_errprintf (error, "%s: %s (refused)", shown, text);
}

static void why_clear (const struct tier_trust *t)
{
    if (t->why)
        *t->why = 0;
}

int tier_trust_check (int fd, const char *shown, const struct tier_trust *t,
                      tier_error_t *error)
{
    struct stat st;
    bool dir = is_dir_kind (t);

    why_clear (t);
    if (fstat (fd, &st) < 0)
        return tier_errprintf (error, "%s: %s", shown, strerror (errno));
    if (S_ISLNK (st.st_mode))
        return refuse (t, TIER_TRUST_LINK, error, shown, "a symlink");
    if (dir ? !S_ISDIR (st.st_mode) : !S_ISREG (st.st_mode))
        return refuse (t, TIER_TRUST_TYPE, error, shown,
                       dir ? "not a directory" : "not a regular file");
    switch (t->kind) {
        case TIER_TRUST_ROOT_DIR:
        case TIER_TRUST_ROOT_FILE:
            if (st.st_uid != 0 && st.st_uid != t->uid)
                return refuse (t, TIER_TRUST_OWNER, error, shown,
                               t->uid ? "not owned by root or SlurmUser"
                                      : "not owned by root");
            if (st.st_mode & WRITE_OTHERS)
                return refuse (t, TIER_TRUST_MODE, error, shown,
                               "writable by group or others");
            break;
        case TIER_TRUST_USER_PRIVATE:
            if (st.st_uid != t->uid) {
                char why[64];
                (void) snprintf (why, sizeof (why), "owned by uid %u, not %u",
                                 (unsigned) st.st_uid, (unsigned) t->uid);
                return refuse (t, TIER_TRUST_OWNER, error, shown, why);
            }
            if (st.st_mode & 077)
                return refuse (t, TIER_TRUST_MODE, error, shown,
                               "open to group or others (must be 0700 or "
                               "0600)");
            break;
        default:
            errno = EINVAL;
            return tier_errprintf (error, "%s: no such trust rule", shown);
    }
    if (st.st_mode & t->deny) {
        char why[64];
        (void) snprintf (why, sizeof (why), "mode %04o has bits of %04o",
                         (unsigned) (st.st_mode & 07777), (unsigned) t->deny);
        return refuse (t, TIER_TRUST_MODE, error, shown, why);
    }
    return 0;
}

/* The rule an intermediate directory beneath a trusted descriptor must
 * pass: ROOT_DIR's for the root kinds; for a user's, owned by the user
 * and not writable by others. */
static int check_middle (int fd, const char *shown,
                         const struct tier_trust *t, tier_error_t *error)
{
    struct stat st;

    if (t->kind != TIER_TRUST_USER_PRIVATE) {
        struct tier_trust d = { .kind = TIER_TRUST_ROOT_DIR, .uid = t->uid };
        if (tier_trust_check (fd, shown, &d, error) < 0) {
            if (errno == EPERM && t->why)
                *t->why = TIER_TRUST_PARENT;
            return -1;
        }
        return 0;
    }
    if (fstat (fd, &st) < 0)
        return tier_errprintf (error, "%s: %s", shown, strerror (errno));
    if (!S_ISDIR (st.st_mode) || st.st_uid != t->uid
        || (st.st_mode & WRITE_OTHERS))
        return refuse (t, TIER_TRUST_PARENT, error, shown,
                       "not a directory of the user's own that others "
                       "cannot write");
    return 0;
}

static int open_error (const struct tier_trust *t, tier_error_t *error,
                       const char *shown, int e)
{
    if (e == ELOOP || e == ENOTDIR)
        return refuse (t, TIER_TRUST_LINK, error, shown,
                       "a symlink or not a directory");
    errno = e;
    return tier_errprintf (error, "%s: %s", shown, strerror (e));
}

/* Open the directory name beneath dfd (not the last component),
 * creating it if allowed. */
static int open_middle (int dfd, const char *name, const char *shown,
                        const struct tier_trust *t, tier_error_t *error)
{
    bool user = t->kind == TIER_TRUST_USER_PRIVATE;
    bool made = false;
    int fd;

    if (t->parents) {
        if (mkdirat (dfd, name, user ? 0700 : 0755) == 0)
            made = true;
        else if (errno != EEXIST)
            return tier_errprintf (error, "%s: mkdir: %s", shown,
                                   strerror (errno));
    }
    fd = openat (dfd, name, (made ? O_RDONLY : O_PATH) | O_DIRECTORY
                 | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return open_error (t, error, shown, errno);
    if (made && user && geteuid () == 0 && fchown (fd, t->uid, t->gid) < 0) {
        tier_errprintf (error, "%s: chown to uid %u: %s", shown,
                        (unsigned) t->uid, strerror (errno));
        close (fd);
        return -1;
    }
    return fd;
}

/* Open (or make) the last component name beneath dfd. */
static int open_last (int dfd, const char *name, const char *shown,
                      const struct tier_trust *t, tier_error_t *error)
{
    bool dir = is_dir_kind (t);
    bool made = false;
    int flags = t->flags | O_NOFOLLOW | O_CLOEXEC;
    int fd, e;

    if (dir) {
        if (t->create) {
            if (mkdirat (dfd, name, t->create) == 0)
                made = true;
            else if (errno != EEXIST)
                return tier_errprintf (error, "%s: mkdir: %s", shown,
                                       strerror (errno));
        }
        if (made)
            flags &= ~O_PATH;           /* fchmod and fchown need it */
        flags |= O_DIRECTORY;
    }
    else {
        if (t->create && !(flags & O_PATH)) {
            flags |= O_CREAT;
            if (!(flags & O_ACCMODE))
                flags |= O_RDWR;        /* O_CREAT needs write access */
        }
        if (!(flags & O_PATH))
            flags |= O_NOCTTY | O_NONBLOCK;     /* never hang on a FIFO */
    }
    if ((fd = openat (dfd, name, flags, t->create)) < 0)
        return open_error (t, error, shown, errno);
    if (!dir && !(t->flags & O_NONBLOCK) && !(flags & O_PATH))
        (void) fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
    if (made) {
        /* mkdir's mode went through the umask */
        if ((t->kind == TIER_TRUST_USER_PRIVATE && geteuid () == 0
             && fchown (fd, t->uid, t->gid) < 0)
            || fchmod (fd, t->create) < 0) {
            e = errno;
            tier_errprintf (error, "%s: cannot give it its owner and mode: "
                            "%s", shown, strerror (e));
            close (fd);
            errno = e;
            return -1;
        }
    }
    if (tier_trust_check (fd, shown, t, error) < 0) {
        e = errno;
        close (fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Walk rel beneath dfd (which the caller trusts and keeps): every
 * component but the last through open_middle, checked by check_root
 * (absolute walks) or by the kind's own middle rule. */
static int walk (int dfd, char *rel, char *shown, size_t shownsize,
                 size_t shownlen, bool absolute, const struct tier_trust *t,
                 tier_error_t *error)
{
    char *name = rel, *next;
    int cur = dfd, fd;

    for (;;) {
        while (*name == '/')
            name++;
        if ((next = strchr (name, '/'))) {
            *next++ = '\0';
            while (*next == '/')
                next++;
            if (!*next)
                next = NULL;
        }
        if (!strcmp (name, ".") || !strcmp (name, "..") || !*name) {
            if (cur != dfd)
                close (cur);
            errno = EINVAL;
            return tier_errprintf (error, "%s: a path without '.' or '..' "
                                   "components is needed", shown);
        }
        (void) snprintf (shown + shownlen, shownsize - shownlen, "%s%s",
                         shownlen && shown[shownlen - 1] == '/' ? "" : "/",
                         name);
        shownlen = strlen (shown);
        if (absolute) {
            /* the directory this name is in */
            struct stat st;
            if (fstat (cur, &st) < 0 || !tier_trust_safe_parent (&st)) {
                if (cur != dfd)
                    close (cur);
                return refuse (t, TIER_TRUST_PARENT, error, shown,
                               "a directory above it is not root's, or "
                               "others may rename entries in it");
            }
        }
        fd = next ? open_middle (cur, name, shown, t, error)
                  : open_last (cur, name, shown, t, error);
        if (cur != dfd)
            close (cur);
        if (fd < 0)
            return -1;
        if (!next)
            return fd;
        if (!absolute && check_middle (fd, shown, t, error) < 0) {
            close (fd);
            return -1;
        }
        cur = fd;
        name = next;
    }
}

int tier_trust_open (const char *path, const struct tier_trust *t,
                     tier_error_t *error)
{
    char rel[PATH_MAX], shown[PATH_MAX + 1] = "";
    int root, fd;

    why_clear (t);
    if (!path || path[0] != '/' || tier_path_has_dotdot (path)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: not an absolute path without "
                               "'..'", path ? path : "(none)");
    }
    if (snprintf (rel, sizeof (rel), "%s", path + 1) >= (int) sizeof (rel)) {
        errno = ENAMETOOLONG;
        return tier_errprintf (error, "%.200s...: path too long", path);
    }
    for (size_t n = strlen (rel); n > 0 && rel[n - 1] == '/'; n--)
        rel[n - 1] = '\0';
    if (!rel[0]) {
        /* "/" itself */
        struct tier_trust d = *t;
        if ((root = open ("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            return tier_errprintf (error, "/: %s", strerror (errno));
        if (tier_trust_check (root, "/", &d, error) < 0) {
            int e = errno;
            close (root);
            errno = e;
            return -1;
        }
        return root;
    }
    if ((root = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return tier_errprintf (error, "/: %s", strerror (errno));
    fd = walk (root, rel, shown, sizeof (shown), 0, true, t, error);
    {
        int e = errno;
        close (root);
        errno = e;
    }
    return fd;
}

int tier_trust_openat (int dirfd, const char *shown, const char *rel,
                       const struct tier_trust *t, tier_error_t *error)
{
    char buf[PATH_MAX], where[PATH_MAX + 1];

    why_clear (t);
    if (!rel || !rel[0] || rel[0] == '/'
        || snprintf (buf, sizeof (buf), "%s", rel) >= (int) sizeof (buf)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: '%.200s' is not a relative path",
                               shown ? shown : "", rel ? rel : "");
    }
    (void) snprintf (where, sizeof (where), "%s", shown ? shown : "");
    return walk (dirfd, buf, where, sizeof (where), strlen (where), false, t,
                 error);
}
