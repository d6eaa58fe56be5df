/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stage_url.c - stage-in's URL inputs (URL=PATH items)
 *
 * In the copier, with the job's credentials: where each object goes (its
 * target PATH beneath an allowed root: an existing regular file the user
 * owns or may write, else an empty file made as the mount point), the
 * user's S3 credentials (SharedStateDir/users/USER/credentials, read as
 * the user, never logged), and the fetch through lib/endpoint.h (TLS
 * verified against EndpointCAFile) into the stage directory.  At job end,
 * in the mount point remover (the job's credentials too), the made files
 * go once no job uses them.
 *
 * Which jobs use a made file: each holds a hard link to it in the user's
 * TIER_STATE_STAGE_REFS directory (lib/state.h), named JOBID-NODE-K, so
 * that the file's link count tells whether another job (on any node)
 * still shows a URL there.
 *
 * Owns those files and links.  Calls lib/ (paths, url, endpoint, state)
 * and stage_child.c's stage_say and stage_on_progress; runs only in
 * children forked through agent/child.h.
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
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/endpoint.h"
#include "lib/paths.h"
#include "lib/state.h"
#include "lib/url.h"
#include "stage_msg.h"
#include "stage.h"

const char *stage_allowed_root (const struct tier_conf *conf, const char *path)
{
    for (int i = 0; i < conf->allowed_roots_count; i++)
        if (tier_path_under (path, conf->allowed_roots[i]))
            return conf->allowed_roots[i];
    return NULL;
}

int stage_open_parent (int rootfd, const char *rel, const char **base)
{
    const char *slash = strrchr (rel, '/');
    char parent[PATH_MAX];

    if (!slash) {
        *base = rel;
        parent[0] = '\0';
    }
    else {
        *base = slash + 1;
        (void) snprintf (parent, sizeof (parent), "%.*s", (int) (slash - rel),
                         rel);
    }
    return tier_path_open_beneath (rootfd, parent, O_PATH | O_DIRECTORY, 0, 0);
}

const char *stage_open_error (int e)
{
    return e == EXDEV || e == ELOOP ? "a symlink or '..' leads out of its "
                                      "root"
                                    : strerror (e);
}

int stage_refs_open (const struct stage_req *r)
{
    if (!r->conf->shared_state_dir[0])
        return -1;
    return tier_state_user_open (r->conf->shared_state_dir, r->user, r->uid,
                                 TIER_STATE_STAGE_REFS, true, NULL);
}

/* This job's reference to the file filefd (st) for item k: a hard link
 * in stage-refs, made from the descriptor (/proc/self/fd), so that it
 * is the file that was checked.  ref is "" when there can be none (no
 * such directory, or another file system).
 */
static void add_ref (const struct stage_req *r, int k, int refsfd, int filefd,
                     const struct stat *st, char *ref, size_t size)
{
    char proc[64];
    struct stat rst;

    ref[0] = '\0';
    if (refsfd < 0)
        return;
    (void) snprintf (ref, size, "%u-%s-%d", r->job_id, r->conf->node, k);
    (void) snprintf (proc, sizeof (proc), "/proc/self/fd/%d", filefd);
    (void) unlinkat (refsfd, ref, 0); /* a requeued job's */
    if (linkat (AT_FDCWD, proc, refsfd, ref, AT_SYMLINK_FOLLOW) < 0) {
        ref[0] = '\0';
        return;
    }
    if (fstatat (refsfd, ref, &rst, AT_SYMLINK_NOFOLLOW) < 0
        || rst.st_ino != st->st_ino || rst.st_dev != st->st_dev) {
        (void) unlinkat (refsfd, ref, 0);
        ref[0] = '\0';
    }
}

/* Is st (empty, linked elsewhere too) a mount point file that tier made
 * for another job: does a reference in stage-refs link to it? */
static bool is_mount_file (int refsfd, const struct stat *st)
{
    struct dirent *de;
    bool found = false;
    DIR *d;
    int dfd;

    if (refsfd < 0 || st->st_size != 0 || st->st_nlink < 2
        || (dfd = dup (refsfd)) < 0)
        return false;
    if (!(d = fdopendir (dfd))) {
        close (dfd);
        return false;
    }
    while (!found && (de = readdir (d))) {
        struct stat rst;
        if (de->d_name[0] == '.')
            continue;
        found = fstatat (refsfd, de->d_name, &rst, AT_SYMLINK_NOFOLLOW) == 0
                && rst.st_ino == st->st_ino && rst.st_dev == st->st_dev;
    }
    closedir (d);
    return found;
}

static void tell_made (int chan, int k, const struct stat *st, const char *ref)
{
    struct stagemsg m = {
        .type = STAGEMSG_MADE,
        .k = k,
        .dev = (uint64_t) st->st_dev,
        .ino = (uint64_t) st->st_ino,
        .ref = ref,
    };

    (void) stagemsg_send (chan, &m);
}

/* The target exists (tfd, O_PATH): a regular file the user owns or may
 * write is bound over; one that tier made for another job of the user
 * (is_mount_file) is reported as made, so that it goes once no job uses
 * it. */
static int target_existing (const struct stage_req *r, int k, int refsfd,
                            int tfd, int chan, const char *shown, mode_t *mode)
{
    const char *p = r->items[k];
    char ref[STAGEMSG_REF_MAX];
    bool mount_file = false;
    struct stat st;
    int e;

    e = fstat (tfd, &st) < 0 ? errno : 0;
    if (!e && S_ISREG (st.st_mode) && st.st_uid != r->uid
        && syscall (SYS_faccessat2, tfd, "", W_OK, AT_EMPTY_PATH | AT_EACCESS)
               < 0)
        e = errno;
    if (!e && S_ISREG (st.st_mode)
        && (mount_file = is_mount_file (refsfd, &st))) {
        add_ref (r, k, refsfd, tfd, &st, ref, sizeof (ref));
        if (ref[0])
            tell_made (chan, k, &st, ref);
    }
    close (tfd);
    if (e == EACCES || e == EPERM || e == EROFS)
        return stage_say (chan,
                          "%s: you neither own nor may write this "
                          "file, so %s cannot be shown in its place",
                          p, shown);
    if (e)
        return stage_say (chan, "%s: %s", p, strerror (e));
    if (!S_ISREG (st.st_mode))
        return stage_say (chan,
                          "%s: not a regular file (%s is fetched as "
                          "one file)",
                          p, shown);
    *mode = mount_file ? 0644 : st.st_mode & 0777;
    return 0;
}

/* No target: an empty file as the mount point, in an existing directory
 * the user may write (O_EXCL, 0600), reported as made.  0, -1 after an
 * error message, or 1 if it was made meanwhile (another job, or node, of
 * the user): look again. */
static int target_make (const struct stage_req *r, int k, int refsfd,
                        int rootfd, const char *rel, int chan,
                        const char *shown, mode_t *mode)
{
    const char *p = r->items[k], *base;
    char ref[STAGEMSG_REF_MAX];
    struct stat st;
    int pfd, nfd, e;

    if ((pfd = stage_open_parent (rootfd, rel, &base)) < 0) {
        e = errno;
        if (e == ENOENT)
            return stage_say (chan,
                              "%s: its directory does not exist (it "
                              "must, to show %s there)",
                              p, shown);
        return stage_say (chan, "%s: %s", p, stage_open_error (e));
    }
    nfd = openat (pfd, base,
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY
                      | O_CLOEXEC,
                  0600);
    e = errno;
    if (nfd >= 0 && fstat (nfd, &st) == 0) {
        add_ref (r, k, refsfd, nfd, &st, ref, sizeof (ref));
        close (nfd);
        close (pfd);
        tell_made (chan, k, &st, ref);
        *mode = 0644;
        return 0;
    }
    if (nfd >= 0) {
        e = errno;
        (void) unlinkat (pfd, base, 0);
        close (nfd);
    }
    close (pfd);
    if (e != EEXIST)
        return stage_say (chan,
                          "%s: cannot create an empty file there to "
                          "show %s: %s",
                          p, shown, strerror (e));
    return 1;
}

int stage_url_target (const struct stage_req *r, int k, int refsfd, int chan,
                      mode_t *mode)
{
    const char *p = r->items[k], *root, *rel;
    char shown[256];
    int rootfd, tfd, rc, e;

    tier_url_shown (r->urls[k], shown, sizeof (shown));
    if (!(root = stage_allowed_root (r->conf, p)))
        return stage_say (chan,
                          "%s: outside the directories tier may act "
                          "on (AllowedRoots)",
                          p);
    rel = tier_path_strip (p, root);
    if (!*rel)
        return stage_say (chan, "%s: an allowed root cannot show %s", p, shown);
    if ((rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return stage_say (chan, "%s: %s", root, strerror (errno));
    for (int tries = 0;; tries++) {
        if ((tfd = tier_path_open_beneath (rootfd, rel, O_PATH, 0, 0)) >= 0) {
            close (rootfd);
            return target_existing (r, k, refsfd, tfd, chan, shown, mode);
        }
        if (errno != ENOENT || tries > 0)
            break;
        if ((rc = target_make (r, k, refsfd, rootfd, rel, chan, shown, mode))
            <= 0) {
            close (rootfd);
            return rc;
        }
    }
    e = errno;
    close (rootfd);
    return stage_say (chan, "%s: %s", p, stage_open_error (e));
}

/* S3 credentials, read as the user from their credentials file: the
 * profile named like the bucket, else [default]. */
struct tier_creds *stage_url_creds (const struct stage_req *r,
                                    const struct tier_url *u, int chan)
{
    const char *root = r->conf->shared_state_dir;
    char path[PATH_MAX];
    struct tier_creds *c;
    struct stat st;
    tier_error_t e;

    if (!root[0]) {
        (void) stage_say (chan,
                          "%s: no S3 credentials: SharedStateDir is "
                          "not set in tier.conf",
                          u->display);
        return NULL;
    }
    if (tier_creds_path (root, r->user, path, sizeof (path)) < 0) {
        (void) stage_say (chan, "%s: no S3 credentials: %s", u->display,
                          strerror (errno));
        return NULL;
    }
    if (lstat (path, &st) < 0) {
        (void) stage_say (chan,
                          "%s: no S3 credentials: %s: %s (see "
                          "doc/staging.md)",
                          u->display, path, strerror (errno));
        return NULL;
    }
    if ((c = tier_creds_load (path, u->bucket, r->uid, &e)))
        return c;
    if (errno == ENOENT && (c = tier_creds_load (path, "default", r->uid, &e)))
        return c;
    if (errno == ENOENT)
        (void) stage_say (chan, "%s: %s: no [%s] or [default] profile",
                          u->display, path, u->bucket);
    else
        (void) stage_say (chan, "%s: %s", u->display, e.text);
    return NULL;
}

struct url_progress {
    struct stage_progress *prog;
    uint64_t *total;
    bool counted;
    uint64_t room; /* the part's NVDIMM room (0: none) */
    uint64_t need; /* past it: what the part would need */
    atomic_int cancel;
};

/* The object's size joins the total once the server has said it; past
 * the part's room the GET stops. */
static void on_url_progress (uint64_t done, uint64_t total, void *arg)
{
    struct url_progress *u = arg;
    uint64_t would = *u->total + (u->counted ? 0 : total ? total : done);

    if (u->room && would > u->room && !u->need) {
        u->need = would;
        atomic_store (&u->cancel, 1);
        return;
    }
    if (total && !u->counted) {
        struct stagemsg m = { .type = STAGEMSG_TOTAL };

        u->counted = true;
        *u->total += total;
        m.total = *u->total;
        (void) stagemsg_send (u->prog->chan, &m);
    }
    stage_on_progress (done, total, u->prog);
}

/* GET the object into dstfd/name: a temporary first, then renamed.
 * *bytes: the object's size.  -1 with the library's message (it names
 * the URL, without secrets). */
int stage_url_fetch (const struct stage_req *r, const struct tier_url *u,
                     const struct tier_creds *creds, int dstfd,
                     const char *name, mode_t mode, struct stage_progress *prog,
                     uint64_t *total, uint64_t *bytes, tier_error_t *error)
{
    static const char tmp[] = ".tier-fetch.part";
    const char *ca = r->conf->endpoint_ca_file;
    struct url_progress up = { .prog = prog, .total = total, .room = r->room };
    struct tier_endpoint_opts opts = {
        .creds = creds,
        .ca_file = ca[0] ? ca : NULL,
        .cancel = &up.cancel,
        .progress = on_url_progress,
        .progress_arg = &up,
    };
    struct tier_endpoint_result res;
    struct tier_endpoint *ep;
    int fd, rc = -1;

    if (!(ep = tier_endpoint_create (u, &opts, error)))
        return -1;
    if ((fd = openat (dstfd, tmp,
                      O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                      0600))
        < 0) {
        tier_errprintf (error, "%s: %s", u->display, strerror (errno));
        goto out;
    }
    if (tier_endpoint_get (ep, fd, 0, &res, error) < 0) {
        if (up.need) {
            char text[TIER_ERROR_MAX];
            stage_room_text (r, up.need, text, sizeof (text));
            tier_errprintf (error, "%s", text);
        }
        goto out;
    }
    if (fchmod (fd, mode) < 0 || renameat (dstfd, tmp, dstfd, name) < 0) {
        tier_errprintf (error, "%s: %s", u->display, strerror (errno));
        goto out;
    }
    *bytes = res.size;
    rc = 0;
out:
    if (fd >= 0) {
        close (fd);
        if (rc < 0)
            (void) unlinkat (dstfd, tmp, 0);
    }
    tier_endpoint_destroy (ep);
    return rc;
}

/* One made file: still the empty regular file tier made (same device
 * and inode), and no other job's reference to it (one link)? */
static bool unmake_one (const struct tier_conf *conf, json_t *o, int refsfd)
{
    const char *path = json_string_value (json_object_get (o, "path"));
    const char *ref = json_string_value (json_object_get (o, "ref"));
    json_int_t dev = json_integer_value (json_object_get (o, "dev"));
    json_int_t ino = json_integer_value (json_object_get (o, "ino"));
    const char *root, *base;
    struct stat st;
    bool removed;
    int rootfd, pfd;

    if (ref && ref[0] && !strchr (ref, '/') && refsfd >= 0)
        (void) unlinkat (refsfd, ref, 0);
    if (!path || !(root = stage_allowed_root (conf, path))
        || (rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return false;
    pfd = stage_open_parent (rootfd, tier_path_strip (path, root), &base);
    close (rootfd);
    if (pfd < 0)
        return false;
    removed = fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0
              && S_ISREG (st.st_mode) && st.st_size == 0 && st.st_nlink == 1
              && st.st_dev == (dev_t) dev && st.st_ino == (ino_t) ino
              && unlinkat (pfd, base, 0) == 0;
    close (pfd);
    return removed;
}

int stage_unmake_main (void *arg, int chan)
{
    const struct stage_unmake *u = arg;
    const char *root = u->conf->shared_state_dir;
    struct stagemsg m = { .type = STAGEMSG_REMOVED };
    int refsfd = -1;
    size_t i;
    json_t *o;

    if (root[0])
        refsfd = tier_state_user_open (root, u->job->user, u->job->uid,
                                       TIER_STATE_STAGE_REFS, false, NULL);
    json_array_foreach (u->made, i, o) if (unmake_one (u->conf, o, refsfd))
        m.removed++;
    if (refsfd >= 0)
        close (refsfd);
    return stagemsg_send (chan, &m) < 0 ? 1 : 0;
}
