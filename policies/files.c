/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* files.c - policy files on disk (see files.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/state.h"
#include "lib/trust.h"
#include "files.h"

static void report_f (tier_policy_report_f report, void *arg,
                      const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void report_f (tier_policy_report_f report, void *arg,
                      const char *fmt, ...)
{
    tier_error_t e;
    va_list ap;

    if (!report)
        return;
    va_start (ap, fmt);
    (void) tier_verrprintf (&e, fmt, ap);
    va_end (ap);
    report (arg, e.text);
}

static int read_fd (int fd, const char *name, char **text, size_t *lenp,
                    tier_error_t *error)
{
    struct stat st;
    char *buf;
    size_t len = 0;

    if (fstat (fd, &st) < 0)
        return tier_errprintf (error, "%s: %s", name, strerror (errno));
    if (!S_ISREG (st.st_mode)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: not a regular file", name);
    }
    if (st.st_size > TIER_POLICY_TEXT_MAX) {
        errno = EFBIG;
        return tier_errprintf (error, "%s: larger than %d bytes", name,
                               TIER_POLICY_TEXT_MAX);
    }
    if (!(buf = malloc ((size_t) st.st_size + 1))) {
        errno = ENOMEM;
        return tier_errprintf (error, "%s: out of memory", name);
    }
    while (len < (size_t) st.st_size) {
        ssize_t n = read (fd, buf + len, (size_t) st.st_size - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free (buf);
            errno = e;
            return tier_errprintf (error, "%s: %s", name, strerror (e));
        }
        if (n == 0)
            break;
        len += (size_t) n;
    }
    buf[len] = '\0';
    *text = buf;
    if (lenp)
        *lenp = len;
    return 0;
}

int tier_policy_read_at (int dirfd, const char *name, char **text,
                         size_t *len, tier_error_t *error)
{
    int fd, rc, e;

    if ((fd = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY
                      | O_NONBLOCK | O_CLOEXEC)) < 0)
        return tier_errprintf (error, "%s: %s", name,
                               errno == ELOOP ? "a symlink: refused"
                                              : strerror (errno));
    rc = read_fd (fd, name, text, len, error);
    e = errno;
    close (fd);
    errno = e;
    return rc;
}

static int cmp_names (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

static void load_one (struct tier_policy_set *set, int dfd, const char *dir,
                      const char *name, int *skipped,
                      tier_policy_report_f report, void *arg)
{
    const struct tier_trust rule = { .kind = TIER_TRUST_ROOT_FILE };
    char path[4200];
    tier_error_t e;
    struct stat st;
    char *text = NULL;
    size_t len = 0;
    int fd;

    (void) snprintf (path, sizeof (path), "%s/%s", dir, name);
    if ((fd = openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY
                      | O_NONBLOCK | O_CLOEXEC)) < 0) {
        report_f (report, arg, "%s: %s; skipped", path,
                  errno == ELOOP ? "a symlink" : strerror (errno));
        (*skipped)++;
        return;
    }
    if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)) {
        report_f (report, arg, "%s: not a regular file; skipped", path);
        goto skip;
    }
    if (tier_trust_check (fd, path, &rule, &e) < 0) {
        report_f (report, arg, "%s: must be owned by root and writable by "
                  "root only; skipped", path);
        goto skip;
    }
    if (read_fd (fd, path, &text, &len, &e) < 0) {
        report_f (report, arg, "%s; skipped", e.text);
        goto skip;
    }
    if (tier_policy_parse (set, text, len, TIER_LAYER_SITE, path, &e) < 0) {
        report_f (report, arg, "%s; the file is skipped", e.text);
        goto skip;
    }
    free (text);
    close (fd);
    return;
skip:
    free (text);
    close (fd);
    (*skipped)++;
}

int tier_policy_load_site (struct tier_policy_set *set, const char *dir,
                           tier_policy_report_f report, void *arg)
{
    /* root's, and so is every directory above it */
    const struct tier_trust rule = { .kind = TIER_TRUST_ROOT_DIR };
    struct dirent *de;
    char **names = NULL;
    int n = 0, cap = 0, skipped = 0, dfd;
    tier_error_t e;
    DIR *d;

    if (!dir || !dir[0])
        return 0;
    if ((dfd = tier_trust_open (dir, &rule, &e)) < 0) {
        if (errno == ENOENT)
            return 0;
        report_f (report, arg, "%s; no site policies", e.text);
        return 1;
    }
    if (!(d = fdopendir (dfd))) {
        report_f (report, arg, "%s: %s", dir, strerror (errno));
        close (dfd);
        return 1;
    }
    while ((de = readdir (d))) {
        size_t len = strlen (de->d_name);
        if (de->d_name[0] == '.' || len < 6
            || strcmp (de->d_name + len - 5, ".json"))
            continue;
        if (n == cap) {
            char **nn = realloc (names, (cap ? cap * 2 : 16)
                                 * sizeof (*names));
            if (!nn)
                break;
            names = nn;
            cap = cap ? cap * 2 : 16;
        }
        if (!(names[n] = strdup (de->d_name)))
            break;
        n++;
        if (n >= 1024)
            break;
    }
    if (n)
        qsort (names, n, sizeof (*names), cmp_names);
    for (int i = 0; i < n; i++) {
        load_one (set, dirfd (d), dir, names[i], &skipped, report, arg);
        free (names[i]);
    }
    free (names);
    closedir (d);
    return skipped;
}

int tier_policy_write_at (int dirfd, const char *name, const char *text,
                          mode_t mode, bool noreplace, tier_error_t *error)
{
    char tmp[256];
    size_t len = strlen (text), off = 0;
    struct timespec ts;
    int fd = -1, e;

    for (int i = 0; i < 100 && fd < 0; i++) {
        clock_gettime (CLOCK_REALTIME, &ts);
        (void) snprintf (tmp, sizeof (tmp), ".%.64s.%d.%ld.%d", name,
                         (int) getpid (), (long) ts.tv_nsec, i);
        fd = openat (dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
                     | O_CLOEXEC, mode);
        if (fd < 0 && errno != EEXIST)
            return tier_errprintf (error, "%s: %s", name, strerror (errno));
    }
    if (fd < 0)
        return tier_errprintf (error, "%s: no unique temporary", name);
    if (fchmod (fd, mode) < 0)
        goto error;
    while (off < len) {
        ssize_t n = write (fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto error;
        off += (size_t) n;
    }
    if (fsync (fd) < 0)
        goto error;
    if (close (fd) < 0) {
        fd = -1;
        goto error;
    }
    fd = -1;
    if (noreplace) {
        if (linkat (dirfd, tmp, dirfd, name, 0) < 0) {
            e = errno;
            (void) unlinkat (dirfd, tmp, 0);
            errno = e;
            if (e == EEXIST)
                return -1;              /* someone else's came first */
            return tier_errprintf (error, "%s: %s", name, strerror (e));
        }
        (void) unlinkat (dirfd, tmp, 0);
    }
    else if (renameat (dirfd, tmp, dirfd, name) < 0)
        goto error;
    (void) fsync (dirfd);
    return 0;
error:
    e = errno;
    if (fd >= 0)
        close (fd);
    (void) unlinkat (dirfd, tmp, 0);
    errno = e;
    return tier_errprintf (error, "%s: %s", name, strerror (e));
}

int tier_policy_subdir (int dirfd, const char *name, bool create,
                        tier_error_t *error)
{
    int fd;

    if (create && mkdirat (dirfd, name, 0700) < 0 && errno != EEXIST)
        return tier_errprintf (error, "%s: %s", name, strerror (errno));
    if ((fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                      | O_CLOEXEC)) < 0)
        return tier_errprintf (error, "%s: %s", name,
                               errno == ELOOP || errno == ENOTDIR
                               ? "not a directory (a symlink?)"
                               : strerror (errno));
    return fd;
}

int tier_policy_user_dir (const char *root, const char *user, uid_t uid,
                          tier_error_t *error)
{
    if (!root || root[0] != '/') {
        errno = EINVAL;
        return tier_errprintf (error, "SharedStateDir is not set");
    }
    return tier_state_user_open (root, user, uid, NULL, false, error);
}

void tier_policy_roots_from_conf (const struct tier_conf *conf,
                                  const char *user,
                                  struct tier_policy_conf_roots *rb)
{
    int n = 0;

    if (tier_conf_expand_user (conf->bb_dir, user, rb->bb,
                               sizeof (rb->bb)) < 0)
        (void) snprintf (rb->bb, sizeof (rb->bb), "%s", conf->bb_dir);
    rb->own[n++] = conf->nvdimm_dir;
    rb->own[n++] = rb->bb;
    rb->own[n++] = conf->namespace_dir;
    rb->own[n++] = conf->state_dir;
    rb->own[n++] = conf->socket_dir;
    rb->own[n++] = conf->shared_state_dir;
    rb->roots.allowed = (const char *const *) conf->allowed_roots;
    rb->roots.nallowed = conf->allowed_roots_count;
    rb->roots.own = rb->own;
    rb->roots.nown = n;
}
