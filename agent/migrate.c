/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate.c - stage-out: the write cache's migrations to the GFS (or to
 * object stores)
 *
 * A job's output directories (--tier-stage-out, endpoint policies) are
 * overlays in its namespace on each node: lower = the GFS directory,
 * upper = NvdimmDir/.outbox/JOB.RESTART/K/upper (host-visible, outside the
 * job's own NVDIMM directory, so that it outlives the job until every file
 * has reached the GFS).  For each job with outputs on the node, the agent
 * runs one migrator process, which
 *
 *   - drops to the job's user (uid, gid, groups) for good, after opening
 *     the upper directories as root: the GFS is only ever written with the
 *     user's credentials (a root-squashing GFS works, permissions hold);
 *   - watches the uppers with inotify and migrates a file shortly after it
 *     is closed after writing (or renamed into place): SHA-256 of the
 *     cached file, then the copy engine into the GFS directory under a
 *     unique temporary name, fsync, rename -- the GFS never shows a partial
 *     file under its final name;
 *   - on SYNC (each step's end, the job's end, tierctl flush) walks the
 *     uppers and publishes exactly the names present then: files not yet
 *     migrated at their current version are copied, names it published
 *     that are gone from the upper (write-then-rename, deleted outputs) are
 *     removed from the GFS again if they are still its version there;
 *     whiteouts (deleted GFS files) are ignored: tier never deletes a file
 *     it did not write;
 *   - never overwrites what somebody else wrote meanwhile: a GFS file that
 *     changed after the job started and is not the migrator's own version
 *     is a conflict (e.g. two jobs appending to one file): kept on the
 *     cache and reported, never merged or overwritten;
 *   - retries failures (GFS full, permission denied, I/O errors) with
 *     backoff, keeping the data;
 *   - for DIR=URL outputs sends each file to URL + REL instead (S3 PUT or
 *     multipart upload, WebDAV PUT + MOVE), with the same rules: see
 *     "outputs to an object store" below.
 *
 * It reports every outcome on a pipe; the agent keeps them in LMDB (the
 * job's manifest: what reached the GFS, size, checksum; what is pending,
 * failed or in conflict, and why).  A restarted agent restarts the
 * migrators of every outbox it finds, telling them what was published
 * already: nothing acknowledged is lost, nothing is published twice.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/copy.h"
#include "lib/endpoint.h"
#include "lib/jobns.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/state.h"
#include "agent.h"
#include "streams.h"

#define DIRS_MAX 16
#define SETTLE_MS 500
#define RETRY_MAX_MS 60000
#define WATCHES_MAX 65536
#define GROUPS_MAX 256

/* ------------------------------------------------------------ escaping */

/* Paths travel on the pipes as one token: bytes <= ' ', '%' and DEL as
 * %XX.
 */
static void esc (const char *in, char *out, size_t size)
{
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *) in; *p; p++) {
        if (o + 4 >= size)
            break;
        if (*p <= ' ' || *p == '%' || *p == 0x7f)
            o += (size_t) snprintf (out + o, size - o, "%%%02X", *p);
        else
            out[o++] = (char) *p;
    }
    out[o] = '\0';
}

static int unesc (const char *in, char *out, size_t size)
{
    size_t o = 0;

    for (const char *p = in; *p; p++) {
        unsigned v;
        if (o + 1 >= size)
            return -1;
        if (*p == '%') {
            if (sscanf (p + 1, "%2x", &v) != 1)
                return -1;
            out[o++] = (char) v;
            p += 2;
        }
        else
            out[o++] = *p;
    }
    out[o] = '\0';
    return 0;
}

/* ====================================================== the migrator ==== */

struct ident {
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

static bool ident_eq (const struct ident *a, const struct stat *st)
{
    return a->ino == st->st_ino && a->size == st->st_size
           && a->mtime.tv_sec == st->st_mtim.tv_sec
           && a->mtime.tv_nsec == st->st_mtim.tv_nsec
           && a->ctime.tv_sec == st->st_ctim.tv_sec
           && a->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static void ident_set (struct ident *a, const struct stat *st)
{
    a->ino = st->st_ino;
    a->size = st->st_size;
    a->mtime = st->st_mtim;
    a->ctime = st->st_ctim;
}

/* One file the migrator knows: dirty (due), published, failed, conflict. */
struct mfile {
    int k;
    char *rel;
    struct ident src;           /* the cached version last published */
    struct ident gfs;           /* what it became on the GFS */
    bool published;
    bool ours;                  /* created on the GFS by this job */
    int64_t due_ms;             /* 0: nothing to do */
    int64_t backoff_ms;
    int state;                  /* 'D' done, 'F' failed, 'C' conflict, 'P' */
    bool cleaned;               /* a dead migrator's temporaries gone */
    bool failing;               /* a failure reported since the last
                                 * success (retries are not counted) */
    /* outputs to an object store (DIR=URL) */
    char etag[256];             /* the object's ETag after our upload */
    bool claimed;               /* the key is this job's (an upload of it
                                 * was recorded as begun, or done) */
    struct tier_s3_upload *up;  /* a multipart upload under way, as far as
                                 * its state was reported */
    struct mfile *next;
};

struct mdir {
    int upperfd;                /* the upper directory (opened as root) */
    int gfsfd;                  /* the GFS directory (opened as the user);
                                 * -1 for outputs to an object store */
    char gfs[PATH_MAX];
    struct tier_url *url;       /* DIR=URL: the prefix the files go to */
    struct tier_creds *creds;   /* s3: the user's, read when first needed */
};

struct migrator {
    uint32_t job_id, restart;
    char node[TIER_NODENAME_MAX];
    bool resumed;               /* copies of a dead migrator may be left */
    int64_t job_start;          /* epoch s: GFS changes after it are not
                                 * ours unless we made them */
    int ndirs;
    struct mdir dirs[DIRS_MAX];
    struct mfile *files;
    const struct tier_conf *conf;
    char user[64];              /* the job's user (for the credentials) */
    uid_t uid;
    int out;                    /* report pipe (shared with other migrators) */
    int in;                     /* commands */
    char inbuf[65536];
    size_t inlen;
};

/* One report line, written whole (PIPE_BUF atomic). */
static void report (struct migrator *m, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static void report (struct migrator *m, const char *fmt, ...)
{
    char line[4096];
    int n = snprintf (line, sizeof (line), "%u %u ", m->job_id, m->restart);
    va_list ap;

    va_start (ap, fmt);
    n += vsnprintf (line + n, sizeof (line) - (size_t) n - 1, fmt, ap);
    va_end (ap);
    if (n >= (int) sizeof (line) - 1)
        n = (int) sizeof (line) - 2;
    line[n++] = '\n';
    if (write (m->out, line, (size_t) n) < 0) {
        /* the agent is gone; we die with it */
    }
}

static struct mfile *mf_get (struct migrator *m, int k, const char *rel,
                             bool create)
{
    struct mfile *f;

    for (f = m->files; f; f = f->next)
        if (f->k == k && !strcmp (f->rel, rel))
            return f;
    if (!create || !(f = calloc (1, sizeof (*f))) || !(f->rel = strdup (rel))) {
        free (f);
        return NULL;
    }
    f->k = k;
    f->state = 'P';
    f->next = m->files;
    m->files = f;
    return f;
}

static void mark_due (struct migrator *m, int k, const char *rel,
                      int64_t delay)
{
    struct mfile *f = mf_get (m, k, rel, true);

    if (f && (!f->due_ms || f->due_ms > tier_now_ms () + delay)) {
        f->due_ms = tier_now_ms () + delay;
        if (f->state != 'C')
            f->state = 'P';
    }
}

/* Walk upper dir k below rel and mark every regular file not yet
 * published at its current version due (now).
 */
static void walk (struct migrator *m, int k, int dfd, const char *rel,
                  int depth)
{
    struct dirent *de;
    int fd = openat (dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d;

    /* a descriptor of its own: a dup would share (and keep) the offset
     * of the last walk */
    if (fd < 0 || depth > 128 || !(d = fdopendir (fd))) {
        if (fd >= 0)
            close (fd);
        return;
    }
    while ((de = readdir (d))) {
        char sub[PATH_MAX];
        struct stat st;

        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        (void) snprintf (sub, sizeof (sub), "%s%s%s", rel, rel[0] ? "/" : "",
                         de->d_name);
        if (fstatat (dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISDIR (st.st_mode)) {
            int sfd = openat (dfd, de->d_name, O_RDONLY | O_DIRECTORY
                              | O_NOFOLLOW | O_CLOEXEC);
            if (sfd >= 0) {
                walk (m, k, sfd, sub, depth + 1);
                close (sfd);
            }
        }
        else if (S_ISREG (st.st_mode)) {
            struct mfile *f = mf_get (m, k, sub, false);
            /* published at this very version: nothing to do; failed: its
             * retry is scheduled (a flush brings it forward) */
            if (f && f->published && f->state == 'D' && ident_eq (&f->src, &st))
                continue;
            if (f && f->state == 'F')
                continue;
            mark_due (m, k, sub, 0);
        }
        /* whiteouts (0/0 character devices), fifos...: not outputs */
    }
    closedir (d);
}

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

static int gfs_parent (struct migrator *m, int k, const char *rel,
                       const char **base)
{
    return gfs_mkparents (m, k, rel, true, base);
}

static int gfs_side_parent (struct migrator *m, int k, const char *rel,
                            const char **base)
{
    return gfs_mkparents (m, k, rel, false, base);
}

static int sha256_fd (int fd, char hex[65])
{
    static unsigned char buf[1 << 20];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    off_t off = 0;
    ssize_t n;

    if (!ctx || !EVP_DigestInit_ex (ctx, EVP_sha256 (), NULL)) {
        EVP_MD_CTX_free (ctx);
        errno = ENOMEM;
        return -1;
    }
    while ((n = pread (fd, buf, sizeof (buf), off)) > 0) {
        EVP_DigestUpdate (ctx, buf, (size_t) n);
        off += n;
    }
    if (n < 0 || !EVP_DigestFinal_ex (ctx, md, &mdlen)) {
        int e = errno;
        EVP_MD_CTX_free (ctx);
        errno = n < 0 ? e : EIO;
        return -1;
    }
    EVP_MD_CTX_free (ctx);
    for (unsigned i = 0; i < mdlen && i < 32; i++)
        (void) snprintf (hex + 2 * i, 3, "%02x", md[i]);
    hex[64] = '\0';
    return 0;
}

static void fail (struct migrator *m, struct mfile *f, int err,
                  const char *text)
{
    char e[PATH_MAX * 3];

    f->backoff_ms = f->backoff_ms ? f->backoff_ms * 2 : 1000;
    if (f->backoff_ms > RETRY_MAX_MS)
        f->backoff_ms = RETRY_MAX_MS;
    f->due_ms = tier_now_ms () + f->backoff_ms;
    f->state = 'F';
    esc (f->rel, e, sizeof (e));
    /* first: a failure to count; a retry failing again is not */
    report (m, "F %d %d %d %s %s", f->k, err, f->failing ? 0 : 1, e, text);
    f->failing = true;
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
static bool gfs_is_ours (int pfd, const char *base, int src,
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
    if ((fd = openat (pfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK
                      | O_CLOEXEC)) < 0)
        return false;
    ok = fstat (fd, &g2) == 0 && S_ISREG (g2.st_mode)
         && g2.st_ino == gst->st_ino && g2.st_size == gst->st_size
         && sha256_fd (src, hex) == 0 && sha256_fd (fd, ghex) == 0
         && !strcmp (hex, ghex);
    close (fd);
    return ok;
}

/* D: published.  us: how long hashing and copying took; first: the
 * name was not published before (a file migrated again after it was
 * reopened is not a new output). */
static void report_done (struct migrator *m, struct mfile *f,
                         const struct stat *st, const char *hex, int64_t us,
                         bool first)
{
    char e[PATH_MAX * 3];

    esc (f->rel, e, sizeof (e));
    report (m, "D %d %lld %s %d %lu %lld %lld.%09ld %lld.%09ld %lld %d %s",
            f->k, (long long) st->st_size, hex, f->ours ? 1 : 0,
            (unsigned long) f->gfs.ino, (long long) f->gfs.size,
            (long long) f->gfs.mtime.tv_sec, f->gfs.mtime.tv_nsec,
            (long long) f->gfs.ctime.tv_sec, f->gfs.ctime.tv_nsec,
            (long long) (us > 0 ? us : 0), first ? 1 : 0, e);
    f->failing = false;
}

/* --------------------------------------- outputs to an object store ---
 *
 * DIR=URL: the job writes under DIR (the overlay's lower, never written
 * here); each file REL goes to the object URL + REL with the endpoint
 * library, as the user, with the user's own S3 credentials.
 *
 *   - Never clobbered: before the first upload the object is HEADed; one
 *     that exists is an object that was there before the job (or that
 *     somebody else wrote meanwhile): a conflict, the job's version is put
 *     beside it at URL + .tier-conflicts/JOB/NODE/REL.  Before an upload
 *     again (a file reopened after its migration) and before removing an
 *     object, its ETag must still be the one our upload made.
 *   - A key is claimed ("I", recorded by the agent) before its upload
 *     starts, so that after a crash the object found there is known to be
 *     this job's, not another writer's.
 *   - S3 multipart uploads report their upload id ("M") and each part's
 *     ETag ("P") as they go; the agent keeps them in LMDB and hands them
 *     back to a restarted migrator, whose upload resumes with the parts
 *     the server has.
 *   - WebDAV: the library's PUT to a temporary name, then MOVE.
 */

/* Escaped names longer than this make no upload records (LMDB keys are
 * at most 511 bytes): such an upload starts afresh after a crash. */
#define UPLOAD_NAME_MAX 400

/* An endpoint for the object REL under dir k's prefix. */
static struct tier_endpoint *obj_endpoint (struct migrator *m, int k,
                                           const char *rel,
                                           const struct tier_endpoint_opts *o,
                                           tier_error_t *error)
{
    struct mdir *d = &m->dirs[k];
    struct tier_endpoint_opts opts = { 0 };
    struct tier_endpoint *ep;
    struct tier_url *u;

    if (o)
        opts = *o;
    if (d->url->scheme == TIER_URL_S3 && !d->creds) {
        char path[PATH_MAX];

        if (!m->conf->shared_state_dir[0]) {
            errno = ENOENT;
            tier_errprintf (error, "%s: no S3 credentials: SharedStateDir "
                            "is not set in tier.conf", d->url->display);
            return NULL;
        }
        if (tier_creds_path (m->conf->shared_state_dir, m->user, path,
                             sizeof (path)) < 0) {
            tier_errprintf (error, "%s: no S3 credentials: %s",
                            d->url->display, strerror (errno));
            return NULL;
        }
        if (!(d->creds = tier_creds_for_bucket (path, d->url->bucket, m->uid,
                                                error)))
            return NULL;
    }
    opts.creds = d->creds;
    opts.ca_file = m->conf->endpoint_ca_file[0] ? m->conf->endpoint_ca_file
                                                : NULL;
    opts.part_size = m->conf->endpoint_part_size;
    opts.multipart_threshold = m->conf->endpoint_multipart;
    if (!(u = tier_url_child (d->url, rel, error)))
        return NULL;
    ep = tier_endpoint_create (u, &opts, error);
    tier_url_destroy (u);
    return ep;
}

/* A failure to reach the object store: credentials refused are read
 * again at the next try (the user may have fixed the file). */
static void obj_fail (struct migrator *m, struct mfile *f, int err,
                      const char *text)
{
    struct mdir *d = &m->dirs[f->k];

    if (err == EACCES || err == EPERM || err == ENOENT) {
        tier_creds_destroy (d->creds);
        d->creds = NULL;
    }
    fail (m, f, err, text);
}

struct upctx {
    struct migrator *m;
    struct mfile *f;
};

/* The library's multipart state after each step: what is new in it goes
 * to the agent, one line per part (a whole state of 10,000 parts would
 * not fit a line). */
static int on_upload_state (const char *json, void *arg)
{
    struct upctx *u = arg;
    struct mfile *f = u->f;
    struct tier_s3_upload *up;
    char e[PATH_MAX * 3], x[1024];
    tier_error_t err;

    esc (f->rel, e, sizeof (e));
    if (!json) {
        if (f->up)
            report (u->m, "X %d %s", f->k, e);
        tier_s3_upload_destroy (f->up);
        f->up = NULL;
        return 0;
    }
    if (!(up = tier_s3_upload_load (json, &err)))
        return 0;
    if (strlen (e) > UPLOAD_NAME_MAX) {
        tier_s3_upload_destroy (f->up);
        f->up = up;                     /* resumable only in this life */
        return 0;
    }
    if (!f->up || strcmp (f->up->upload_id, up->upload_id)) {
        esc (up->upload_id, x, sizeof (x));
        report (u->m, "M %d %llu %llu %lld %s %s", f->k,
                (unsigned long long) up->part_size,
                (unsigned long long) up->size, (long long) up->mtime_ns, x,
                e);
        tier_s3_upload_destroy (f->up);
        f->up = NULL;
    }
    for (unsigned i = 0; i < up->nparts; i++)
        if (up->etags[i] && !(f->up && i < f->up->nparts
                              && f->up->etags[i])) {
            esc (up->etags[i], x, sizeof (x));
            report (u->m, "P %d %u %s %s", f->k, i + 1, x, e);
        }
    tier_s3_upload_destroy (f->up);
    f->up = up;
    return 0;
}

/* Is the object there someone else's?  Ours: the ETag our upload made,
 * or a key this job claimed before a crash. */
static bool obj_foreign (const struct mfile *f,
                         const struct tier_endpoint_info *info)
{
    if (!info->exists)
        return false;
    if (f->published)
        return f->etag[0] && info->etag[0] && strcmp (f->etag, info->etag);
    return !f->claimed;
}

/* The object exists and is not ours: put this job's version beside it,
 * at .tier-conflicts/JOB/NODE/REL under the prefix, and report it.  A
 * side copy that fails is a failure, retried (the data stays cached). */
static void obj_conflict (struct migrator *m, struct mfile *f, int src,
                          const struct stat *st)
{
    struct tier_endpoint_result res;
    struct tier_endpoint *ep;
    char side[PATH_MAX * 2], e[PATH_MAX * 3], se[PATH_MAX * 6];
    char why[TIER_ERROR_MAX + 200];
    tier_error_t err;

    (void) snprintf (side, sizeof (side), ".tier-conflicts/%u/%s/%s",
                     m->job_id, m->node, f->rel);
    if (!(ep = obj_endpoint (m, f->k, side, NULL, &err))
        || tier_endpoint_put (ep, src, &res, &err) < 0) {
        int e2 = errno;
        tier_endpoint_destroy (ep);
        if (e2 == ESTALE) {
            mark_due (m, f->k, f->rel, SETTLE_MS);
            return;
        }
        (void) snprintf (why, sizeof (why), "the object existed before "
                         "the job, or changed since its upload: not "
                         "overwritten, and this job's version could not be "
                         "put beside it: %s", err.text);
        obj_fail (m, f, e2, why);
        return;
    }
    tier_endpoint_destroy (ep);
    esc (f->rel, e, sizeof (e));
    esc (side, se, sizeof (se));
    ident_set (&f->src, st);
    f->state = 'C';
    f->backoff_ms = 0;
    f->failing = false;
    report (m, "C %d %s %s", f->k, e, se);
}

/* Migrate one file to its object (src: the cached file, st its stat). */
static void migrate_one_object (struct migrator *m, struct mfile *f, int src,
                                const struct stat *st)
{
    struct upctx uc = { .m = m, .f = f };
    struct tier_endpoint_opts opts = { .state = on_upload_state,
                                       .state_arg = &uc };
    struct tier_endpoint_info info;
    struct tier_endpoint_result res;
    struct tier_endpoint *ep;
    char hex[65], e[PATH_MAX * 3], te[sizeof (f->etag) * 3];
    char *resume = NULL;
    tier_error_t err;
    int64_t t0;
    bool first;
    int rc;

    /* this version is kept beside another writer's object already */
    if (f->state == 'C' && ident_eq (&f->src, st))
        return;
    if (f->up && !(resume = tier_s3_upload_dump (f->up))) {
        fail (m, f, ENOMEM, "out of memory");
        return;
    }
    opts.resume = resume;
    if (!(ep = obj_endpoint (m, f->k, f->rel, &opts, &err))) {
        obj_fail (m, f, errno, err.text);
        goto out;
    }
    if (tier_endpoint_head (ep, &info, NULL, &err) < 0) {
        obj_fail (m, f, errno, err.text);
        goto out;
    }
    if (obj_foreign (f, &info)) {
        obj_conflict (m, f, src, st);
        goto out;
    }
    esc (f->rel, e, sizeof (e));
    /* claimed before any byte goes: after a crash the object is ours */
    report (m, "I %d %s", f->k, e);
    f->claimed = true;
    t0 = tier_now_us ();
    if (sha256_fd (src, hex) < 0) {
        fail (m, f, errno, strerror (errno));
        goto out;
    }
    rc = tier_endpoint_put (ep, src, &res, &err);
    if (rc < 0) {
        int e2 = errno;
        if (e2 == ESTALE)
            mark_due (m, f->k, f->rel, SETTLE_MS);      /* still written */
        else
            obj_fail (m, f, e2, err.text);
        goto out;
    }
    tier_s3_upload_destroy (f->up);
    f->up = NULL;
    /* the version we made: the answer's ETag, or HEAD's (WebDAV) */
    if (res.etag[0])
        (void) snprintf (f->etag, sizeof (f->etag), "%s", res.etag);
    else if (tier_endpoint_head (ep, &info, NULL, &err) == 0 && info.exists)
        (void) snprintf (f->etag, sizeof (f->etag), "%s", info.etag);
    else
        f->etag[0] = '\0';
    ident_set (&f->src, st);
    first = !f->published;
    f->published = true;
    f->ours = true;
    f->state = 'D';
    f->backoff_ms = 0;
    f->failing = false;
    esc (f->etag[0] ? f->etag : "-", te, sizeof (te));
    report (m, "O %d %lld %lld.%09ld %s %lld %d %s %s", f->k,
            (long long) st->st_size, (long long) st->st_mtim.tv_sec,
            st->st_mtim.tv_nsec, hex, (long long) (tier_now_us () - t0),
            first ? 1 : 0, te, e);
out:
    tier_endpoint_destroy (ep);
    free (resume);
}

/* A name of an object output gone from the job's view (renamed, deleted):
 * abort its unfinished upload, and remove the object if it is still the
 * version this job made (or a key it claimed).  A failure to reach the
 * server leaves it for the next sync. */
static void unpublish_object (struct migrator *m, struct mfile *f)
{
    struct tier_endpoint_info info;
    struct tier_endpoint *ep;
    char e[PATH_MAX * 3];
    tier_error_t err;

    if (!f->published && !f->claimed && !f->up)
        return;
    esc (f->rel, e, sizeof (e));
    if (!(ep = obj_endpoint (m, f->k, f->rel, NULL, &err)))
        return;
    if (f->up) {
        char *json = tier_s3_upload_dump (f->up);
        /* best effort: s3rver, for one, cannot (ENOTSUP) */
        if (json)
            (void) tier_endpoint_abort_upload (ep, json, NULL, &err);
        free (json);
        tier_s3_upload_destroy (f->up);
        f->up = NULL;
        report (m, "X %d %s", f->k, e);
    }
    if (tier_endpoint_head (ep, &info, NULL, &err) < 0) {
        tier_endpoint_destroy (ep);
        return;
    }
    if (info.exists && !obj_foreign (f, &info)
        && tier_endpoint_remove (ep, NULL, &err) < 0) {
        tier_endpoint_destroy (ep);
        return;
    }
    tier_endpoint_destroy (ep);
    report (m, "U %d %s", f->k, e);
    f->published = false;
    f->claimed = false;
    f->etag[0] = '\0';
    f->state = 'U';
}

/* Migrate one file of the upper to the GFS. */
static void migrate_one (struct migrator *m, struct mfile *f)
{
    struct mdir *d = &m->dirs[f->k];
    struct tier_copy_opts opts = { .threads = 1 };
    struct tier_copy_result res;
    char hex[65], e[PATH_MAX * 3];
    const char *base;
    struct stat st, gst;
    tier_error_t err;
    int src, pfd, rc;
    int64_t t0;
    bool exists, first;

    f->due_ms = 0;
    esc (f->rel, e, sizeof (e));
    /* only regular files are outputs: a whiteout (a GFS file the job
     * deleted: tier never deletes one), a fifo, a symlink are not */
    if (fstatat (d->upperfd, f->rel, &st, AT_SYMLINK_NOFOLLOW) == 0
        && !S_ISREG (st.st_mode)) {
        if (f->state != 'D')
            f->state = 'W';
        return;
    }
    /* beneath the write cache, no symlink anywhere on the way */
    if ((src = tier_path_open_beneath (d->upperfd, f->rel, O_RDONLY
                                       | O_NOFOLLOW | O_NONBLOCK, 0,
                                       TIER_BENEATH_NO_SYMLINKS)) < 0) {
        if (errno == ENOENT || errno == ELOOP) {
            /* renamed or deleted before it was migrated: nothing is
             * pending (sync takes a published one off again) */
            if (f->state == 'F' && !f->published) {
                report (m, "U %d %s", f->k, e);     /* its record goes */
                f->failing = false;
            }
            if (f->state == 'P' || f->state == 'F')
                f->state = f->published ? 'D' : 'U';
            return;
        }
        fail (m, f, errno, strerror (errno));
        return;
    }
    if (fstat (src, &st) < 0 || !S_ISREG (st.st_mode)) {
        close (src);
        return;
    }
    if (f->published && f->state == 'D' && ident_eq (&f->src, &st)) {
        close (src);
        return;                         /* this version is on the GFS */
    }
    if (d->url) {
        migrate_one_object (m, f, src, &st);
        close (src);
        return;
    }
    if ((pfd = gfs_parent (m, f->k, f->rel, &base)) < 0) {
        fail (m, f, errno, strerror (errno));
        close (src);
        return;
    }
    exists = fstatat (pfd, base, &gst, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && !f->published && m->resumed
        && gst.st_ctim.tv_sec >= m->job_start
        && gfs_is_ours (pfd, base, src, &st, &gst, hex)) {
        /* ours: recorded now, not copied again (and never taken off the
         * GFS again: it may have replaced a file older than the job) */
        ident_set (&f->gfs, &gst);
        ident_set (&f->src, &st);
        f->published = true;
        f->ours = false;
        f->state = 'D';
        f->backoff_ms = 0;
        report_done (m, f, &st, hex, 0, true);
        close (pfd);
        close (src);
        return;
    }
    if (exists && !(f->published && ident_eq (&f->gfs, &gst))
        && gst.st_ctim.tv_sec >= m->job_start) {
        /* somebody else wrote it during the job: never overwrite, never
         * merge; keep this job's version beside it, under
         * DIR/.tier-conflicts/JOB/NODE/REL, and say so */
        if (f->state != 'C' || !ident_eq (&f->src, &st)) {
            char side[PATH_MAX * 2], se[PATH_MAX * 6];
            const char *sbase;
            int sfd;
            (void) snprintf (side, sizeof (side), ".tier-conflicts/%u/%s/%s",
                             m->job_id, m->node, f->rel);
            if ((sfd = gfs_side_parent (m, f->k, side, &sbase)) >= 0) {
                struct tier_copy_opts so = {
                    .threads = 1, .flags = TIER_COPY_NOREPLACE,
                    .limit = streams_worker_limit () };
                int rc2;
                (void) unlinkat (sfd, sbase, 0);    /* an older version */
                (void) streams_take (NULL, NULL);   /* a GFS stream */
                rc2 = tier_copy_fd (src, sfd, sbase, &so, &res, &err);
                streams_give ();
                if (rc2 < 0)
                    side[0] = '\0';
                close (sfd);
            }
            else
                side[0] = '\0';
            esc (side[0] ? side : "-", se, sizeof (se));
            ident_set (&f->src, &st);
            report (m, "C %d %s %s", f->k, e, se);
        }
        f->state = 'C';
        close (pfd);
        close (src);
        return;
    }
    if (!exists)
        f->ours = true;
    if (m->resumed && !f->cleaned) {
        clean_temps (pfd, base);
        f->cleaned = true;
    }
    t0 = tier_now_us ();
    if (sha256_fd (src, hex) < 0) {
        fail (m, f, errno, strerror (errno));
        close (pfd);
        close (src);
        return;
    }
    opts.limit = streams_worker_limit ();       /* the user's bandwidth */
    /* the version that was hashed, or nothing is published (ESTALE): a
     * copy of a newer one would reach the GFS under a wrong checksum and
     * be nobody's, left behind when the job deletes the file */
    opts.expect = &st;
    (void) streams_take (NULL, NULL);           /* one of GfsStreams */
    rc = tier_copy_fd (src, pfd, base, &opts, &res, &err);
    streams_give ();
    if (rc == 0 && (res.src.st_size != st.st_size
                    || res.src.st_mtim.tv_nsec != st.st_mtim.tv_nsec
                    || res.src.st_mtim.tv_sec != st.st_mtim.tv_sec)) {
        rc = -1;                        /* changed while hashing: again */
        errno = ESTALE;
    }
    if (rc < 0) {
        int e2 = errno;
        if (e2 == ESTALE)
            mark_due (m, f->k, f->rel, SETTLE_MS);      /* still written */
        else
            fail (m, f, e2, err.text);
        close (pfd);
        close (src);
        return;
    }
    if (fstatat (pfd, base, &gst, AT_SYMLINK_NOFOLLOW) == 0)
        ident_set (&f->gfs, &gst);
    ident_set (&f->src, &st);
    first = !f->published;
    f->published = true;
    f->state = 'D';
    f->backoff_ms = 0;
    report_done (m, f, &st, hex, tier_now_us () - t0, first);
    close (pfd);
    close (src);
}

/* Names published by this job whose file is gone from the upper: take
 * them off the GFS again, if they are still our version there.
 */
static void unpublish_gone (struct migrator *m)
{
    for (struct mfile *f = m->files; f; f = f->next) {
        struct stat st, gst;
        const char *base;
        char e[PATH_MAX * 3];
        int pfd;

        if (m->dirs[f->k].url) {
            bool gone;
            if (!f->published && !f->claimed && !f->up)
                continue;
            if (fstatat (m->dirs[f->k].upperfd, f->rel, &st,
                         AT_SYMLINK_NOFOLLOW) == 0)
                gone = S_ISCHR (st.st_mode) && st.st_rdev == makedev (0, 0);
            else
                gone = errno == ENOENT;
            if (gone)
                unpublish_object (m, f);
            continue;
        }
        if (!f->published || !f->ours)
            continue;
        /* gone from the job's view: no such name in the write cache, or a
         * whiteout over it (the name was published to the GFS, the lower
         * layer, and then renamed or deleted in the job) */
        if (fstatat (m->dirs[f->k].upperfd, f->rel, &st,
                     AT_SYMLINK_NOFOLLOW) == 0) {
            if (!S_ISCHR (st.st_mode) || st.st_rdev != makedev (0, 0))
                continue;
        }
        else if (errno != ENOENT)
            continue;
        if ((pfd = gfs_parent (m, f->k, f->rel, &base)) < 0)
            continue;
        if (fstatat (pfd, base, &gst, AT_SYMLINK_NOFOLLOW) == 0
            && ident_eq (&f->gfs, &gst) && unlinkat (pfd, base, 0) == 0) {
            esc (f->rel, e, sizeof (e));
            report (m, "U %d %s", f->k, e);
        }
        f->published = false;
        f->state = 'U';
        close (pfd);
    }
}

static void counts (struct migrator *m, int *pending, int *failed,
                    int *conflicts)
{
    *pending = *failed = *conflicts = 0;
    for (struct mfile *f = m->files; f; f = f->next) {
        if (f->state == 'P')
            (*pending)++;
        else if (f->state == 'F')
            (*failed)++;
        else if (f->state == 'C')
            (*conflicts)++;
    }
}

static void do_sync (struct migrator *m, unsigned seq, bool force)
{
    int64_t now = tier_now_ms ();
    int pending, failed, conflicts;

    for (int k = 0; k < m->ndirs; k++)
        walk (m, k, m->dirs[k].upperfd, "", 0);
    if (force)
        for (struct mfile *f = m->files; f; f = f->next)
            if (f->state == 'F') {
                f->due_ms = now;
                f->backoff_ms = 0;
            }
    /* everything present now, at once; what failed waits for its backoff
     * unless this is a flush */
    for (struct mfile *f = m->files; f; f = f->next)
        if (f->due_ms && (force || f->state != 'F' || f->due_ms <= now))
            migrate_one (m, f);
    unpublish_gone (m);
    counts (m, &pending, &failed, &conflicts);
    report (m, "S %u %d %d %d", seq, pending, failed, conflicts);
}

/* What a restarted agent knows of object outputs (the agent's records):
 *   KNOWNO k size mtime etag rel     published, this version, this ETag
 *   CLAIM k rel                      an upload of it had begun
 *   UPLOAD k part_size size mtime_ns upload_id rel
 *   PART k n etag rel                a multipart upload and its parts
 * Returns 1 if line was one of them.
 */
static int on_object_command (struct migrator *m, const char *line)
{
    char rel[PATH_MAX * 3], raw[PATH_MAX], x[1024], v[1024];
    unsigned long long psize, size;
    long long ms, mtime;
    long mns;
    unsigned n;
    int k;
    struct mfile *f;

    if (sscanf (line, "KNOWNO %d %llu %lld.%ld %1023s %s", &k, &size, &ms,
                &mns, x, rel) == 6) {
        if (k < 0 || k >= m->ndirs || !m->dirs[k].url
            || unesc (rel, raw, sizeof (raw)) < 0
            || unesc (x, v, sizeof (v)) < 0 || !(f = mf_get (m, k, raw, true)))
            return 1;
        f->published = f->ours = f->claimed = true;
        f->state = 'D';
        (void) snprintf (f->etag, sizeof (f->etag), "%.255s",
                         strcmp (v, "-") ? v : "");
        f->src.ino = 0;                 /* adopted when unchanged */
        f->src.size = (off_t) size;
        f->src.mtime.tv_sec = ms;
        f->src.mtime.tv_nsec = mns;
        return 1;
    }
    if (sscanf (line, "CLAIM %d %s", &k, rel) == 2) {
        if (k >= 0 && k < m->ndirs && m->dirs[k].url
            && unesc (rel, raw, sizeof (raw)) == 0
            && (f = mf_get (m, k, raw, true)))
            f->claimed = true;
        return 1;
    }
    if (sscanf (line, "UPLOAD %d %llu %llu %lld %1023s %s", &k, &psize,
                &size, &mtime, x, rel) == 6) {
        struct tier_url *u;
        tier_error_t err;
        json_t *o;
        char *text;

        if (k < 0 || k >= m->ndirs || !m->dirs[k].url
            || unesc (rel, raw, sizeof (raw)) < 0
            || unesc (x, v, sizeof (v)) < 0 || !(f = mf_get (m, k, raw, true))
            || !(u = tier_url_child (m->dirs[k].url, raw, &err)))
            return 1;
        /* the library's own state format, for opts.resume */
        o = json_pack ("{s:i s:s s:s s:I s:I s:I s:[]}", "version", 1, "url",
                       u->text, "upload_id", v, "size", (json_int_t) size,
                       "mtime_ns", (json_int_t) mtime, "part_size",
                       (json_int_t) psize, "parts");
        tier_url_destroy (u);
        text = o ? json_dumps (o, JSON_COMPACT) : NULL;
        json_decref (o);
        tier_s3_upload_destroy (f->up);
        f->up = text ? tier_s3_upload_load (text, &err) : NULL;
        free (text);
        f->claimed = true;
        return 1;
    }
    if (sscanf (line, "PART %d %u %1023s %s", &k, &n, x, rel) == 4) {
        if (k >= 0 && k < m->ndirs && m->dirs[k].url
            && unesc (rel, raw, sizeof (raw)) == 0
            && unesc (x, v, sizeof (v)) == 0
            && (f = mf_get (m, k, raw, false)) && f->up && n >= 1
            && n <= f->up->nparts && !f->up->etags[n - 1])
            f->up->etags[n - 1] = strdup (v);
        return 1;
    }
    return 0;
}

/* Commands from the agent: SYNC seq | DIRTY k rel (closed after writing,
 * or renamed into place) | SCAN k rel (a new directory: take what it
 * holds) | KNOWN k ours ino size mtime ctime srcsize srcmtime rel | QUIT
 */
static int on_command (struct migrator *m, char *line)
{
    unsigned seq;
    int k, ours;
    unsigned long ino;
    long long size, ssize;
    long long ms, cs, sms;
    long mns, cns, smns;
    char rel[PATH_MAX * 3], raw[PATH_MAX];

    if (on_object_command (m, line))
        return 0;
    if (sscanf (line, "SYNC %u", &seq) == 1)
        do_sync (m, seq, false);
    else if (sscanf (line, "FLUSH %u", &seq) == 1)
        do_sync (m, seq, true);
    else if ((sscanf (line, "DIRTY %d %s", &k, rel) == 2
              || sscanf (line, "SCAN %d %s", &k, rel) == 2)
             && k >= 0 && k < m->ndirs
             && unesc (rel, raw, sizeof (raw)) == 0) {
        if (line[0] == 'D')
            mark_due (m, k, raw, SETTLE_MS);
        else {
            int dfd = tier_path_open_beneath (m->dirs[k].upperfd, raw,
                                              O_RDONLY | O_DIRECTORY, 0,
                                              TIER_BENEATH_NO_SYMLINKS);
            if (dfd >= 0) {
                walk (m, k, dfd, raw, 0);
                close (dfd);
            }
        }
    }
    else if (!strcmp (line, "QUIT"))
        return -1;
    else if (sscanf (line, "KNOWN %d %d %lu %lld %lld.%ld %lld.%ld %lld "
                     "%lld.%ld %s", &k, &ours, &ino, &size, &ms, &mns, &cs,
                     &cns, &ssize, &sms, &smns, rel) == 12
             && k >= 0 && k < m->ndirs && unesc (rel, raw, sizeof (raw)) == 0) {
        struct mfile *f = mf_get (m, k, raw, true);
        if (f) {
            f->published = true;
            f->ours = ours;
            f->state = 'D';
            f->gfs.ino = (ino_t) ino;
            f->gfs.size = (off_t) size;
            f->gfs.mtime.tv_sec = ms;
            f->gfs.mtime.tv_nsec = mns;
            f->gfs.ctime.tv_sec = cs;
            f->gfs.ctime.tv_nsec = cns;
            /* the cached version: size and mtime (the upper's inode and
             * ctime are not worth keeping across a restart) */
            f->src.size = (off_t) ssize;
            f->src.mtime.tv_sec = sms;
            f->src.mtime.tv_nsec = smns;
            f->src.ino = 0;
        }
    }
    return 0;
}

static bool src_matches_known (const struct mfile *f, const struct stat *st)
{
    return f->src.ino == 0 && f->src.size == st->st_size
           && f->src.mtime.tv_sec == st->st_mtim.tv_sec
           && f->src.mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static void migrator_loop (struct migrator *m)
{
    for (;;) {
        struct pollfd p[1] = { { m->in, POLLIN, 0 } };
        int64_t next = -1, now = tier_now_ms ();
        int timeout;

        for (struct mfile *f = m->files; f; f = f->next)
            if (f->due_ms && (next < 0 || f->due_ms < next))
                next = f->due_ms;
        timeout = next < 0 ? -1 : (int) (next > now ? next - now : 0);
        if (poll (p, 1, timeout) < 0 && errno != EINTR)
            return;
        if (p[0].revents & (POLLIN | POLLHUP)) {
            ssize_t n = read (m->in, m->inbuf + m->inlen,
                              sizeof (m->inbuf) - m->inlen - 1);
            char *nl;
            if (n <= 0)
                return;                 /* the agent is gone */
            m->inlen += (size_t) n;
            m->inbuf[m->inlen] = '\0';
            while ((nl = strchr (m->inbuf, '\n'))) {
                *nl = '\0';
                if (on_command (m, m->inbuf) < 0)
                    return;
                m->inlen -= (size_t) (nl + 1 - m->inbuf);
                memmove (m->inbuf, nl + 1, m->inlen + 1);
            }
            if (m->inlen >= sizeof (m->inbuf) - 1)
                m->inlen = 0;
        }
        now = tier_now_ms ();
        for (struct mfile *f = m->files; f; f = f->next) {
            struct stat st;
            if (!f->due_ms || f->due_ms > now)
                continue;
            /* a file known from before a restart, unchanged: adopt it */
            if (f->src.ino == 0 && f->published
                && fstatat (m->dirs[f->k].upperfd, f->rel, &st,
                            AT_SYMLINK_NOFOLLOW) == 0
                && src_matches_known (f, &st)) {
                ident_set (&f->src, &st);
                f->due_ms = 0;
                continue;
            }
            migrate_one (m, f);
        }
    }
}

struct mspec {
    bool resumed;               /* an earlier migrator of the job died */
    uint32_t job_id, restart;
    uid_t uid;
    gid_t gid;
    int64_t job_start;
    int ndirs;
    char gfs[DIRS_MAX][PATH_MAX];
    char url[DIRS_MAX][TIER_URL_MAX + 1];   /* DIR=URL, or "" */
};

/* The migrator process: root until the directories are open, then the
 * user's for good.  It dies with the agent (parent: the agent's pid):
 * a migrator left behind would go on publishing beside the restarted
 * agent's, and see the new one's copies as somebody else's.
 */
static void migrator_main (struct agent *a, const struct mspec *s,
                           int in, int out, pid_t parent)
{
    struct migrator m = { .job_id = s->job_id, .restart = s->restart,
                          .job_start = s->job_start, .in = in, .out = out };

    (void) snprintf (m.node, sizeof (m.node), "%s", a->node);
    m.resumed = s->resumed;
    struct passwd pw, *pwp = NULL;
    gid_t groups[GROUPS_MAX];
    int ngroups = GROUPS_MAX;
    char buf[4096], path[PATH_MAX];
    sigset_t all;

    (void) prctl (PR_SET_PDEATHSIG, SIGKILL);
    sigemptyset (&all);
    sigprocmask (SIG_SETMASK, &all, NULL);
    signal (SIGPIPE, SIG_IGN);
    if (getpwuid_r (s->uid, &pw, buf, sizeof (buf), &pwp) != 0 || !pwp
        || getgrouplist (pw.pw_name, s->gid, groups, &ngroups) < 0)
        ngroups = 0;
    m.conf = a->conf;
    m.uid = s->uid;
    (void) snprintf (m.user, sizeof (m.user), "%s", pwp ? pw.pw_name : "");
    for (int k = 0; k < s->ndirs; k++) {
        (void) snprintf (path, sizeof (path), "%.2048s/.outbox/%u.%u/%d/upper",
                         a->conf->nvdimm_dir, s->job_id, s->restart, k);
        m.dirs[k].upperfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                                  | O_CLOEXEC);
        (void) snprintf (m.dirs[k].gfs, sizeof (m.dirs[k].gfs), "%s",
                         s->gfs[k]);
    }
    m.ndirs = s->ndirs;
    if (setgroups ((size_t) ngroups, groups) < 0
        || setresgid (s->gid, s->gid, s->gid) < 0
        || setresuid (s->uid, s->uid, s->uid) < 0) {
        report (&m, "E cannot take uid %u", (unsigned) s->uid);
        _exit (1);
    }
    /* a change of credentials clears the parent-death signal: again */
    (void) prctl (PR_SET_PDEATHSIG, SIGKILL);
    if (getppid () != parent)
        _exit (0);
    for (int k = 0; k < m.ndirs; k++) {
        const char *root = NULL;
        int rootfd;
        if (s->url[k][0]) {
            /* DIR=URL: the files go to the URL; DIR is not written */
            tier_error_t err;
            static bool curl_ready;
            m.dirs[k].gfsfd = -1;
            if (!(m.dirs[k].url = tier_url_parse_output (s->url[k], &err))
                || (!curl_ready && tier_endpoint_init (&err) < 0)) {
                report (&m, "E %s", err.text);
                _exit (1);
            }
            curl_ready = true;
            if (m.dirs[k].upperfd < 0) {
                report (&m, "E %s the write cache is gone",
                        m.dirs[k].url->display);
                _exit (1);
            }
            continue;
        }
        for (int i = 0; i < a->conf->allowed_roots_count; i++)
            if (tier_path_under (m.dirs[k].gfs, a->conf->allowed_roots[i]))
                root = a->conf->allowed_roots[i];
        m.dirs[k].gfsfd = -1;
        if (root && (rootfd = open (root, O_PATH | O_DIRECTORY
                                    | O_CLOEXEC)) >= 0) {
            m.dirs[k].gfsfd = tier_path_open_beneath (
                rootfd, tier_path_strip (m.dirs[k].gfs, root),
                O_RDONLY | O_DIRECTORY, 0, 0);
            close (rootfd);
        }
        if (m.dirs[k].upperfd < 0 || m.dirs[k].gfsfd < 0) {
            char e[PATH_MAX * 3];
            esc (m.dirs[k].gfs, e, sizeof (e));
            report (&m, "E %s %s", e, m.dirs[k].upperfd < 0
                    ? "the write cache is gone" : strerror (errno));
            _exit (1);
        }
    }
    report (&m, "R");                   /* ready */
    migrator_loop (&m);
    _exit (0);
}

/* ===================================================== the agent side == */

struct mig {
    uint32_t job_id, restart;
    uid_t uid;
    pid_t pid;
    int cmd;                    /* the migrator's stdin */
    unsigned seq_sent, seq_done;
    int pending, failed, conflicts;
    uint64_t out_us;            /* migration time not yet in stage_out_ms */
    bool ended;                 /* the job ended: remove when done */
    pid_t manifest_pid;         /* the manifest's writer in flight, or 0 */
    bool manifest_done;         /* the final manifest is written (or the
                                 * attempt failed and was logged) */
    int64_t restart_after_ms;
    struct mspec spec;
    struct waiter_m {
        struct conn *c;
        uint32_t msgid;
        unsigned seq;
        int64_t deadline_ms;
        struct waiter_m *next;
    } *waiters;
    struct mig *next;
};

static struct mig *migs;

/* The agent watches the write caches (as root: their parents are root's
 * 0700) and tells each migrator what was closed or created.
 */
struct awatch {
    int wd;
    struct mig *g;
    int k;
    char *rel;
};

static int ifd = -1;
static struct awatch *aws;
static int naws, caws;

static int mig_send (struct mig *g, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* Watch the directory dfd (relative path rel in cache k of g) through
 * its descriptor: the name was never resolved through a symlink.
 */
static void aw_add (struct mig *g, int k, int dfd, const char *rel)
{
    char path[64];
    int wd;

    /* the magic link leads to the directory itself (no IN_DONT_FOLLOW:
     * that would watch the link) */
    (void) snprintf (path, sizeof (path), "/proc/self/fd/%d", dfd);
    if ((wd = inotify_add_watch (ifd, path, IN_CLOSE_WRITE | IN_MOVED_TO
                                 | IN_CREATE | IN_ONLYDIR
                                 | IN_EXCL_UNLINK)) < 0)
        return;
    for (int i = 0; i < naws; i++)
        if (aws[i].wd == wd)
            return;
    if (naws == caws) {
        int n = caws ? caws * 2 : 64;
        struct awatch *w = realloc (aws, (size_t) n * sizeof (*w));
        if (!w)
            return;
        aws = w;
        caws = n;
    }
    if (!(aws[naws].rel = strdup (rel))) {
        (void) inotify_rm_watch (ifd, wd);
        return;
    }
    aws[naws].wd = wd;
    aws[naws].g = g;
    aws[naws].k = k;
    naws++;
}

/* Watch a directory of the write cache and every directory below it,
 * walking with descriptors (O_NOFOLLOW at every step: the agent is root
 * and the tree is the user's).
 */
static void aw_walk (struct mig *g, int k, int dfd, const char *rel,
                     int depth)
{
    int fd = openat (dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct dirent *de;
    DIR *d;

    aw_add (g, k, dfd, rel);
    if (fd < 0 || depth > 128 || !(d = fdopendir (fd))) {
        if (fd >= 0)
            close (fd);
        return;
    }
    while ((de = readdir (d))) {
        char sub[PATH_MAX];
        int sfd;
        if (de->d_type != DT_DIR || !strcmp (de->d_name, ".")
            || !strcmp (de->d_name, ".."))
            continue;
        if ((sfd = openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY
                           | O_NOFOLLOW | O_CLOEXEC)) < 0)
            continue;
        (void) snprintf (sub, sizeof (sub), "%s%s%s", rel, rel[0] ? "/" : "",
                         de->d_name);
        aw_walk (g, k, sfd, sub, depth + 1);
        close (sfd);
    }
    closedir (d);
}

/* Watch the tree of cache k from rel down. */
static void aw_tree (struct agent *a, struct mig *g, int k, const char *rel,
                     int depth)
{
    char path[PATH_MAX];
    int rootfd, fd;

    (void) depth;
    (void) snprintf (path, sizeof (path), "%.2048s/.outbox/%u.%u/%d/upper",
                     a->conf->nvdimm_dir, g->job_id, g->restart, k);
    if ((rootfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                        | O_CLOEXEC)) < 0)
        return;
    fd = rel[0] ? tier_path_open_beneath (rootfd, rel, O_RDONLY
                                          | O_DIRECTORY, 0,
                                          TIER_BENEATH_NO_SYMLINKS)
                : dup (rootfd);
    if (fd >= 0) {
        aw_walk (g, k, fd, rel, 0);
        close (fd);
    }
    close (rootfd);
}

static void aw_drop (struct mig *g)
{
    for (int i = 0; i < naws;) {
        if (aws[i].g == g) {
            (void) inotify_rm_watch (ifd, aws[i].wd);
            free (aws[i].rel);
            aws[i] = aws[--naws];
        }
        else
            i++;
    }
}

static void on_inotify (struct agent *a)
{
    char buf[65536]
        __attribute__ ((aligned (__alignof__ (struct inotify_event))));
    ssize_t n;

    while ((n = read (ifd, buf, sizeof (buf))) > 0) {
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *) p;
            p += sizeof (*ev) + ev->len;
            for (int i = 0; i < naws; i++) {
                char rel[PATH_MAX], e[PATH_MAX * 3];
                struct awatch *w = &aws[i];
                if (w->wd != ev->wd)
                    continue;
                if (ev->mask & IN_IGNORED) {
                    free (w->rel);
                    aws[i] = aws[--naws];
                    break;
                }
                if (!ev->len)
                    break;
                (void) snprintf (rel, sizeof (rel), "%s%s%s", w->rel,
                                 w->rel[0] ? "/" : "", ev->name);
                esc (rel, e, sizeof (e));
                if (ev->mask & IN_ISDIR) {
                    /* a new directory: watch it; what it already holds
                     * was written before the watch */
                    struct mig *g = w->g;
                    int k = w->k;
                    aw_tree (a, g, k, rel, 0);
                    (void) mig_send (g, "SCAN %d %s", k, e);
                }
                else if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))
                    (void) mig_send (w->g, "DIRTY %d %s", w->k, e);
                break;
            }
        }
    }
}

static int results_rfd = -1, results_wfd = -1;
static char rbuf[65536];
static size_t rlen;

static struct mig *mig_find (uint32_t job_id, uint32_t restart)
{
    for (struct mig *g = migs; g; g = g->next)
        if (g->job_id == job_id && g->restart == restart)
            return g;
    return NULL;
}

/* LMDB: one record per output, key "JOB.RESTART/K/rel". */
static void record (struct agent *a, struct mig *g, int k, const char *rel,
                    json_t *val)
{
    char key[PATH_MAX + 64];
    struct store_kv kv;
    tier_error_t e;
    char *s;

    if (val && k >= 0 && k < g->spec.ndirs) {
        char path[PATH_MAX * 2];
        (void) snprintf (path, sizeof (path), "%s/%s", g->spec.gfs[k], rel);
        json_object_set_new (val, "dir", json_string (g->spec.gfs[k]));
        json_object_set_new (val, "path", json_string (path));
        if (g->spec.url[k][0]) {
            /* DIR=URL: where the file goes (path: its name in the job) */
            struct tier_url *pre, *u = NULL;
            if ((pre = tier_url_parse (g->spec.url[k], &e)))
                u = tier_url_child (pre, rel, &e);
            json_object_set_new (val, "url", json_string (u ? u->text
                                                            : "?"));
            tier_url_destroy (u);
            tier_url_destroy (pre);
        }
    }
    s = val ? json_dumps (val, JSON_COMPACT) : NULL;
    json_decref (val);
    (void) snprintf (key, sizeof (key), "%u.%u/%d/%s", g->job_id, g->restart,
                     k, rel);
    kv.key = key;
    kv.val = s;
    if (store_output_apply (a->store, &kv, 1, &e) < 0)
        tier_log (LOG_ERR, "outputs of job %u: %s", g->job_id, e.text);
    free (s);
}

static int mig_send (struct mig *g, const char *fmt, ...)
{
    char line[PATH_MAX * 4];
    va_list ap;
    int n;

    if (g->cmd < 0)
        return -1;
    va_start (ap, fmt);
    n = vsnprintf (line, sizeof (line) - 1, fmt, ap);
    va_end (ap);
    line[n++] = '\n';
    return write (g->cmd, line, (size_t) n) == n ? 0 : -1;
}

struct known_ctx {
    struct mig *g;
    bool parts;                 /* uploads_cb: the parts' pass */
    int uploads;
};

/* "JOB.RESTART/K/REL u" -> {upload}, "JOB.RESTART/K/REL pN" -> ETag (REL
 * escaped): to the migrator as UPLOAD and PART. */
static int uploads_cb (const char *key, const void *val, size_t len,
                       void *arg)
{
    struct known_ctx *kc = arg;
    const char *sp = strrchr (key, ' '), *slash;
    char rel[PATH_MAX * 3], x[1024];
    unsigned id, rst, n;
    int k;

    if (!sp || sscanf (key, "%u.%u/%d/", &id, &rst, &k) != 3
        || !(slash = strchr (strchr (key, '/') + 1, '/'))
        || (size_t) (sp - slash - 1) >= sizeof (rel))
        return 0;
    memcpy (rel, slash + 1, (size_t) (sp - slash - 1));
    rel[sp - slash - 1] = '\0';
    if (!kc->parts && !strcmp (sp, " u")) {
        json_error_t jerr;
        json_t *o = json_loadb (val, len, 0, &jerr);
        json_int_t psize = 0, size = 0, mtime = 0;
        const char *uid = NULL;
        if (o && json_unpack (o, "{s:s s:I s:I s:I}", "upload_id", &uid,
                              "part_size", &psize, "size", &size,
                              "mtime_ns", &mtime) == 0) {
            esc (uid, x, sizeof (x));
            (void) mig_send (kc->g, "UPLOAD %d %lld %lld %lld %s %s", k,
                             (long long) psize, (long long) size,
                             (long long) mtime, x, rel);
            kc->uploads++;
        }
        json_decref (o);
    }
    else if (kc->parts && sscanf (sp, " p%u", &n) == 1 && len < 512) {
        char etag[512];
        memcpy (etag, val, len);
        etag[len] = '\0';
        esc (etag, x, sizeof (x));
        (void) mig_send (kc->g, "PART %d %u %s %s", k, n, x, rel);
    }
    return 0;
}

static int known_cb (const char *key, const void *val, size_t len, void *arg)
{
    struct known_ctx *kc = arg;
    struct mig *g = kc->g;
    char prefix[64], e[PATH_MAX * 3];
    const char *st = NULL, *rel;
    json_int_t k = 0, ours = 0, ino = 0, size = 0, ssize = 0;
    const char *gm = NULL, *gc = NULL, *sm = NULL;
    json_error_t jerr;
    json_t *o;
    size_t plen;

    plen = (size_t) snprintf (prefix, sizeof (prefix), "%u.%u/", g->job_id,
                              g->restart);
    if (strncmp (key, prefix, plen) || !(rel = strchr (key + plen, '/')))
        return 0;
    rel++;
    if (!(o = json_loadb (val, len, 0, &jerr)))
        return 0;
    if (json_object_get (o, "url")) {
        /* an object output: published (with its ETag), or claimed */
        const char *etag = NULL;
        char te[1024];
        if (json_unpack (o, "{s:s s:I s?I s?s s?s}", "state", &st, "k", &k,
                         "size", &ssize, "mtime", &sm, "etag", &etag) == 0) {
            esc (rel, e, sizeof (e));
            esc (etag && *etag ? etag : "-", te, sizeof (te));
            if (!strcmp (st, "done") && sm)
                (void) mig_send (g, "KNOWNO %d %lld %s %s %s", (int) k,
                                 (long long) ssize, sm, te, e);
            else if (!strcmp (st, "uploading")
                     || (!strcmp (st, "failed")
                         && json_is_true (json_object_get (o, "claimed"))))
                (void) mig_send (g, "CLAIM %d %s", (int) k, e);
        }
        json_decref (o);
        return 0;
    }
    if (json_unpack (o, "{s:s s:I s?I s?I s?I s?I s?s s?s s?s}", "state", &st,
                     "k", &k, "ours", &ours, "ino", &ino, "gfs_size", &size,
                     "size", &ssize, "gfs_mtime", &gm, "gfs_ctime", &gc,
                     "mtime", &sm) == 0
        && !strcmp (st, "done") && gm && gc && sm) {
        esc (rel, e, sizeof (e));
        (void) mig_send (g, "KNOWN %d %d %lld %lld %s %s %lld %s %s", (int) k,
                         (int) ours, (long long) ino, (long long) size, gm, gc,
                         (long long) ssize, sm, e);
    }
    json_decref (o);
    return 0;
}

static int mig_spawn (struct agent *a, struct mig *g)
{
    int cmd[2], sfd;
    pid_t pid, parent = getpid ();
    struct known_ctx kc = { .g = g };
    struct tier_copy_limit *limit;
    char what[64];
    tier_error_t e;

    if (pipe2 (cmd, O_CLOEXEC) < 0)
        return -1;
    /* its migrations take GFS streams and the user's bandwidth */
    (void) snprintf (what, sizeof (what), "stage-out of job %u", g->job_id);
    limit = streams_limit (a, g->spec.uid, NULL);
    sfd = streams_client (a, g->spec.uid, NULL, STREAMS_STAGE_OUT, what);
    if ((pid = fork ()) < 0) {
        close (cmd[0]);
        close (cmd[1]);
        if (sfd >= 0)
            close (sfd);
        return -1;
    }
    if (pid == 0) {
        int keep[3] = { cmd[0], results_wfd, sfd };
        streams_close_except (keep, 3);
        streams_worker_init (sfd, limit);
        migrator_main (a, &g->spec, cmd[0], results_wfd, parent);
    }
    if (sfd >= 0)
        close (sfd);
    close (cmd[0]);
    g->cmd = cmd[1];
    g->pid = pid;
    /* what is on the GFS already (an earlier migrator's work) */
    (void) store_output_foreach (a->store, known_cb, &kc, &e);
    /* multipart uploads under way: each upload, then its parts */
    {
        char prefix[64];
        (void) snprintf (prefix, sizeof (prefix), "%u.%u/", g->job_id,
                         g->restart);
        kc.parts = false;
        (void) store_upload_foreach (a->store, prefix, uploads_cb, &kc, &e);
        if (kc.uploads)
            tier_log (LOG_NOTICE, "job %u: %d multipart upload(s) resume",
                      g->job_id, kc.uploads);
        kc.parts = true;
        (void) store_upload_foreach (a->store, prefix, uploads_cb, &kc, &e);
    }
    tier_log (LOG_INFO, "job %u: migrator %d for %d output director%s",
              g->job_id, (int) pid, g->spec.ndirs,
              g->spec.ndirs == 1 ? "y" : "ies");
    return 0;
}

/* -------------------------------------------------- the job's manifest */

/* In a forked child with the user's credentials: text to
 * SharedStateDir/users/USER/jobs/JOB.RESTART/outputs-NODE.json.
 */
static int manifest_as_user (const char *root, const struct store_job *j,
                             const char *node, const char *text)
{
    char sub[32], name[96];

    if (setgroups (0, NULL) < 0 || setresgid (j->gid, j->gid, j->gid) < 0
        || setresuid (j->uid, j->uid, j->uid) < 0)
        return -1;
    (void) snprintf (sub, sizeof (sub), "%u.%u", j->job_id, j->restart);
    (void) snprintf (name, sizeof (name), "outputs-%s.json", node);
    return tier_state_publish (root, j->user, j->uid, "jobs", sub, name,
                               text);
}

struct list_ctx {
    uint32_t job_id, restart;
    const struct mig *g;
    json_t *arr;
    int done, pending, failed, conflicts;
};

static int list_cb (const char *key, const void *val, size_t len, void *arg)
{
    struct list_ctx *lc = arg;
    char prefix[64];
    const char *rel, *st = "";
    json_int_t k = 0;
    json_error_t jerr;
    json_t *o;
    size_t plen;

    plen = (size_t) snprintf (prefix, sizeof (prefix), "%u.%u/", lc->job_id,
                              lc->restart);
    if (strncmp (key, prefix, plen) || !(rel = strchr (key + plen, '/')))
        return 0;
    rel++;
    if (!(o = json_loadb (val, len, 0, &jerr)))
        return 0;
    (void) json_unpack (o, "{s?s s?I}", "state", &st, "k", &k);
    if (!strcmp (st, "done"))
        lc->done++;
    else if (!strcmp (st, "failed"))
        lc->failed++;
    else if (!strcmp (st, "conflict"))
        lc->conflicts++;
    else
        lc->pending++;
    if (lc->arr) {
        json_object_set_new (o, "file", json_string (rel));
        if (lc->g && k >= 0 && k < lc->g->spec.ndirs) {
            char path[PATH_MAX * 2];
            (void) snprintf (path, sizeof (path), "%s/%s",
                             lc->g->spec.gfs[k], rel);
            json_object_set_new (o, "path", json_string (path));
            json_object_set_new (o, "dir", json_string (lc->g->spec.gfs[k]));
        }
        json_array_append (lc->arr, o);
    }
    json_decref (o);
    return 0;
}

/* Start writing the job's manifest, in a child with the user's
 * credentials (the GFS may take its time: the loop does not wait for it;
 * migrate_child reaps it).  -1 if it could not be started.
 */
static int manifest_start (struct agent *a, struct mig *g)
{
    struct list_ctx lc = { .job_id = g->job_id, .restart = g->restart,
                           .g = g, .arr = json_array () };
    struct store_job job;
    tier_error_t e;
    json_t *o;
    char *text;
    pid_t pid;

    if (!a->conf->shared_state_dir[0] || !lc.arr
        || store_job_get (a->store, g->job_id, g->restart, &job, &e) < 0) {
        if (a->conf->shared_state_dir[0])
            tier_log (LOG_WARNING, "job %u: no output manifest: %s",
                      g->job_id, lc.arr ? e.text : "out of memory");
        json_decref (lc.arr);
        return -1;
    }
    (void) store_output_foreach (a->store, list_cb, &lc, &e);
    o = json_pack ("{s:i s:I s:I s:s s:I s:i s:i s:i s:i s:o}", "format", 1,
                   "job_id", (json_int_t) g->job_id,
                   "restart", (json_int_t) g->restart, "node", a->node,
                   "time", (json_int_t) time (NULL), "done", lc.done,
                   "pending", lc.pending, "failed", lc.failed,
                   "conflicts", lc.conflicts, "outputs", lc.arr);
    text = o ? json_dumps (o, JSON_INDENT (1) | JSON_SORT_KEYS) : NULL;
    json_decref (o);
    if (!text) {
        tier_log (LOG_WARNING, "job %u: no output manifest: out of memory",
                  g->job_id);
        return -1;
    }
    if ((pid = fork ()) == 0)
        _exit (manifest_as_user (a->conf->shared_state_dir, &job, a->node,
                                 text) < 0 ? 1 : 0);
    free (text);
    if (pid < 0) {
        tier_log_error ("job %u: the output manifest", g->job_id);
        return -1;
    }
    g->manifest_pid = pid;
    return 0;
}

/* ------------------------------------------------------------ results */

#define STATUS_FAILURES_MAX 5

struct fail_ctx {
    const struct mig *g;
    size_t max;
    json_t *arr;
};

/* The first few (max) failed outputs of one job, with their reasons. */
static int fail_cb (const char *key, const void *val, size_t len, void *arg)
{
    struct fail_ctx *fc = arg;
    const char *st = NULL, *path = NULL, *why = NULL, *url = NULL;
    char prefix[64];
    json_error_t jerr;
    json_t *o;

    (void) snprintf (prefix, sizeof (prefix), "%u.%u/", fc->g->job_id,
                     fc->g->restart);
    if (strncmp (key, prefix, strlen (prefix))
        || json_array_size (fc->arr) >= fc->max
        || !(o = json_loadb (val, len, 0, &jerr)))
        return 0;
    /* an object output is named by its URL */
    if (json_unpack (o, "{s:s s?s s?s s?s}", "state", &st, "path", &path,
                     "error", &why, "url", &url) == 0 && url)
        path = url;
    if (st && !strcmp (st, "failed") && path)
        json_array_append_new (fc->arr, json_pack ("{s:s s:s}", "path", path,
                                                   "error", why ? why : ""));
    json_decref (o);
    return 0;
}

static void answer (struct agent *a, struct mig *g, struct waiter_m *w,
                    bool timed_out)
{
    json_t *o = json_pack ("{s:I s:i s:i s:i s:b}", "job_id",
                           (json_int_t) g->job_id, "pending", g->pending,
                           "failed", g->failed, "conflicts", g->conflicts,
                           "timed_out", timed_out);
    char *s;

    if (o && g->failed) {
        /* the first file that failed, and why: for the job's stderr and
         * its record */
        struct fail_ctx fc = { .g = g, .max = 1, .arr = json_array () };
        tier_error_t e;
        json_t *f;
        if (fc.arr)
            (void) store_output_foreach (a->store, fail_cb, &fc, &e);
        if ((f = json_array_get (fc.arr, 0))) {
            json_object_set (o, "first_path", json_object_get (f, "path"));
            json_object_set (o, "first_error", json_object_get (f, "error"));
        }
        json_decref (fc.arr);
    }
    s = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    w->c->waiting--;
    server_reply (a, w->c, w->msgid, s);
}

static void outbox_remove (struct agent *a, struct mig *g)
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

static void mig_free (struct mig *g)
{
    struct mig **pp = &migs;

    while (*pp && *pp != g)
        pp = &(*pp)->next;
    if (*pp)
        *pp = g->next;
    aw_drop (g);
    if (g->cmd >= 0)
        close (g->cmd);
    while (g->waiters) {
        struct waiter_m *w = g->waiters;
        g->waiters = w->next;
        free (w);
    }
    free (g);
}

/* Before the write cache goes: every regular file in it must have
 * reached the GFS at its size (or be in conflict, kept in the manifest).
 * The agent looks for itself, as root, read-only.
 */
struct verify_ctx {
    struct agent *a;
    struct mig *g;
    int k;
    int missing;
    char first[PATH_MAX];
};

static bool output_recorded (struct agent *a, struct mig *g, int k,
                             const char *rel, off_t size)
{
    char key[PATH_MAX + 64];
    bool ok = false;

    (void) snprintf (key, sizeof (key), "%u.%u/%d/%s", g->job_id,
                     g->restart, k, rel);
    {
        char *val = NULL;
        size_t vlen = 0;
        tier_error_t e;
        if (store_output_get (a->store, key, &val, &vlen, &e) == 0) {
            json_error_t jerr;
            json_t *o = json_loadb (val, vlen, 0, &jerr);
            const char *st = NULL;
            json_int_t sz = -1;
            if (o && json_unpack (o, "{s:s s?I}", "state", &st, "size",
                                  &sz) == 0)
                ok = !strcmp (st, "conflict")
                     || (!strcmp (st, "done") && sz == (json_int_t) size);
            json_decref (o);
            free (val);
        }
    }
    return ok;
}

static void verify_walk (struct verify_ctx *vc, int dfd, const char *rel,
                         int depth)
{
    int fd = openat (dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct dirent *de;
    DIR *d;

    if (fd < 0 || depth > 128 || !(d = fdopendir (fd))) {
        if (fd >= 0)
            close (fd);
        vc->missing++;                  /* cannot tell: keep it */
        return;
    }
    while ((de = readdir (d))) {
        char sub[PATH_MAX];
        struct stat st;
        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        (void) snprintf (sub, sizeof (sub), "%s%s%s", rel, rel[0] ? "/" : "",
                         de->d_name);
        if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISDIR (st.st_mode)) {
            int sfd = openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY
                              | O_NOFOLLOW | O_CLOEXEC);
            if (sfd >= 0) {
                verify_walk (vc, sfd, sub, depth + 1);
                close (sfd);
            }
        }
        else if (S_ISREG (st.st_mode)
                 && !output_recorded (vc->a, vc->g, vc->k, sub, st.st_size)) {
            if (!vc->missing++)
                (void) snprintf (vc->first, sizeof (vc->first), "%s", sub);
        }
    }
    closedir (d);
}

static int outbox_missing (struct agent *a, struct mig *g, char *first,
                           size_t size)
{
    struct verify_ctx vc = { .a = a, .g = g };
    char path[PATH_MAX];

    for (int k = 0; k < g->spec.ndirs; k++) {
        int fd;
        (void) snprintf (path, sizeof (path), "%.2048s/.outbox/%u.%u/%d/upper",
                         a->conf->nvdimm_dir, g->job_id, g->restart, k);
        if ((fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                        | O_CLOEXEC)) < 0)
            continue;
        vc.k = k;
        verify_walk (&vc, fd, "", 0);
        close (fd);
    }
    (void) snprintf (first, size, "%s", vc.first);
    return vc.missing;
}

/* Settle waiters; a finished job whose outputs all reached the GFS (or
 * are in conflict, which retrying cannot change) is done: its manifest
 * is written -- before any waiter hears that everything arrived (the
 * epilog is one: afterok dependents find the manifest) --, then its
 * migrator is stopped and its outbox removed.
 */
static void settle (struct agent *a, struct mig *g)
{
    int64_t now = tier_now_ms ();
    struct waiter_m **pp = &g->waiters;
    bool clean = g->pending == 0 && g->failed == 0 && g->seq_done
                 && g->seq_done == g->seq_sent;
    bool ready;

    if (g->ended && clean && !g->manifest_done && !g->manifest_pid) {
        char first[PATH_MAX];
        int missing = outbox_missing (a, g, first, sizeof (first));
        if (missing) {
            /* never drop what did not arrive: look again */
            tier_log (LOG_ERR, "job %u: %d file(s) of its write cache (%s, "
                      "...) have no record of reaching the GFS: kept",
                      g->job_id, missing, first);
            g->seq_done = 0;
            (void) mig_send (g, "SYNC %u", ++g->seq_sent);
            clean = false;
        }
        else if (manifest_start (a, g) < 0)
            g->manifest_done = true;    /* logged, or no SharedStateDir */
    }
    ready = clean && (!g->ended || g->manifest_done);
    while (*pp) {
        struct waiter_m *w = *pp;
        if ((ready && w->seq <= g->seq_done) || now >= w->deadline_ms) {
            *pp = w->next;
            answer (a, g, w, !clean);
            free (w);
        }
        else
            pp = &w->next;
    }
    if (g->ended && ready && !g->waiters) {
        (void) mig_send (g, "QUIT");
        outbox_remove (a, g);
        tier_log (LOG_INFO, "job %u: every output is on the GFS (%d in "
                  "conflict, kept in the manifest)", g->job_id,
                  g->conflicts);
        if (g->pid > 0)
            g->pid = -g->pid;           /* reaped later */
        mig_free (g);
    }
}

/* The record of an output, parsed (NULL if none). */
static json_t *record_get (struct agent *a, struct mig *g, int k,
                           const char *rel)
{
    char key[PATH_MAX + 64], *val = NULL;
    json_error_t jerr;
    tier_error_t e;
    size_t vlen = 0;
    json_t *o;

    (void) snprintf (key, sizeof (key), "%u.%u/%d/%s", g->job_id, g->restart,
                     k, rel);
    if (store_output_get (a->store, key, &val, &vlen, &e) < 0)
        return NULL;
    o = json_loadb (val, vlen, 0, &jerr);
    free (val);
    return o;
}

/* Drop the upload records of one object output (rel escaped, as the
 * migrator sent it). */
static void uploads_drop (struct agent *a, struct mig *g, int k,
                          const char *erel)
{
    char prefix[PATH_MAX * 3 + 64];
    tier_error_t e;

    (void) snprintf (prefix, sizeof (prefix), "%u.%u/%d/%s ", g->job_id,
                     g->restart, k, erel);
    if (store_upload_delete (a->store, prefix, &e) < 0)
        tier_log (LOG_ERR, "uploads of job %u: %s", g->job_id, e.text);
}

/* The migrator's reports on object outputs: I (an upload begins), M (a
 * multipart upload was created), P (one of its parts is there), X (it is
 * gone), O (the object is published). */
static void on_object_result (struct agent *a, struct mig *g, char type,
                              const char *line, const struct store_job *job)
{
    char rel[PATH_MAX * 3], raw[PATH_MAX], x[1024], v[1024];
    char key[PATH_MAX * 3 + 96];
    unsigned long long psize, size;
    long long mtime, us;
    unsigned n;
    int k, first;
    struct store_kv kv;
    tier_error_t e;
    json_t *o;

    switch (type) {
        case 'I':
            if (sscanf (line, "%d %s", &k, rel) != 2 || k < 0
                || k >= g->spec.ndirs || unesc (rel, raw, sizeof (raw)) < 0)
                return;
            /* the key is this job's from now on, even if this upload
             * fails (parts and counts of a multipart one are kept) */
            o = record_get (a, g, k, raw);
            if (!o || !json_is_object (o)) {
                json_decref (o);
                o = json_object ();
            }
            json_object_set_new (o, "state", json_string ("uploading"));
            json_object_set_new (o, "k", json_integer (k));
            json_object_set_new (o, "claimed", json_true ());
            json_object_set_new (o, "time", json_integer (time (NULL)));
            json_object_del (o, "error");
            json_object_del (o, "errno");
            json_object_del (o, "sha256");      /* of an older version */
            record (a, g, k, raw, o);
            return;
        case 'M':
            if (sscanf (line, "%d %llu %llu %lld %1023s %s", &k, &psize,
                        &size, &mtime, x, rel) != 6 || k < 0
                || k >= g->spec.ndirs || unesc (rel, raw, sizeof (raw)) < 0
                || unesc (x, v, sizeof (v)) < 0 || !psize)
                return;
            uploads_drop (a, g, k, rel);        /* an older upload's */
            {
                json_t *u = json_pack ("{s:s s:I s:I s:I}", "upload_id", v,
                                       "part_size", (json_int_t) psize,
                                       "size", (json_int_t) size,
                                       "mtime_ns", (json_int_t) mtime);
                char *text = u ? json_dumps (u, JSON_COMPACT) : NULL;
                json_decref (u);
                (void) snprintf (key, sizeof (key), "%u.%u/%d/%s u",
                                 g->job_id, g->restart, k, rel);
                kv.key = key;
                kv.val = text;
                if (text && store_upload_apply (a->store, &kv, 1, &e) < 0)
                    tier_log (LOG_ERR, "uploads of job %u: %s", g->job_id,
                              e.text);
                free (text);
            }
            if ((o = record_get (a, g, k, raw))) {
                json_object_set_new (o, "parts", json_integer (
                    (json_int_t) (size ? (size + psize - 1) / psize : 1)));
                json_object_set_new (o, "parts_done", json_integer (0));
                record (a, g, k, raw, o);
            }
            return;
        case 'P':
            if (sscanf (line, "%d %u %1023s %s", &k, &n, x, rel) != 4
                || k < 0 || k >= g->spec.ndirs
                || unesc (rel, raw, sizeof (raw)) < 0
                || unesc (x, v, sizeof (v)) < 0)
                return;
            (void) snprintf (key, sizeof (key), "%u.%u/%d/%s p%05u",
                             g->job_id, g->restart, k, rel, n);
            kv.key = key;
            kv.val = v;
            if (store_upload_apply (a->store, &kv, 1, &e) < 0)
                tier_log (LOG_ERR, "uploads of job %u: %s", g->job_id,
                          e.text);
            if ((o = record_get (a, g, k, raw))) {
                json_int_t done = json_integer_value (
                    json_object_get (o, "parts_done"));
                json_object_set_new (o, "parts_done",
                                     json_integer (done + 1));
                record (a, g, k, raw, o);
            }
            return;
        case 'X':
            if (sscanf (line, "%d %s", &k, rel) == 2 && k >= 0
                && k < g->spec.ndirs)
                uploads_drop (a, g, k, rel);
            return;
        case 'O':
            if (sscanf (line, "%d %llu %47s %79s %lld %d %1023s %s", &k,
                        &size, v, x, &us, &first, key, rel) != 8
                || k < 0 || k >= g->spec.ndirs || us < 0
                || unesc (rel, raw, sizeof (raw)) < 0)
                return;
            {
                char etag[1024];
                if (unesc (key, etag, sizeof (etag)) < 0 || !strcmp (etag,
                                                                     "-"))
                    etag[0] = '\0';
                json_t *old = record_get (a, g, k, raw), *o2;
                uploads_drop (a, g, k, rel);
                o2 = json_pack ("{s:s s:i s:I s:s s:b s:b s:s s:s s:I}",
                                "state", "done", "k", k, "size",
                                (json_int_t) size, "sha256", x, "ours", 1,
                                "claimed", 1, "etag", etag, "mtime", v,
                                "time", (json_int_t) time (NULL));
                /* a multipart upload: how many parts it took */
                if (o2 && old && json_object_get (old, "parts"))
                    json_object_set (o2, "parts", json_object_get (old,
                                                                   "parts"));
                json_decref (old);
                record (a, g, k, raw, o2);
            }
            if (job) {
                /* as for the GFS, but these bytes are not GFS bytes */
                g->out_us += (uint64_t) us;
                if (first)
                    ctr_add (a, job, TIER_ROLE_ENDPOINT,
                             TIER_CTR_STAGE_OUT_FILES, 1);
                ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_STAGE_OUT_MS,
                         g->out_us / 1000);
                g->out_us %= 1000;
                ctr_add (a, job, TIER_ROLE_ENDPOINT,
                         TIER_CTR_STAGE_OUT_BYTES, (uint64_t) size);
            }
            return;
    }
}

static void on_result (struct agent *a, char *line)
{
    unsigned job_id, restart;
    char type = 0;
    int off = 0;
    struct mig *g;
    struct store_job job;
    tier_error_t e;
    bool have_job;

    if (sscanf (line, "%u %u %c %n", &job_id, &restart, &type, &off) < 3
        || !(g = mig_find (job_id, restart)))
        return;
    have_job = store_job_get (a->store, job_id, restart, &job, &e) == 0;
    line += off;
    switch (type) {
        case 'I':
        case 'M':
        case 'P':
        case 'X':
        case 'O':
            on_object_result (a, g, type, line, have_job ? &job : NULL);
            break;
        case 'R':
            break;
        case 'E':
            tier_log (LOG_ERR, "job %u: migrator: %s", job_id, line);
            break;
        case 'D': {
            int k, ours, first;
            long long size, gsize, us;
            unsigned long ino;
            char sha[80], gm[48], gc[48], rel[PATH_MAX * 3], raw[PATH_MAX];
            if (sscanf (line, "%d %lld %79s %d %lu %lld %47s %47s %lld %d %s",
                        &k, &size, sha, &ours, &ino, &gsize, gm, gc, &us,
                        &first, rel) != 11
                || unesc (rel, raw, sizeof (raw)) < 0 || us < 0)
                break;
            record (a, g, k, raw, json_pack (
                "{s:s s:i s:I s:s s:b s:I s:I s:s s:s s:s s:I}",
                "state", "done", "k", k, "size", (json_int_t) size,
                "sha256", sha, "ours", ours, "ino", (json_int_t) ino,
                "gfs_size", (json_int_t) gsize, "gfs_mtime", gm,
                "gfs_ctime", gc, "mtime", gm, "time",
                (json_int_t) time (NULL)));
            if (have_job) {
                /* files: outputs, each once; bytes and time: every
                 * migration (whole milliseconds, the rest carried) */
                g->out_us += (uint64_t) us;
                if (first)
                    ctr_add (a, &job, TIER_ROLE_ENDPOINT,
                             TIER_CTR_STAGE_OUT_FILES, 1);
                ctr_add (a, &job, TIER_ROLE_ENDPOINT,
                         TIER_CTR_STAGE_OUT_MS, g->out_us / 1000);
                g->out_us %= 1000;
                ctr_add (a, &job, TIER_ROLE_ENDPOINT,
                         TIER_CTR_STAGE_OUT_BYTES, (uint64_t) size);
                ctr_add (a, &job, TIER_ROLE_ENDPOINT,
                         TIER_CTR_GFS_BYTES_WRITTEN, (uint64_t) size);
                /* on the GFS: the temporary's create and its rename */
                ctr_add (a, &job, TIER_ROLE_ENDPOINT,
                         TIER_CTR_GFS_META_OPS, 2);
            }
            break;
        }
        case 'F': {
            int k, err, first;
            char rel[PATH_MAX * 3], raw[PATH_MAX];
            int n = 0;
            if (sscanf (line, "%d %d %d %s %n", &k, &err, &first, rel,
                        &n) < 4
                || unesc (rel, raw, sizeof (raw)) < 0)
                break;
            if (have_job && first)
                ctr_add (a, &job, TIER_ROLE_ENDPOINT, TIER_CTR_FAILURES, 1);
            {
                json_t *o = json_pack ("{s:s s:i s:i s:s s:I}", "state",
                                       "failed", "k", k, "errno", err,
                                       "error", line + n, "time",
                                       (json_int_t) time (NULL));
                json_t *old = k >= 0 && k < g->spec.ndirs
                              && g->spec.url[k][0]
                              ? record_get (a, g, k, raw) : NULL;
                /* an object key this job claimed stays claimed */
                if (o && old && json_is_true (json_object_get (old,
                                                               "claimed")))
                    json_object_set_new (o, "claimed", json_true ());
                json_decref (old);
                record (a, g, k, raw, o);
            }
            if (k >= 0 && k < g->spec.ndirs && g->spec.url[k][0])
                tier_log (LOG_WARNING, "job %u: %s/%s did not reach its "
                          "object store (%s): %s (kept, retried)", job_id,
                          g->spec.gfs[k], raw, g->spec.url[k], line + n);
            else
                tier_log (LOG_WARNING, "job %u: %s/%s did not reach the "
                          "GFS: %s (kept, retried)", job_id,
                          k < g->spec.ndirs ? g->spec.gfs[k] : "?", raw,
                          line + n);
            break;
        }
        case 'C': {
            int k;
            char rel[PATH_MAX * 3], raw[PATH_MAX], se[PATH_MAX * 6];
            char side[PATH_MAX * 2], why[PATH_MAX * 3];
            if (sscanf (line, "%d %s %s", &k, rel, se) != 3
                || unesc (rel, raw, sizeof (raw)) < 0
                || unesc (se, side, sizeof (side)) < 0)
                break;
            if (k >= 0 && k < g->spec.ndirs && g->spec.url[k][0]) {
                struct tier_url *pre, *u = NULL;
                if ((pre = tier_url_parse (g->spec.url[k], &e)))
                    u = tier_url_child (pre, side, &e);
                (void) snprintf (why, sizeof (why), "the object existed "
                                 "before the job, or changed since its "
                                 "upload (another writer): not "
                                 "overwritten; this job's version is at %s",
                                 u ? u->text : "?");
                tier_url_destroy (u);
                tier_url_destroy (pre);
                uploads_drop (a, g, k, rel);
            }
            else if (strcmp (side, "-"))
                (void) snprintf (why, sizeof (why), "the GFS file changed "
                                 "during the job (another writer): not "
                                 "overwritten; this job's version is in "
                                 "%s/%s", k < g->spec.ndirs ? g->spec.gfs[k]
                                 : "?", side);
            else
                (void) snprintf (why, sizeof (why), "the GFS file changed "
                                 "during the job (another writer): not "
                                 "overwritten; this job's version could not "
                                 "be saved beside it");
            record (a, g, k, raw, json_pack (
                "{s:s s:i s:s s:I}", "state", "conflict", "k", k, "error",
                why, "time", (json_int_t) time (NULL)));
            tier_log (LOG_WARNING, "job %u: conflict on %s/%s: %s", job_id,
                      k < g->spec.ndirs ? g->spec.gfs[k] : "?", raw, why);
            if (have_job)
                ctr_add (a, &job, TIER_ROLE_ENDPOINT, TIER_CTR_CONFLICTS, 1);
            break;
        }
        case 'U': {
            int k;
            char rel[PATH_MAX * 3], raw[PATH_MAX];
            if (sscanf (line, "%d %s", &k, rel) == 2
                && unesc (rel, raw, sizeof (raw)) == 0) {
                record (a, g, k, raw, NULL);
                if (k >= 0 && k < g->spec.ndirs && g->spec.url[k][0])
                    uploads_drop (a, g, k, rel);
            }
            break;
        }
        case 'S': {
            unsigned seq;
            int p, f, c;
            if (sscanf (line, "%u %d %d %d", &seq, &p, &f, &c) != 4)
                break;
            g->seq_done = seq;
            g->pending = p;
            g->failed = f;
            g->conflicts = c;
            settle (a, g);
            break;
        }
    }
}

static void results_read (struct agent *a)
{
    for (;;) {
        ssize_t n = read (results_rfd, rbuf + rlen, sizeof (rbuf) - 1 - rlen);
        char *nl;
        if (n <= 0)
            break;
        rlen += (size_t) n;
        rbuf[rlen] = '\0';
        while ((nl = strchr (rbuf, '\n'))) {
            *nl = '\0';
            on_result (a, rbuf);
            rlen -= (size_t) (nl + 1 - rbuf);
            memmove (rbuf, nl + 1, rlen + 1);
        }
        if (rlen >= sizeof (rbuf) - 1)
            rlen = 0;
    }
}

static unsigned sync_now (struct mig *g)
{
    if (g->seq_sent == g->seq_done || !g->seq_sent)
        if (mig_send (g, "SYNC %u", g->seq_sent + 1) == 0)
            g->seq_sent++;
    return g->seq_sent;
}

bool migrate_child (struct agent *a, pid_t pid, int status)
{
    for (struct mig *g = migs; g; g = g->next)
        if (g->manifest_pid == pid) {
            struct store_job job;
            tier_error_t e;
            g->manifest_pid = 0;
            g->manifest_done = true;
            if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
                tier_log (LOG_WARNING, "job %u: the output manifest could "
                          "not be written to %s/users/%s/jobs", g->job_id,
                          a->conf->shared_state_dir,
                          store_job_get (a->store, g->job_id, g->restart,
                                         &job, &e) == 0 ? job.user : "?");
            settle (a, g);              /* may free g */
            return true;
        }
        else if (g->pid == pid) {
            results_read (a);
            tier_log (LOG_WARNING, "job %u: the migrator ended (status %d); "
                      "restarting it", g->job_id, status);
            if (g->cmd >= 0)
                close (g->cmd);
            g->cmd = -1;
            g->pid = 0;
            g->seq_done = g->seq_sent = 0;
            g->spec.resumed = true;
            g->restart_after_ms = tier_now_ms () + 2000;
            return true;
        }
    return false;
}

void migrate_tick (struct agent *a)
{
    int64_t now = tier_now_ms ();
    struct mig *g, *next;

    for (g = migs; g; g = next) {
        next = g->next;
        if (!g->pid && now >= g->restart_after_ms && mig_spawn (a, g) < 0)
            g->restart_after_ms = now + 10000;
        if (!g->pid)
            continue;
        /* waiters, and jobs that ended with outputs left: keep syncing
         * (each sync retries what failed, past its backoff) */
        if (g->waiters || g->ended)
            (void) sync_now (g);
        settle (a, g);
    }
}

/* ---------------------------------------------------------- requests */

/* dirs[K] and urls[K] (optional, "" for the GFS) of a request or of an
 * outbox's dirs.json (an object {dirs, urls}, or the array of dirs that
 * outboxes held before object stores). */
static int parse_dirs (json_t *dirs, json_t *urls, struct mspec *s,
                       tier_error_t *error)
{
    size_t i;
    json_t *v;

    if (json_is_object (dirs)) {
        urls = json_object_get (dirs, "urls");
        dirs = json_object_get (dirs, "dirs");
    }
    if (urls && (!json_is_array (urls)
                 || json_array_size (urls) != json_array_size (dirs))) {
        errno = EINVAL;
        return tier_errprintf (error, "'urls' must have one URL (or \"\") "
                               "per directory");
    }
    json_array_foreach (urls, i, v) {
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
        if (i < DIRS_MAX)
            (void) snprintf (s->url[i], sizeof (s->url[i]), "%s", u);
    }

    if (!json_is_array (dirs) || json_array_size (dirs) == 0
        || json_array_size (dirs) > DIRS_MAX) {
        errno = EINVAL;
        return tier_errprintf (error, "'dirs' must list 1..%d directories",
                               DIRS_MAX);
    }
    json_array_foreach (dirs, i, v) {
        const char *d = json_string_value (v);
        char norm[PATH_MAX];
        if (!d || d[0] != '/' || tier_path_normalize (d, norm, sizeof (norm))
            < 0 || strcmp (norm, d)) {
            errno = EINVAL;
            return tier_errprintf (error, "'dirs' must hold normalised "
                                   "absolute paths");
        }
        (void) snprintf (s->gfs[i], sizeof (s->gfs[i]), "%s", d);
    }
    s->ndirs = (int) json_array_size (dirs);
    return 0;
}

static int outbox_write_dirs (struct agent *a, const struct mig *g)
{
    char path[PATH_MAX];
    json_t *arr = json_array (), *urls = json_array (), *o = NULL;
    int rc;

    for (int k = 0; arr && urls && k < g->spec.ndirs; k++) {
        json_array_append_new (arr, json_string (g->spec.gfs[k]));
        json_array_append_new (urls, json_string (g->spec.url[k]));
    }
    (void) snprintf (path, sizeof (path), "%.2048s/.outbox/%u.%u/dirs.json",
                     a->conf->nvdimm_dir, g->job_id, g->restart);
    if (arr && urls)
        o = json_pack ("{s:O s:O}", "dirs", arr, "urls", urls);
    rc = o ? json_dump_file (o, path, JSON_COMPACT) : -1;
    json_decref (o);
    json_decref (arr);
    json_decref (urls);
    return rc;
}

static struct mig *mig_new (struct agent *a, const struct store_job *job,
                            const struct mspec *s)
{
    struct mig *g = calloc (1, sizeof (*g));

    if (!g)
        return NULL;
    g->job_id = job->job_id;
    g->restart = job->restart;
    g->uid = job->uid;
    g->cmd = -1;
    g->spec = *s;
    g->spec.job_id = job->job_id;
    g->spec.restart = job->restart;
    g->spec.uid = job->uid;
    g->spec.gid = job->gid;
    g->spec.job_start = job->registered;
    g->ended = job->state != STORE_JOB_RUNNING;
    g->next = migs;
    migs = g;
    return g;
}

/* job.stageout {job_id, restart, dirs: [DIR...]} (root, from the plugin
 * once the job's output overlays are mounted on this node): start the
 * job's migrator.  dirs[K] is the GFS directory of .outbox/JOB.RESTART/K.
 */
json_t *op_job_stageout (struct agent *a, struct conn *c, json_t *req,
                         tier_error_t *error)
{
    json_int_t job_id = 0, restart = 0;
    struct store_job job;
    struct mspec s;
    struct mig *g;

    memset (&s, 0, sizeof (s));
    if (json_unpack (req, "{s:I s:I}", "job_id", &job_id, "restart",
                     &restart) < 0 || job_id <= 0 || restart < 0
        || job_id > UINT32_MAX || restart > UINT32_MAX) {
        errno = EINVAL;
        tier_errprintf (error, "job.stageout needs 'job_id' and 'restart'");
        return NULL;
    }
    if (parse_dirs (json_object_get (req, "dirs"),
                    json_object_get (req, "urls"), &s, error) < 0
        || store_job_get (a->store, (uint32_t) job_id, (uint32_t) restart,
                          &job, error) < 0)
        return NULL;
    if (!(g = mig_find (job.job_id, job.restart))) {
        if (!(g = mig_new (a, &job, &s))) {
            errno = ENOMEM;
            tier_errprintf (error, "out of memory");
            return NULL;
        }
        if (outbox_write_dirs (a, g) < 0)
            tier_log (LOG_WARNING, "job %u: cannot record its output "
                      "directories in the outbox", g->job_id);
        for (int k = 0; k < g->spec.ndirs; k++)
            aw_tree (a, g, k, "", 0);
        if (mig_spawn (a, g) < 0) {
            tier_log_error ("job %u: migrator", g->job_id);
            g->restart_after_ms = tier_now_ms () + 2000;
        }
    }
    return json_pack ("{s:I s:i}", "job_id", job_id, "migrator",
                      (int) g->pid);
}

static struct mig *mig_for_caller (struct agent *a, struct conn *c,
                                   json_t *req, tier_error_t *error)
{
    json_int_t job_id = 0;
    struct mig *found = NULL;

    if (json_unpack (req, "{s:I}", "job_id", &job_id) < 0 || job_id <= 0) {
        errno = EINVAL;
        tier_errprintf (error, "'job_id' is missing");
        return NULL;
    }
    for (struct mig *g = migs; g; g = g->next)
        if (g->job_id == (uint32_t) job_id
            && (!found || g->restart > found->restart))
            found = g;
    if (!found) {
        errno = ENOENT;
        tier_errprintf (error, "job %lld has no outputs in flight on node %s",
                        (long long) job_id, a->node);
        return NULL;
    }
    if (!agent_privileged (a, c->cred.uid) && found->uid != c->cred.uid) {
        errno = EPERM;
        tier_errprintf (error, "job %lld belongs to another user",
                        (long long) job_id);
        return NULL;
    }
    return found;
}

/* job.stageout_sync {job_id, timeout_ms?, wait?, flush?, end?}: publish
 * what the outputs hold now; with wait, answer once every output reached
 * the GFS, or when timeout_ms passed (the epilog's bound; tierctl wait and
 * flush).  With end (the epilog: root and SlurmUser only), the job has
 * ended on this node: the answer also waits for its manifest.  The job's
 * owner, root and SlurmUser.
 */
json_t *op_job_stageout_sync (struct agent *a, struct conn *c, json_t *req,
                              tier_error_t *error)
{
    json_int_t timeout = 0;
    struct waiter_m *w;
    struct mig *g;
    int wait = 1, flush = 0, end = 0;

    if (!(g = mig_for_caller (a, c, req, error)))
        return NULL;
    (void) json_unpack (req, "{s?I s?b s?b s?b}", "timeout_ms", &timeout,
                        "wait", &wait, "flush", &flush, "end", &end);
    if (end && !agent_privileged (a, c->cred.uid)) {
        errno = EPERM;
        tier_errprintf (error, "only the epilog ends a job");
        return NULL;
    }
    if (!(w = calloc (1, sizeof (*w)))) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    if (g->pid > 0) {
        /* a fresh sync, after the one in flight */
        if (g->seq_sent != g->seq_done
            || mig_send (g, "%s %u", flush ? "FLUSH" : "SYNC",
                         g->seq_sent + 1) < 0)
            w->seq = g->seq_sent + 1;
        else
            w->seq = ++g->seq_sent;
    }
    else
        w->seq = g->seq_sent + 1;
    w->c = c;
    w->msgid = c->req_id;
    w->deadline_ms = tier_now_ms () + (timeout > 0 ? timeout
                                        : (wait ? 86400000 : 0));
    w->next = g->waiters;
    g->waiters = w;
    c->waiting++;
    if (end)
        g->ended = true;
    return RPC_DEFERRED;
}

/* job.outputs {job_id}: the job's outputs on this node, with their state
 * (done with size and SHA-256, pending, failed and why, conflict).
 */
json_t *op_job_outputs (struct agent *a, struct conn *c, json_t *req,
                        tier_error_t *error)
{
    json_int_t job_id = 0;
    struct store_job job;
    struct list_ctx lc = { 0 };

    if (json_unpack (req, "{s:I}", "job_id", &job_id) < 0 || job_id <= 0
        || job_id > UINT32_MAX) {
        errno = EINVAL;
        tier_errprintf (error, "'job_id' is missing");
        return NULL;
    }
    if (store_job_latest (a->store, (uint32_t) job_id, &job, error) < 0)
        return NULL;
    if (!agent_privileged (a, c->cred.uid) && job.uid != c->cred.uid) {
        errno = EPERM;
        tier_errprintf (error, "job %lld belongs to another user",
                        (long long) job_id);
        return NULL;
    }
    lc.job_id = job.job_id;
    lc.restart = job.restart;
    lc.g = mig_find (job.job_id, job.restart);
    lc.arr = json_array ();
    if (lc.g == NULL) {
        /* finished: the directories are in the records' "dir" only if the
         * migrator is known; the manifest in SharedStateDir has them */
    }
    (void) store_output_foreach (a->store, list_cb, &lc, error);
    return json_pack ("{s:s s:I s:i s:i s:i s:i s:b s:o}", "node", a->node,
                      "job_id", job_id, "done", lc.done, "pending",
                      lc.pending, "failed", lc.failed, "conflicts",
                      lc.conflicts, "in_flight", lc.g != NULL, "outputs",
                      lc.arr);
}

/* The job ended on this node (job.end): once its outputs are all on the
 * GFS, its migrator stops and its outbox goes.
 */
void migrate_job_end (struct agent *a, const struct store_job *job)
{
    struct mig *g = mig_find (job->job_id, job->restart);

    if (g) {
        g->ended = true;
        (void) sync_now (g);
    }
}

void migrate_fini (struct agent *a)
{
    /* a migrator ends when its command pipe closes, as when the agent
     * exits; the outboxes stay for the next agent */
    while (migs)
        mig_free (migs);
}

void migrate_conn_gone (struct agent *a, struct conn *c)
{
    for (struct mig *g = migs; g; g = g->next) {
        struct waiter_m **pp = &g->waiters;
        while (*pp) {
            if ((*pp)->c == c) {
                struct waiter_m *w = *pp;
                *pp = w->next;
                free (w);
                c->waiting--;
            }
            else
                pp = &(*pp)->next;
        }
    }
}

/* The node's migrations; the files that failed (and why) only of the
 * caller's own jobs (all of them for root and SlurmUser).
 */
json_t *migrate_status_json (struct agent *a, uid_t uid)
{
    json_t *arr = json_array ();
    int pending = 0, failed = 0, conflicts = 0;

    for (struct mig *g = migs; g && arr; g = g->next) {
        json_t *o;
        pending += g->pending;
        failed += g->failed;
        conflicts += g->conflicts;
        o = json_pack ("{s:I s:i s:i s:i s:b s:i}", "job_id",
                       (json_int_t) g->job_id, "pending", g->pending,
                       "failed", g->failed, "conflicts", g->conflicts,
                       "ended", g->ended, "migrator", (int) g->pid);
        if (o && g->failed && (g->uid == uid || agent_privileged (a, uid))) {
            struct fail_ctx fc = { .g = g, .max = STATUS_FAILURES_MAX,
                                   .arr = json_array () };
            tier_error_t e;
            if (fc.arr)
                (void) store_output_foreach (a->store, fail_cb, &fc, &e);
            json_object_set_new (o, "failures", fc.arr ? fc.arr
                                                       : json_array ());
        }
        json_array_append_new (arr, o);
    }
    return json_pack ("{s:i s:i s:i s:o}", "pending", pending, "failed",
                      failed, "conflicts", conflicts, "jobs",
                      arr ? arr : json_array ());
}

/* At start: a pipe for the migrators' reports, and a migrator for every
 * outbox a previous life left (their outputs resume).
 */
int migrate_init (struct agent *a)
{
    int fds[2];
    char path[PATH_MAX];
    struct dirent *de;
    DIR *d;

    if (pipe2 (fds, O_CLOEXEC) < 0 || fcntl (fds[0], F_SETFL, O_NONBLOCK) < 0)
        return -1;
    results_rfd = fds[0];
    results_wfd = fds[1];
    if (server_watch (a, results_rfd, results_read) < 0
        || (ifd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC)) < 0
        || server_watch (a, ifd, on_inotify) < 0)
        return -1;
    if (!a->nvdimm_ok || !a->conf->nvdimm_dir[0])
        return 0;
    (void) snprintf (path, sizeof (path), "%.2048s/.outbox",
                     a->conf->nvdimm_dir);
    if (!(d = opendir (path)))
        return 0;
    while ((de = readdir (d))) {
        unsigned id, rst;
        char tail[4], dpath[PATH_MAX + 300];
        struct store_job job;
        tier_error_t e;
        struct mspec s;
        json_error_t jerr;
        json_t *dirs;
        struct mig *g;

        if (sscanf (de->d_name, "%u.%u%3s", &id, &rst, tail) != 2)
            continue;
        (void) snprintf (dpath, sizeof (dpath), "%s/%s/dirs.json", path,
                         de->d_name);
        memset (&s, 0, sizeof (s));
        if (store_job_get (a->store, id, rst, &job, &e) < 0
            || !(dirs = json_load_file (dpath, 0, &jerr))) {
            tier_log (LOG_WARNING, "outbox %s/%s: no job record or no "
                      "directories: left for the administrator", path,
                      de->d_name);
            continue;
        }
        if (parse_dirs (dirs, NULL, &s, &e) == 0
            && (g = mig_new (a, &job, &s))) {
            tier_log (LOG_NOTICE, "job %u: resuming its outputs", id);
            g->spec.resumed = true;
            for (int k = 0; k < g->spec.ndirs; k++)
                aw_tree (a, g, k, "", 0);
            if (mig_spawn (a, g) < 0)
                g->restart_after_ms = tier_now_ms () + 2000;
            else
                (void) sync_now (g);
        }
        json_decref (dirs);
    }
    closedir (d);
    return 0;
}

void migrate_gauges (struct agent *a, uint32_t batch, struct tier_counters *c)
{
    uint64_t pending = 0, failed = 0;

    for (struct mig *g = migs; g; g = g->next) {
        struct store_job job;
        tier_error_t e;
        if (batch != UINT32_MAX       /* UINT32_MAX: the whole node */
            && (store_job_get (a->store, g->job_id, g->restart, &job,
                               &e) < 0 || job.batch_id != batch))
            continue;
        pending += (uint64_t) g->pending;
        failed += (uint64_t) g->failed;
    }
    c->v[TIER_ROLE_ENDPOINT][TIER_CTR_MIGRATIONS_PENDING] = pending;
    c->v[TIER_ROLE_ENDPOINT][TIER_CTR_MIGRATIONS_FAILED] = failed;
}
