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
#include <sys/stat.h>
#include <unistd.h>

#include "lib/jobns.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "migrate.h"

int migrate_outbox_path (const struct tier_conf *conf, uint32_t job_id,
                         uint32_t restart, int k, char *buf, size_t size)
{
    int n;

    if (k < 0)
        n = snprintf (buf, size, "%s/.outbox/%u.%u", conf->nvdimm_dir, job_id,
                      restart);
    else
        n = snprintf (buf, size, "%s/.outbox/%u.%u/%d/upper", conf->nvdimm_dir,
                      job_id, restart, k);
    if (n < 0 || (size_t) n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
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
    char path[PATH_MAX + 16];
    json_t *arr = json_array (), *urls = json_array (), *o = NULL;
    int rc = -1;

    for (int k = 0; arr && urls && k < g->spec.ndirs; k++) {
        json_array_append_new (arr, json_string (g->spec.gfs[k]));
        json_array_append_new (urls, json_string (g->spec.url[k]));
    }
    if (migrate_outbox_path (a->conf, g->job_id, g->restart, -1, path,
                             sizeof (path) - 16)
            == 0
        && arr && urls) {
        strcat (path, "/dirs.json");
        o = json_pack ("{s:O s:O}", "dirs", arr, "urls", urls);
        rc = o ? json_dump_file (o, path, JSON_COMPACT) : -1;
    }
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
    char first[PATH_MAX];
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
            if (!vc->missing++)
                (void) snprintf (vc->first, sizeof (vc->first), "%s", sub);
        }
    }
    closedir (d);
}

int migrate_outbox_missing (struct agent *a, const struct mig *g, char *first,
                            size_t size)
{
    struct verify_ctx vc = { .a = a, .g = g };
    char path[PATH_MAX];

    for (int k = 0; k < g->spec.ndirs; k++) {
        int fd;
        if (migrate_outbox_path (a->conf, g->job_id, g->restart, k, path,
                                 sizeof (path))
                < 0
            || (fd = open (path,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
                   < 0)
            continue;
        vc.k = k;
        verify_walk (&vc, fd, "", 0);
        close (fd);
    }
    (void) snprintf (first, size, "%s", vc.first);
    return vc.missing;
}

void migrate_outbox_remove (struct agent *a, const struct mig *g)
{
    char path[PATH_MAX], name[64];
    tier_error_t e;
    int fd;

    (void) snprintf (path, sizeof (path), "%.2048s/.outbox",
                     a->conf->nvdimm_dir);
    (void) snprintf (name, sizeof (name), "%u.%u", g->job_id, g->restart);
    if ((fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
        >= 0) {
        if (tier_rmtree_at (fd, name, &e) < 0)
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

static void outbox_found (struct agent *a, const char *dir, const char *name,
                          migrate_outbox_f fn)
{
    char path[PATH_MAX + 300];
    struct migrate_spec s;
    struct store_job job;
    uint32_t id, rst;
    json_error_t jerr;
    tier_error_t e;
    json_t *dirs;

    if (parse_name (name, &id, &rst) < 0)
        return;
    (void) snprintf (path, sizeof (path), "%s/%s/dirs.json", dir, name);
    memset (&s, 0, sizeof (s));
    if (store_job_get (a->store, id, rst, &job, &e) < 0
        || !(dirs = json_load_file (path, 0, &jerr))) {
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
    DIR *d;

    (void) snprintf (path, sizeof (path), "%.2048s/.outbox",
                     a->conf->nvdimm_dir);
    if (!(d = opendir (path)))
        return;
    while ((de = readdir (d)))
        outbox_found (a, path, de->d_name, fn);
    closedir (d);
}
