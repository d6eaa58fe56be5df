/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate_outbox.c - stage-out: the outboxes on NvdimmDir
 *
 * NvdimmDir/.outbox/JOB.RESTART/ holds a job's write caches (K/upper,
 * the uppers of its output overlays) and dirs.json, the GFS directory
 * (and URL) of each: what a restarted agent needs to resume the job's
 * migrations.  An outbox is removed only once every regular file in it
 * has a record of reaching the GFS at its size (or of a conflict), which
 * the agent checks for itself, as root, read-only.
 *
 * Owns the outboxes' layout; calls the records (migrate_rec.c) and the
 * store for the jobs of outboxes found at start.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/jobns.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/trust.h"
#include "migrate.h"

/* An outbox being removed: JOB.RESTART renamed first. */
#define GONE_PREFIX ".gone-"

/* NvdimmDir, and rel beneath it: directories only root may enter
 * (lib/trust.h's ROOT_DIR, nothing for group or others), as the plugin
 * makes them (spank_plugin/ns.c's mount_outbox). */
static int outbox_dir (const struct tier_conf *conf, const char *rel,
                       tier_error_t *error)
{
    static const struct tier_trust rule = { .kind = TIER_TRUST_ROOT_DIR,
                                            .deny = 077 };
    int rootfd, fd;

    if ((rootfd = tier_trust_open (conf->nvdimm_dir, &rule, error)) < 0
        || !rel[0])
        return rootfd;
    fd = tier_trust_openat (rootfd, conf->nvdimm_dir, rel, &rule, error);
    {
        int e = errno;
        close (rootfd);
        errno = e;
    }
    return fd;
}

int migrate_outbox_open (const struct tier_conf *conf, uint32_t job_id,
                         uint32_t restart, int k)
{
    char rel[64];
    tier_error_t e;
    int fd, upfd;

    if (k < 0)
        (void) snprintf (rel, sizeof (rel), ".outbox/%u.%u", job_id, restart);
    else
        (void) snprintf (rel, sizeof (rel), ".outbox/%u.%u/%d", job_id, restart,
                         k);
    if ((fd = outbox_dir (conf, rel, &e)) < 0 || k < 0)
        return fd;
    /* the upper: the job's, as its output directory is */
    upfd = openat (fd, "upper",
                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    {
        int e2 = errno;
        close (fd);
        errno = e2;
    }
    return upfd;
}

/* ---------------------------------------------------------- dirs.json */

static int parse_urls (json_t *urls, struct migrate_spec *s,
                       tier_error_t *error)
{
    size_t i;
    json_t *v;

    json_array_foreach (urls, i, v)
    {
        const char *u = json_string_value (v);
        struct tier_url *url = NULL;
        tier_error_t e;
        if (!u || strlen (u) > TIER_URL_MAX) {
            errno = EINVAL;
            return tier_errprintf (error, "'urls' must hold strings");
        }
        /* checked again here: the plugin's check can be bypassed */
        if (*u && !(url = tier_url_parse_output (u, &e)))
            return tier_errprintf (error, "--tier-stage-out: %s", e.text);
        tier_url_destroy (url);
        if (i < MIGRATE_DIRS_MAX)
            (void) snprintf (s->url[i], sizeof (s->url[i]), "%s", u);
    }
    return 0;
}

/* dirs[K] and urls[K] (optional, "" for the GFS) of a request or of an
 * outbox's dirs.json (an object {dirs, urls}, or the array of dirs that
 * outboxes held before object stores). */
int migrate_outbox_parse_dirs (json_t *dirs, json_t *urls,
                               struct migrate_spec *s, tier_error_t *error)
{
    size_t i;
    json_t *v;

    if (json_is_object (dirs)) {
        s->late = json_is_true (json_object_get (dirs, "late"));
        urls = json_object_get (dirs, "urls");
        dirs = json_object_get (dirs, "dirs");
    }
    if (urls
        && (!json_is_array (urls)
            || json_array_size (urls) != json_array_size (dirs))) {
        errno = EINVAL;
        return tier_errprintf (error, "'urls' must have one URL (or \"\") "
                                      "per directory");
    }
    if (urls && parse_urls (urls, s, error) < 0)
        return -1;
    if (!json_is_array (dirs) || json_array_size (dirs) == 0
        || json_array_size (dirs) > MIGRATE_DIRS_MAX) {
        errno = EINVAL;
        return tier_errprintf (error, "'dirs' must list 1..%d directories",
                               MIGRATE_DIRS_MAX);
    }
    json_array_foreach (dirs, i, v)
    {
        const char *d = json_string_value (v);
        char norm[PATH_MAX];
        if (!d || d[0] != '/'
            || tier_path_normalize (d, norm, sizeof (norm)) < 0
            || strcmp (norm, d)) {
            errno = EINVAL;
            return tier_errprintf (error, "'dirs' must hold normalised "
                                          "absolute paths");
        }
        (void) snprintf (s->gfs[i], sizeof (s->gfs[i]), "%s", d);
    }
    s->ndirs = (int) json_array_size (dirs);
    return 0;
}

int migrate_outbox_write_dirs (struct agent *a, const struct mig *g)
{
    static const char tmp[] = "dirs.json.tmp";
    json_t *arr = json_array (), *urls = json_array (), *o = NULL;
    char *text = NULL;
    int rc = -1, dfd = -1, fd = -1;

    for (int k = 0; arr && urls && k < g->spec.ndirs; k++) {
        json_array_append_new (arr, json_string (g->spec.gfs[k]));
        json_array_append_new (urls, json_string (g->spec.url[k]));
    }
    if (!arr || !urls
        || !(o = json_pack ("{s:O s:O s:b}", "dirs", arr, "urls", urls, "late",
                            g->spec.late))
        || !(text = json_dumps (o, JSON_COMPACT)))
        goto out;
    /* temp + rename: a restarted agent reads it whole or not at all */
    if ((dfd = migrate_outbox_open (a->conf, g->job_id, g->restart, -1)) < 0
        || (fd = openat (dfd, tmp,
                         O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                         0600))
               < 0)
        goto out;
    if (write (fd, text, strlen (text)) != (ssize_t) strlen (text)
        || fsync (fd) < 0 || renameat (dfd, tmp, dfd, "dirs.json") < 0)
        (void) unlinkat (dfd, tmp, 0);
    else
        rc = 0;
out:
    if (fd >= 0)
        close (fd);
    if (dfd >= 0)
        close (dfd);
    free (text);
    json_decref (o);
    json_decref (arr);
    json_decref (urls);
    return rc;
}

/* ------------------------------------------------------------ removal */

struct verify_ctx {
    struct agent *a;
    const struct mig *g;
    int k;
    int missing;
    int first_k;
    char first[PATH_MAX];
    long budget; /* entries still to look at; < 0: all */
};

static void verify_walk (struct verify_ctx *vc, int dfd, const char *rel,
                         int depth)
{
    char sub[PATH_MAX];
    struct dirent *de;
    DIR *d;

    if (!(d = migrate_dir_open (dfd, depth))) {
        vc->missing++; /* cannot tell: keep it */
        return;
    }
    while ((de = migrate_dir_next (d, rel, sub, sizeof (sub)))) {
        struct stat st;
        if (vc->budget == 0) {
            vc->missing += !vc->missing; /* not all seen: not all there */
            break;
        }
        if (vc->budget > 0)
            vc->budget--;
        if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISDIR (st.st_mode)) {
            int sfd = openat (dirfd (d), de->d_name,
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sfd >= 0) {
                verify_walk (vc, sfd, sub, depth + 1);
                close (sfd);
            }
        }
        else if (S_ISREG (st.st_mode)
                 && !migrate_rec_arrived (vc->a, vc->g, vc->k, sub,
                                          st.st_size)) {
            if (!vc->missing++) {
                vc->first_k = vc->k;
                (void) snprintf (vc->first, sizeof (vc->first), "%s", sub);
            }
        }
    }
    closedir (d);
}

int migrate_outbox_missing (struct agent *a, const struct mig *g, char *first,
                            size_t size, long max_entries)
{
    struct verify_ctx vc = { .a = a, .g = g, .budget = max_entries };

    for (int k = 0; k < g->spec.ndirs; k++) {
        int fd;
        if ((fd = migrate_outbox_open (a->conf, g->job_id, g->restart, k)) < 0)
            continue;
        vc.k = k;
        verify_walk (&vc, fd, "", 0);
        close (fd);
    }
    if (vc.first[0])
        (void) snprintf (first, size, "%s/%s", g->spec.gfs[vc.first_k],
                         vc.first);
    else
        (void) snprintf (first, size, "%s", "");
    return vc.missing;
}

/* Is name in boxfd a mount of its own (the job's write cache as a
 * file system of its size: spank_plugin/ns.c's outbox_fs)?  Then it is
 * unmounted, which takes its files at once, and its empty directory
 * removed: true.  A crash in between leaves an empty directory, which
 * the next agent removes (outbox_found). */
static bool outbox_unmount (struct agent *a, int boxfd, const char *name)
{
    char path[PATH_MAX];
    struct stat box, st;

    if (fstat (boxfd, &box) < 0
        || fstatat (boxfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0
        || st.st_dev == box.st_dev)
        return false;
    /* NvdimmDir and .outbox are root's (outbox_dir): the path is */
    if (snprintf (path, sizeof (path), "%s/.outbox/%s", a->conf->nvdimm_dir,
                  name)
            >= (int) sizeof (path)
        || umount2 (path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
        tier_log (LOG_WARNING, "outbox %s: umount: %s", path, strerror (errno));
        return true;
    }
    if (unlinkat (boxfd, name, AT_REMOVEDIR) < 0)
        tier_log (LOG_WARNING, "outbox %s: %s", path, strerror (errno));
    return true;
}

void migrate_outbox_remove (struct agent *a, const struct mig *g)
{
    char name[64], gone[80];
    tier_error_t e;
    int fd;

    (void) snprintf (name, sizeof (name), "%u.%u", g->job_id, g->restart);
    (void) snprintf (gone, sizeof (gone), GONE_PREFIX "%u.%u", g->job_id,
                     g->restart);
    if ((fd = outbox_dir (a->conf, ".outbox", &e)) >= 0
        && outbox_unmount (a, fd, name)) {
        close (fd);
        return;
    }
    if (fd >= 0) {
        /* out of the way at once, then removed: a crash in between
         * leaves a name the next agent removes (never a half outbox
         * without its dirs.json) */
        if (renameat (fd, name, fd, gone) < 0)
            tier_log (LOG_WARNING, "job %u: outbox: rename: %s", g->job_id,
                      strerror (errno));
        else if (tier_rmtree_at (fd, gone, &e) < 0)
            tier_log (LOG_WARNING, "job %u: outbox: %s", g->job_id, e.text);
        close (fd);
    }
}

/* ------------------------------------------------------------ at start */

/* "JOB.RESTART", two decimal numbers and nothing else. */
static int parse_name (const char *name, uint32_t *job_id, uint32_t *restart)
{
    unsigned long v[2];
    const char *p = name;

    for (int i = 0; i < 2; i++) {
        char *end;
        if (*p < '0' || *p > '9')
            return -1;
        errno = 0;
        v[i] = strtoul (p, &end, 10);
        if (errno || v[i] > UINT32_MAX || *end != (i ? '\0' : '.'))
            return -1;
        p = end + 1;
    }
    *job_id = (uint32_t) v[0];
    *restart = (uint32_t) v[1];
    return 0;
}

/* dirs.json of the outbox name beneath boxfd, or NULL. */
static json_t *load_dirs (int boxfd, const char *shown, const char *name)
{
    static const struct tier_trust rule = { .kind = TIER_TRUST_ROOT_DIR,
                                            .deny = 077 };
    json_error_t jerr;
    json_t *dirs = NULL;
    tier_error_t e;
    int jfd, fd;

    if ((jfd = tier_trust_openat (boxfd, shown, name, &rule, &e)) < 0)
        return NULL;
    if ((fd = openat (jfd, "dirs.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC))
        >= 0) {
        dirs = json_loadfd (fd, 0, &jerr);
        close (fd);
    }
    close (jfd);
    return dirs;
}

static void outbox_found (struct agent *a, int boxfd, const char *dir,
                          const char *name, migrate_outbox_f fn)
{
    struct migrate_spec s;
    struct store_job job;
    uint32_t id, rst;
    tier_error_t e;
    json_t *dirs;

    if (parse_name (name, &id, &rst) < 0)
        return;
    /* what a crash left between unmounting an outbox and removing its
     * directory (outbox_unmount) */
    if (unlinkat (boxfd, name, AT_REMOVEDIR) == 0) {
        tier_log (LOG_INFO, "outbox %s/%s: empty, removed", dir, name);
        return;
    }
    memset (&s, 0, sizeof (s));
    if (store_job_get (a->store, id, rst, &job, &e) < 0
        || !(dirs = load_dirs (boxfd, dir, name))) {
        tier_log (LOG_WARNING,
                  "outbox %s/%s: no job record or no "
                  "directories: left for the administrator",
                  dir, name);
        return;
    }
    if (migrate_outbox_parse_dirs (dirs, NULL, &s, &e) == 0)
        fn (a, &job, &s);
    json_decref (dirs);
}

void migrate_outbox_foreach (struct agent *a, migrate_outbox_f fn)
{
    char path[PATH_MAX];
    struct dirent *de;
    tier_error_t e;
    int boxfd, fd;
    DIR *d;

    (void) snprintf (path, sizeof (path), "%.2048s/.outbox",
                     a->conf->nvdimm_dir);
    if ((boxfd = outbox_dir (a->conf, ".outbox", &e)) < 0)
        return;
    if ((fd = dup (boxfd)) < 0 || !(d = fdopendir (fd))) {
        if (fd >= 0)
            close (fd);
        close (boxfd);
        return;
    }
    while ((de = readdir (d))) {
        if (!strncmp (de->d_name, GONE_PREFIX, strlen (GONE_PREFIX))) {
            /* a removal that a crash cut short */
            if (tier_rmtree_at (boxfd, de->d_name, &e) < 0)
                tier_log (LOG_WARNING, "outbox %s/%s: %s", path, de->d_name,
                          e.text);
            continue;
        }
        outbox_found (a, boxfd, path, de->d_name, fn);
    }
    closedir (d);
    close (boxfd);
}
