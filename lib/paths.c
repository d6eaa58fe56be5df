/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* paths.c - lexical normalisation, prefix tests, opening beneath a root */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "units.h"
#include "paths.h"

int tier_path_normalize (const char *in, char *out, size_t size)
{
    size_t o = 0;
    const char *p = in;

    if (!in || in[0] != '/' || !out || size < 2) {
        errno = EINVAL;
        return -1;
    }
    out[o++] = '/';
    while (*p) {
        const char *start;
        size_t len;

        while (*p == '/')
            p++;
        if (!*p)
            break;
        start = p;
        while (*p && *p != '/')
            p++;
        len = p - start;
        if (len == 1 && start[0] == '.')
            continue;
        if (len == 2 && start[0] == '.' && start[1] == '.') {
            /* back up to the previous '/' (never above the root) */
            if (o > 1) {
                o--;                    /* the '/' after the component */
                while (o > 1 && out[o - 1] != '/')
                    o--;
            }
            continue;
        }
        if (o + len + 1 > size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy (out + o, start, len);
        o += len;
        out[o++] = '/';
    }
    if (o > 1)
        o--;                            /* no trailing slash */
    out[o] = '\0';
    return 0;
}

int tier_path_absolute (const char *path, const char *cwd, char *out,
                        size_t size)
{
    char buf[PATH_MAX * 2];

    if (!path || !*path) {
        errno = EINVAL;
        return -1;
    }
    if (path[0] == '/')
        return tier_path_normalize (path, out, size);
    if (!cwd || cwd[0] != '/') {
        errno = EINVAL;
        return -1;
    }
    if (snprintf (buf, sizeof (buf), "%s/%s", cwd, path) >= (int) sizeof (buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return tier_path_normalize (buf, out, size);
}

bool tier_path_has_dotdot (const char *path)
{
    const char *p = path;

    while (p && *p) {
        const char *start;

        while (*p == '/')
            p++;
        start = p;
        while (*p && *p != '/')
            p++;
        if (p - start == 2 && start[0] == '.' && start[1] == '.')
            return true;
    }
    return false;
}

const char *tier_path_strip (const char *path, const char *root)
{
    size_t n;

    if (!path || !root)
        return NULL;
    if (!strcmp (root, "/"))
        return path[0] == '/' ? path + 1 : NULL;
    n = strlen (root);
    if (strncmp (path, root, n) != 0)
        return NULL;
    if (path[n] == '\0')
        return path + n;
    if (path[n] == '/')
        return path + n + 1;
    return NULL;
}

bool tier_path_under (const char *path, const char *root)
{
    return tier_path_strip (path, root) != NULL;
}

static int open_beneath_walk (int rootfd, const char *rel, int flags,
                              int mode)
{
    char comp[NAME_MAX + 1];
    const char *p = rel;
    int dirfd;
    int depth = 0;

    /* A component walk with O_NOFOLLOW: refuses every symlink, and ".."
     * that would climb above the root (tracked as a depth count).
     */
    if ((dirfd = fcntl (rootfd, F_DUPFD_CLOEXEC, 0)) < 0)
        return -1;
    for (;;) {
        const char *start;
        size_t len;
        int last, fd;

        while (*p == '/')
            p++;
        start = p;
        while (*p && *p != '/')
            p++;
        len = p - start;
        while (*p == '/')
            p++;
        last = (*p == '\0');
        if (len == 0) {                 /* rel was "" or "/": the root */
            fd = openat (dirfd, ".", (flags & ~(O_CREAT | O_EXCL))
                         | O_CLOEXEC);
            close (dirfd);
            return fd;
        }
        if (len > NAME_MAX) {
            close (dirfd);
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy (comp, start, len);
        comp[len] = '\0';
        if (!strcmp (comp, "..")) {
            if (depth == 0) {
                close (dirfd);
                errno = EXDEV;
                return -1;
            }
            depth--;
        }
        else if (strcmp (comp, "."))
            depth++;
        if (last)
            fd = openat (dirfd, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
        else
            fd = openat (dirfd, comp,
                         O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close (dirfd);
        if (fd < 0)
            return -1;
        if (last)
            return fd;
        dirfd = fd;
    }
}

int tier_path_open_beneath (int rootfd, const char *rel, int flags,
                            int mode, int bflags)
{
#ifdef SYS_openat2
    struct open_how how = {
        .flags = (unsigned) flags | O_CLOEXEC,
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? (unsigned) mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    const char *r = rel;
    long fd;

    if (bflags & TIER_BENEATH_NO_SYMLINKS)
        how.resolve |= RESOLVE_NO_SYMLINKS;
    if (bflags & TIER_BENEATH_NO_XDEV)
        how.resolve |= RESOLVE_NO_XDEV;
    while (*r == '/')
        r++;
    if (*r == '\0')
        r = ".";
    /* EAGAIN: a rename or mount somewhere on the system raced with a
     * ".." (of a symlink's target, say) and the kernel could not tell
     * that it stayed beneath; it says to try again */
    for (int tries = 0; tries < 64; tries++) {
        fd = syscall (SYS_openat2, rootfd, r, &how, sizeof (how));
        if (fd >= 0 || errno != EAGAIN)
            break;
    }
    if (fd >= 0 || errno != ENOSYS)
        return (int) fd;
#endif
    if (bflags & TIER_BENEATH_NO_XDEV) {
        errno = ENOSYS; /* a walk would enter the mount to see it */
        return -1;
    }
    return open_beneath_walk (rootfd, rel, flags, mode);
}

const char *tier_list_next (const char *list, char *item, size_t size)
{
    const char *p = list;
    size_t len;

    if (!list || !*list || size == 0)
        return NULL;
    while (*p && *p != ',') {
        if (p[0] == '\\' && p[1])
            p++;
        p++;
    }
    len = (size_t) (p - list);
    if (len >= size)
        len = size - 1;                 /* callers check lengths first */
    memcpy (item, list, len);
    item[len] = '\0';
    return *p ? p + 1 : p;
}

int tier_list_escape (const char *in, char *out, size_t size)
{
    size_t o = 0;

    for (const char *p = in; *p; p++) {
        if (strchr ("\\,:", *p)) {
            if (o + 1 >= size)
                goto toolong;
            out[o++] = '\\';
        }
        if (o + 1 >= size)
            goto toolong;
        out[o++] = *p;
    }
    if (size == 0)
        goto toolong;
    out[o] = '\0';
    return 0;
toolong:
    errno = ENAMETOOLONG;
    return -1;
}

/* The last ':' of s[0..len) that no '\' escapes, or NULL. */
static const char *last_colon (const char *s, size_t len)
{
    const char *last = NULL;

    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\' && i + 1 < len)
            i++;
        else if (s[i] == ':')
            last = s + i;
    }
    return last;
}

int tier_item_split (const char *item, char *dir, size_t dirsize,
                     uint64_t *size, char *keep, size_t keepsize)
{
    static const char *whens[] = { "never", "on-failure", "always" };
    size_t len = strlen (item), o = 0;
    const char *c;
    uint64_t v = 0;

    *size = 0;
    if (keep && keepsize)
        keep[0] = '\0';
    if ((c = last_colon (item, len)) && !strncmp (c + 1, "keep=", 5)) {
        const char *w = c + 6;
        size_t wl = len - (size_t) (w - item), i;

        for (i = 0; i < sizeof (whens) / sizeof (whens[0]); i++)
            if (strlen (whens[i]) == wl && !strncmp (w, whens[i], wl))
                break;
        if (i == sizeof (whens) / sizeof (whens[0])) {
            errno = EINVAL;
            return -1;
        }
        if (keep && keepsize)
            (void) snprintf (keep, keepsize, "%s", whens[i]);
        len = (size_t) (c - item);
    }
    if ((c = last_colon (item, len)) && c + 1 < item + len) {
        char num[32];
        size_t n = len - (size_t) (c + 1 - item);
        if (n < sizeof (num)) {
            memcpy (num, c + 1, n);
            num[n] = '\0';
            if (tier_size_parse (num, &v) == 0) {
                if (v == 0) {
                    errno = ERANGE;
                    return -1;
                }
                len = (size_t) (c - item);
            }
            else if (errno == ERANGE) {
                errno = EOVERFLOW; /* a size, larger than any */
                return -1;
            }
        }
    }
    for (size_t i = 0; i < len; i++) {
        char ch = item[i];
        if (ch == '\\' && i + 1 < len && strchr ("\\,:", item[i + 1]))
            ch = item[++i];
        if (o + 1 >= dirsize) {
            errno = ENAMETOOLONG;
            return -1;
        }
        dir[o++] = ch;
    }
    if (dirsize == 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    dir[o] = '\0';
    *size = v;
    return 0;
}
