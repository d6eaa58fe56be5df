/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrator_gfs.c - the migrator's publishing to the GFS
 *
 * A file is published with the copy engine under a unique temporary
 * name beside its final one, fsync'd and renamed into place (SHA-256 of
 * the cached file first): the GFS never shows a partial file under its
 * final name.  A GFS file that changed after the job started and is not
 * the migrator's own version is a conflict (e.g. two jobs appending to
 * one file): never merged or overwritten; this job's version is put
 * beside it, under DIR/.tier-conflicts/JOB/NODE/REL, and reported.
 *
 * Owns nothing but these steps, in the migrator's process (migrator.h);
 * calls the copy engine and the GFS streams' worker side (streams.h).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/copy.h"
#include "migrator.h"
#include "streams.h"

/* mkdir -p of rel's parent on the GFS, as the user; the parent's fd.
 * New directories take the mode of the cached one of the same path
 * (mirror), or 0700 (a side path such as .tier-conflicts/).
 */
static int gfs_mkparents (struct migrator *m, int k, const char *rel,
                          bool mirror, const char **base)
{
    char buf[PATH_MAX * 2];
    char *p, *s;
    int fd = dup (m->dirs[k].gfsfd);

    (void) snprintf (buf, sizeof (buf), "%s", rel);
    s = buf;
    while (fd >= 0 && (p = strchr (s, '/'))) {
        struct stat st;
        int next;
        mode_t mode = mirror ? 0755 : 0700;
        *p = '\0';
        if (mirror
            && fstatat (m->dirs[k].upperfd, buf, &st, AT_SYMLINK_NOFOLLOW) == 0
            && S_ISDIR (st.st_mode))
            mode = st.st_mode & 07777;
        if (mkdirat (fd, s, mode) < 0 && errno != EEXIST) {
            close (fd);
            return -1;
        }
        next = openat (fd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close (fd);
        fd = next;
        *p = '/';
        s = p + 1;
    }
    *base = rel + (s - buf);
    return fd;
}

/* After a migrator died mid-copy, its temporary may be left beside the
 * file it was publishing: remove ".BASE.tier-XXXXXX.part" (a concurrent
 * writer of the same name elsewhere would be a conflict anyway).  Once
 * per file, only in a resumed migrator.
 */
static void clean_temps (int pfd, const char *base)
{
    char prefix[NAME_MAX + 8];
    struct dirent *de;
    int fd = openat (pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size_t plen;
    DIR *d;

    if (fd < 0 || !(d = fdopendir (fd))) {
        if (fd >= 0)
            close (fd);
        return;
    }
    plen = (size_t) snprintf (prefix, sizeof (prefix), ".%s", base);
    while ((de = readdir (d)))
        if (tier_copy_is_temp_name (de->d_name)
            && !strncmp (de->d_name, prefix, plen)
            && !strncmp (de->d_name + plen, ".tier-", 6))
            (void) unlinkat (pfd, de->d_name, 0);
    closedir (d);
}

/* A resumed migrator finds a GFS file it has no record of, changed
 * during the job: is it the copy that an earlier migrator of this job
 * published, whose report died with the agent?  Yes if it is the cached
 * file to the byte: same size, same mtime (the copy keeps it; a GFS that
 * keeps whole seconds only is allowed for) and same SHA-256 (hex, of
 * the cached file, is filled in).
 */
static bool gfs_is_ours (struct migrator *m, int pfd, const char *base, int src,
                         const struct stat *st, const struct stat *gst,
                         char hex[65])
{
    struct stat g2;
    char ghex[65];
    bool ok;
    int fd;

    if (!S_ISREG (gst->st_mode) || gst->st_size != st->st_size
        || gst->st_mtim.tv_sec != st->st_mtim.tv_sec
        || (gst->st_mtim.tv_nsec != st->st_mtim.tv_nsec
            && gst->st_mtim.tv_nsec != 0))
        return false;
    if ((fd = openat (pfd, base,
                      O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC))
        < 0)
        return false;
    ok = fstat (fd, &g2) == 0 && S_ISREG (g2.st_mode)
         && g2.st_ino == gst->st_ino && g2.st_size == gst->st_size
         && migrator_sha256 (m, src, hex) == 0
         && migrator_sha256 (m, fd, ghex) == 0 && !strcmp (hex, ghex);
    close (fd);
    return ok;
}

/* done: published.  us: how long hashing and copying took. */
static void published (struct migrator *m, struct mfile *f,
                       const struct stat *st, const char *hex, int64_t us,
                       bool ours)
{
    struct migmsg msg = { .type = MIGMSG_DONE,
                          .k = f->k,
                          .rel = f->rel,
                          .size = st->st_size,
                          .sha256 = hex,
                          .ino = (int64_t) f->gfs.ino,
                          .gfs_size = f->gfs.size,
                          .gfs_mtime = f->gfs.mtime,
                          .gfs_ctime = f->gfs.ctime,
                          .us = us > 0 ? us : 0 };

    migrator_ident_set (&f->src, st);
    /* first: the name was not published before (a file migrated again
     * after it was reopened is not a new output) */
    msg.first = !f->published;
    f->published = true;
    f->ours = ours;
    msg.ours = ours;
    f->state = MF_DONE;
    f->backoff_ms = 0;
    f->failing = false;
    migrator_tell (m, &msg);
}

/* Somebody else wrote the GFS file during the job: keep this job's
 * version beside it and say so (once per version). */
static void gfs_conflict (struct migrator *m, struct mfile *f, int src,
                          const struct stat *st)
{
    struct migmsg msg = { .type = MIGMSG_CONFLICT, .k = f->k, .rel = f->rel };
    struct tier_copy_opts so = { .threads = 1, .flags = TIER_COPY_NOREPLACE };
    struct tier_copy_result res;
    char side[PATH_MAX * 2], why[TIER_ERROR_MAX];
    const char *sbase;
    tier_error_t err;
    int sfd;

    if (f->state == MF_CONFLICT && migrator_ident_eq (&f->src, st))
        return;
    (void) snprintf (side, sizeof (side), ".tier-conflicts/%u/%s/%s", m->job_id,
                     m->node, f->rel);
    if ((sfd = gfs_mkparents (m, f->k, side, false, &sbase)) >= 0) {
        int rc;
        so.limit = streams_worker_limit ();
        (void) unlinkat (sfd, sbase, 0); /* an older version */
        so.progress = migrator_progress;
        so.progress_arg = m;
        migrator_take_stream (m); /* a GFS stream */
        rc = tier_copy_fd (src, sfd, sbase, &so, &res, &err);
        streams_give ();
        if (rc == 0)
            msg.side = side;
        else
            (void) snprintf (why, sizeof (why), "%s", err.text);
        close (sfd);
    }
    else
        (void) snprintf (why, sizeof (why), "%.200s: %s", side,
                         strerror (errno));
    if (!msg.side) {
        /* never dropped: kept in the write cache, the side copy retried */
        char text[PATH_MAX * 3 + TIER_ERROR_MAX + 256];
        (void) snprintf (text, sizeof (text),
                         "the GFS file changed during "
                         "the job (another writer) and this job's version "
                         "could not be saved beside it in %s/%s (%s): kept "
                         "in the node's write cache, retried",
                         m->dirs[f->k].gfs, side, why);
        migrator_fail (m, f, EEXIST, text);
        return;
    }
    migrator_ident_set (&f->src, st);
    migrator_tell (m, &msg);
}

/* Before the rename: the agent records the temporary's inode. */
struct intent_arg {
    struct migrator *m;
    struct mfile *f;
    const struct stat *st;
    const char *hex;
    bool ours;
};

static int before_rename (const struct stat *tmp, void *arg)
{
    struct intent_arg *ia = arg;

    return migrator_intent (ia->m, ia->f, tmp, ia->st, ia->hex, ia->ours);
}

/* The copy itself: hashed, then copied as hashed (or ESTALE). */
static void gfs_copy (struct migrator *m, struct mfile *f, int src,
                      const struct stat *st, int pfd, const char *base,
                      bool ours)
{
    struct tier_copy_opts opts = { .threads = 1 };
    struct intent_arg ia = { m, f, st, NULL, ours };
    struct tier_copy_result res;
    tier_error_t err;
    struct stat gst;
    int64_t t0 = tier_now_us ();
    char hex[65];
    int rc;

    if (migrator_sha256 (m, src, hex) < 0) {
        migrator_fail (m, f, errno, strerror (errno));
        return;
    }
    ia.hex = hex;
    opts.before_publish = before_rename;
    opts.publish_arg = &ia;
    opts.limit = streams_worker_limit (); /* the user's bandwidth */
    /* the version that was hashed, or nothing is published (ESTALE): a
     * copy of a newer one would reach the GFS under a wrong checksum and
     * be nobody's, left behind when the job deletes the file */
    opts.expect = st;
    opts.progress = migrator_progress;
    opts.progress_arg = m;
    migrator_take_stream (m); /* one of GfsStreams */
    rc = tier_copy_fd (src, pfd, base, &opts, &res, &err);
    streams_give ();
    if (rc == 0
        && (res.src.st_size != st->st_size
            || res.src.st_mtim.tv_nsec != st->st_mtim.tv_nsec
            || res.src.st_mtim.tv_sec != st->st_mtim.tv_sec)) {
        rc = -1; /* changed while hashing: again */
        errno = ESTALE;
    }
    if (rc < 0) {
        if (errno == ESTALE)
            migrator_due (m, f->k, f->rel, MIGRATOR_SETTLE_MS);
        else
            migrator_fail (m, f, errno, err.text);
        return;
    }
    if (fstatat (pfd, base, &gst, AT_SYMLINK_NOFOLLOW) == 0)
        migrator_ident_set (&f->gfs, &gst);
    published (m, f, st, hex, tier_now_us () - t0, ours);
}

/* The GFS file is the cached one to the byte, and changed during the
 * job: an earlier migrator's copy.  Known from the records (a GFS that
 * keeps whole seconds only: the version did not match them exactly),
 * it is this version's; unknown (its report died with the agent), it
 * is recorded now, not copied again (and never taken off the GFS again:
 * it may have replaced a file older than the job). */
static void gfs_adopt (struct migrator *m, struct mfile *f,
                       const struct stat *st, const struct stat *gst,
                       const char *hex)
{
    if (f->published) {
        migrator_ident_set (&f->src, st);
        f->state = MF_DONE;
        f->backoff_ms = 0;
        return;
    }
    migrator_ident_set (&f->gfs, gst);
    published (m, f, st, hex, 0, false);
}

void migrator_gfs_publish (struct migrator *m, struct mfile *f, int src,
                           const struct stat *st)
{
    struct stat gst;
    const char *base;
    bool exists;
    char hex[65];
    int pfd;

    if ((pfd = gfs_mkparents (m, f->k, f->rel, true, &base)) < 0) {
        migrator_fail (m, f, errno, strerror (errno));
        return;
    }
    exists = fstatat (pfd, base, &gst, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && f->pub.ino && gst.st_ino == f->pub.ino
        && gst.st_size == f->pub.gfs_size && S_ISREG (gst.st_mode)) {
        /* our own publishing, whose end was not recorded: this version,
         * adopted; an older one of ours, replaced */
        bool same = st->st_size == f->pub.size
                    && st->st_mtim.tv_sec == f->pub.mtime.tv_sec
                    && st->st_mtim.tv_nsec == f->pub.mtime.tv_nsec;
        f->ours = f->ours || f->pub.ours;
        if (same && !(f->published && migrator_ident_eq (&f->gfs, &gst))) {
            migrator_ident_set (&f->gfs, &gst);
            published (m, f, st, f->pub.sha256, 0, f->ours);
        }
        else
            gfs_copy (m, f, src, st, pfd, base, f->ours);
    }
    else if (exists && m->resumed && gst.st_ctim.tv_sec >= m->job_start
             && (!f->published || f->src.ino == 0)
             && gfs_is_ours (m, pfd, base, src, st, &gst, hex))
        gfs_adopt (m, f, st, &gst, hex);
    else if (exists && !(f->published && migrator_ident_eq (&f->gfs, &gst))
             && gst.st_ctim.tv_sec >= m->job_start) {
        gfs_conflict (m, f, src, st);
        f->state = MF_CONFLICT;
    }
    else {
        if (m->resumed && !f->cleaned) {
            clean_temps (pfd, base);
            f->cleaned = true;
        }
        gfs_copy (m, f, src, st, pfd, base, !exists || f->ours);
    }
    close (pfd);
}

void migrator_gfs_unpublish (struct migrator *m, struct mfile *f)
{
    const char *base;
    struct stat gst;
    int pfd;

    if ((pfd = gfs_mkparents (m, f->k, f->rel, true, &base)) < 0)
        return;
    if (fstatat (pfd, base, &gst, AT_SYMLINK_NOFOLLOW) == 0
        && migrator_ident_eq (&f->gfs, &gst) && unlinkat (pfd, base, 0) == 0)
        migrator_gone (m, f);
    f->published = false;
    f->state = MF_GONE;
    close (pfd);
}
