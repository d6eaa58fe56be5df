/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrator.c - the migrator: the child that publishes a job's outputs
 *
 * One per job with outputs on the node, started by migrate.c through
 * child.c: root until its write caches are open (migrator_as_root), then
 * the job's user for good (TIER_CRED_DATA: the GFS is only ever written
 * with the user's credentials; a root-squashing GFS works, permissions
 * hold).  It dies with the agent: a migrator left behind would go on
 * publishing beside the restarted agent's, and see the new one's copies
 * as somebody else's.  It
 *
 *   - migrates a file shortly after it is closed after writing, or
 *     renamed into place (dirty, from the agent's inotify watch);
 *   - on sync (each step's end, the job's end, tierctl flush) walks the
 *     write caches and publishes exactly the names present then: files
 *     not yet migrated at their current version are copied, names it
 *     published that are gone from the upper (write-then-rename, deleted
 *     outputs) are removed again if they are still its version there;
 *     whiteouts (deleted GFS files) are ignored: tier never deletes a
 *     file it did not write;
 *   - retries failures (GFS full, permission denied, I/O errors) with
 *     backoff, keeping the data.
 *
 * Publishing itself is migrator_gfs.c's (to the GFS) and migrate_obj.c's
 * (DIR=URL).  Owns the migrator's loop, its commands and its list of
 * files; calls the copy engine, the GFS streams' worker side
 * (streams.h) and the channel (migrate_msg.h), nothing of the agent.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "holder.h"
#include "migrator.h"
#include "streams.h"

#define CMD_BURST 256          /* commands read before due files */
#define RECV_TIMEOUT_MS 30000  /* a begun message must come whole */
#define NOTED_TIMEOUT_MS 30000 /* the agent records a publishing within */
#define OUTBOX_LOCK_MS 10000   /* to wait for an earlier migrator's end */

/* ---------------------------------------------------------- its files */

bool migrator_ident_eq (const struct ident *a, const struct stat *st)
{
    return a->ino == st->st_ino && a->size == st->st_size
           && a->mtime.tv_sec == st->st_mtim.tv_sec
           && a->mtime.tv_nsec == st->st_mtim.tv_nsec
           && a->ctime.tv_sec == st->st_ctim.tv_sec
           && a->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

void migrator_ident_set (struct ident *a, const struct stat *st)
{
    a->ino = st->st_ino;
    a->size = st->st_size;
    a->mtime = st->st_mtim;
    a->ctime = st->st_ctim;
}

/* A version known from the agent's records (size and mtime only). */
static bool ident_known_eq (const struct ident *a, const struct stat *st)
{
    return a->ino == 0 && a->size == st->st_size
           && a->mtime.tv_sec == st->st_mtim.tv_sec
           && a->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

struct mfile *migrator_file (struct migrator *m, int k, const char *rel,
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
    f->state = MF_PENDING;
    f->next = m->files;
    m->files = f;
    return f;
}

void migrator_due (struct migrator *m, int k, const char *rel, int64_t delay)
{
    struct mfile *f = migrator_file (m, k, rel, true);

    if (f && (!f->due_ms || f->due_ms > tier_now_ms () + delay)) {
        f->due_ms = tier_now_ms () + delay;
        if (f->state != MF_CONFLICT)
            f->state = MF_PENDING;
    }
}

/* -------------------------------------------------------- its reports */

void migrator_tell (struct migrator *m, const struct migmsg *msg)
{
    if (migmsg_send (m->chan, msg) < 0) {
        /* the agent is gone; we die with it */
    }
    m->beat_last_ms = tier_now_ms ();
}

void migrator_beat (struct migrator *m)
{
    struct migmsg msg = { .type = MIGMSG_ALIVE };

    if (m && m->beat_ms > 0 && tier_now_ms () - m->beat_last_ms >= m->beat_ms)
        migrator_tell (m, &msg);
}

void migrator_progress (uint64_t done, uint64_t total, void *arg)
{
    (void) done;
    (void) total;
    migrator_beat (arg);
}

static void on_queued (void *arg, bool on)
{
    struct migmsg msg = { .type = MIGMSG_QUEUED, .on = on };

    migrator_tell (arg, &msg);
}

void migrator_take_stream (struct migrator *m)
{
    (void) streams_take (on_queued, m);
}

static void tell_error (struct migrator *m, const char *text)
{
    struct migmsg msg = { .type = MIGMSG_ERROR, .error = text };

    migrator_tell (m, &msg);
}

void migrator_fail (struct migrator *m, struct mfile *f, int err,
                    const char *text)
{
    struct migmsg msg = { .type = MIGMSG_FAILED,
                          .k = f->k,
                          .rel = f->rel,
                          .err = err > 0 ? err : EIO,
                          .error = text,
                          .first = !f->failing };

    f->backoff_ms = f->backoff_ms ? f->backoff_ms * 2 : 1000;
    if (f->backoff_ms > MIGRATOR_RETRY_MAX_MS)
        f->backoff_ms = MIGRATOR_RETRY_MAX_MS;
    f->due_ms = tier_now_ms () + f->backoff_ms;
    f->state = MF_FAILED;
    /* first: a failure to count; a retry failing again is not */
    migrator_tell (m, &msg);
    f->failing = true;
}

void migrator_gone (struct migrator *m, struct mfile *f)
{
    struct migmsg msg = { .type = MIGMSG_GONE, .k = f->k, .rel = f->rel };

    migrator_tell (m, &msg);
}

int migrator_sha256 (struct migrator *m, int fd, char hex[65])
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
        migrator_beat (m);
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

/* Gone from the job's view: no such name in the write cache, or a
 * whiteout over it (the name was published to the GFS, the lower layer,
 * and then renamed or deleted in the job). */
bool migrator_upper_gone (struct migrator *m, int k, const char *rel)
{
    struct stat st;

    if (fstatat (m->dirs[k].upperfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return S_ISCHR (st.st_mode) && st.st_rdev == makedev (0, 0);
    return errno == ENOENT;
}

/* ------------------------------------------------------------- walks */

/* Walk upper dir k below rel and mark every regular file not yet
 * published at its current version due (now).
 */
static void walk (struct migrator *m, int k, int dfd, const char *rel,
                  int depth)
{
    char sub[PATH_MAX];
    struct dirent *de;
    DIR *d;

    if (!(d = migrate_dir_open (dfd, depth)))
        return;
    while ((de = migrate_dir_next (d, rel, sub, sizeof (sub)))) {
        struct stat st;
        struct mfile *f;

        if (fstatat (dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISDIR (st.st_mode)) {
            int sfd = openat (dfd, de->d_name,
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sfd >= 0) {
                walk (m, k, sfd, sub, depth + 1);
                close (sfd);
            }
            continue;
        }
        /* whiteouts (0/0 character devices), fifos...: not outputs */
        if (!S_ISREG (st.st_mode))
            continue;
        m->held += (uint64_t) st.st_blocks * 512;
        f = migrator_file (m, k, sub, false);
        /* published at this very version: nothing to do; failed: its
         * retry is scheduled (a flush brings it forward) */
        if (f
            && ((f->published && f->state == MF_DONE
                 && migrator_ident_eq (&f->src, &st))
                || f->state == MF_FAILED))
            continue;
        migrator_due (m, k, sub, 0);
    }
    closedir (d);
}

/* scan: a new directory of the write cache, and what it holds. */
static void scan (struct migrator *m, int k, const char *rel)
{
    int dfd = tier_path_open_beneath (m->dirs[k].upperfd, rel,
                                      O_RDONLY | O_DIRECTORY, 0,
                                      TIER_BENEATH_NO_SYMLINKS);

    if (dfd >= 0) {
        walk (m, k, dfd, rel, 0);
        close (dfd);
    }
}

/* ------------------------------------------------------------ publish */

/* The file was renamed or deleted before it was migrated: nothing is
 * pending (a sync takes a published one off again). */
static void vanished (struct migrator *m, struct mfile *f)
{
    if (f->state == MF_FAILED && !f->published) {
        migrator_gone (m, f); /* its record goes */
        f->failing = false;
    }
    if (f->state == MF_PENDING || f->state == MF_FAILED)
        f->state = f->published ? MF_DONE : MF_GONE;
}

/* Migrate one file of the upper, to the GFS or to its object. */
static void migrate_one (struct migrator *m, struct mfile *f)
{
    struct mdir *d = &m->dirs[f->k];
    struct stat st;
    int src;

    f->due_ms = 0;
    /* only regular files are outputs: a whiteout (a GFS file the job
     * deleted: tier never deletes one), a fifo, a symlink are not */
    if (fstatat (d->upperfd, f->rel, &st, AT_SYMLINK_NOFOLLOW) == 0
        && !S_ISREG (st.st_mode)) {
        if (f->state != MF_DONE)
            f->state = MF_NOT_OUTPUT;
        return;
    }
    /* beneath the write cache, no symlink anywhere on the way */
    if ((src = tier_path_open_beneath (d->upperfd, f->rel,
                                       O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0,
                                       TIER_BENEATH_NO_SYMLINKS))
        < 0) {
        if (errno == ENOENT || errno == ELOOP)
            vanished (m, f);
        else
            migrator_fail (m, f, errno, strerror (errno));
        return;
    }
    if (fstat (src, &st) < 0 || !S_ISREG (st.st_mode))
        goto out;
    if (f->published && ident_known_eq (&f->src, &st)) {
        /* known from before a restart, unchanged: adopted */
        migrator_ident_set (&f->src, &st);
        f->state = MF_DONE;
        goto out;
    }
    if (f->published && f->state == MF_DONE && migrator_ident_eq (&f->src, &st))
        goto out; /* this version is published */
    if (d->url)
        migrate_obj_publish (m, f, src, &st);
    else
        migrator_gfs_publish (m, f, src, &st);
out:
    close (src);
}

/* Names published by this job whose file is gone from the upper: take
 * them off again, if they are still our version there.
 */
static void unpublish_gone (struct migrator *m)
{
    for (struct mfile *f = m->files; f; f = f->next) {
        if (m->dirs[f->k].url) {
            if ((f->published || f->claimed || f->up)
                && migrator_upper_gone (m, f->k, f->rel))
                migrate_obj_unpublish (m, f);
        }
        else if (f->published && f->ours
                 && migrator_upper_gone (m, f->k, f->rel))
            migrator_gfs_unpublish (m, f);
    }
}

static void do_sync (struct migrator *m, uint32_t seq, bool force)
{
    struct migmsg msg = { .type = MIGMSG_SYNCED, .seq = seq };
    int64_t now = tier_now_ms ();

    m->held = 0;
    for (int k = 0; k < m->ndirs; k++)
        walk (m, k, m->dirs[k].upperfd, "", 0);
    msg.size = (int64_t) m->held;
    if (force)
        for (struct mfile *f = m->files; f; f = f->next)
            if (f->state == MF_FAILED) {
                f->due_ms = now;
                f->backoff_ms = 0;
            }
    /* everything present now, at once; what failed waits for its backoff
     * unless this is a flush */
    for (struct mfile *f = m->files; f; f = f->next)
        if (f->due_ms && (force || f->state != MF_FAILED || f->due_ms <= now))
            migrate_one (m, f);
    unpublish_gone (m);
    for (struct mfile *f = m->files; f; f = f->next) {
        if (f->state == MF_PENDING)
            msg.pending++;
        else if (f->state == MF_FAILED)
            msg.failed++;
        else if (f->state == MF_CONFLICT)
            msg.conflicts++;
    }
    migrator_tell (m, &msg);
}

/* ----------------------------------------------------------- commands */

/* known: published to the GFS before a restart of the agent. */
static void known (struct migrator *m, const struct migmsg *c)
{
    struct mfile *f;

    if (m->dirs[c->k].url || !(f = migrator_file (m, c->k, c->rel, true)))
        return;
    f->published = true;
    f->ours = c->ours;
    f->state = MF_DONE;
    f->gfs.ino = (ino_t) c->ino;
    f->gfs.size = (off_t) c->gfs_size;
    f->gfs.mtime = c->gfs_mtime;
    f->gfs.ctime = c->gfs_ctime;
    /* the cached version: size and mtime (the upper's inode and ctime
     * are not worth keeping across a restart) */
    f->src.ino = 0;
    f->src.size = (off_t) c->size;
    f->src.mtime = c->mtime;
}

/* intent: a publishing the agent recorded before a restart. */
static void intent (struct migrator *m, const struct migmsg *c)
{
    struct mfile *f;

    if (m->dirs[c->k].url || !(f = migrator_file (m, c->k, c->rel, true))
        || strlen (c->sha256) != 64)
        return;
    f->pub.ino = (ino_t) c->ino;
    f->pub.gfs_size = (off_t) c->gfs_size;
    f->pub.size = (off_t) c->size;
    f->pub.mtime = c->mtime;
    f->pub.ours = c->ours;
    memcpy (f->pub.sha256, c->sha256, 65);
}

static void stash_push (struct migrator *m, int type, json_t *body)
{
    struct stashed *s = malloc (sizeof (*s));

    if (!s) {
        json_decref (body); /* a sync or dirty: the agent sends it again */
        return;
    }
    s->type = type;
    s->body = body;
    s->next = NULL;
    if (!m->stash_tail)
        m->stash_tail = &m->stash;
    *m->stash_tail = s;
    m->stash_tail = &s->next;
}

int migrator_intent (struct migrator *m, struct mfile *f,
                     const struct stat *tmp, const struct stat *st,
                     const char *sha256, bool ours)
{
    struct migmsg msg = { .type = MIGMSG_PUBLISHING,
                          .k = f->k,
                          .rel = f->rel,
                          .ours = ours,
                          .size = st->st_size,
                          .mtime = st->st_mtim,
                          .sha256 = sha256,
                          .ino = (int64_t) tmp->st_ino,
                          .gfs_size = tmp->st_size };
    int64_t deadline = tier_now_ms () + NOTED_TIMEOUT_MS;

    if (migmsg_send (m->chan, &msg) < 0)
        return errno ? errno : EPIPE;
    for (;;) {
        struct pollfd p = { m->chan, POLLIN, 0 };
        int64_t left = deadline - tier_now_ms ();
        struct migmsg c;
        tier_error_t e;
        json_t *body;
        int type, n;
        bool mine;

        if (left <= 0)
            return ETIMEDOUT;
        if ((n = poll (&p, 1, (int) left)) < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? ETIMEDOUT : errno;
        if (chmsg_recv (m->chan, &migmsg_proto, &type, &body, NULL, NULL, 0,
                        RECV_TIMEOUT_MS, &e)
            < 0)
            return EPIPE; /* the agent is gone: so are we, soon */
        if (type != MIGMSG_NOTED) {
            stash_push (m, type, body); /* after this file */
            continue;
        }
        mine = migmsg_unpack (type, body, MIGMSG_COMMAND, &c, &e) == 0
               && c.k == f->k && !strcmp (c.rel, f->rel);
        json_decref (body);
        if (!mine)
            continue; /* late, for a wait that gave up */
        f->pub.ino = tmp->st_ino;
        f->pub.gfs_size = tmp->st_size;
        f->pub.size = st->st_size;
        f->pub.mtime = st->st_mtim;
        f->pub.ours = ours;
        memcpy (f->pub.sha256, sha256, 65);
        return 0;
    }
}

/* One command (body is the caller's).  -1: quit. */
static int on_command (struct migrator *m, int type, json_t *body)
{
    struct migmsg c;
    tier_error_t e;

    if (migmsg_unpack (type, body, MIGMSG_COMMAND, &c, &e) < 0) {
        tell_error (m, e.text);
        return 0;
    }
    if (c.type != MIGMSG_SYNC && c.type != MIGMSG_QUIT
        && (c.k >= m->ndirs || strlen (c.rel) >= PATH_MAX)) {
        tell_error (m, "migrator channel: no such output directory, or a "
                       "name too long");
        return 0;
    }
    switch (c.type) {
        case MIGMSG_SYNC:
            do_sync (m, c.seq, c.flush);
            break;
        case MIGMSG_DIRTY:
            migrator_due (m, c.k, c.rel, MIGRATOR_SETTLE_MS);
            break;
        case MIGMSG_SCAN:
            scan (m, c.k, c.rel);
            break;
        case MIGMSG_QUIT:
            return -1;
        case MIGMSG_KNOWN:
            known (m, &c);
            break;
        case MIGMSG_INTENT:
            intent (m, &c);
            break;
        case MIGMSG_NOTED:
            break; /* late, for a wait that gave up */
        default:
            migrate_obj_resume (m, &c);
            break;
    }
    return 0;
}

/* What the agent knew when it started us, before any command. */
static void resume (struct migrator *m, const struct migmsg_batch *b)
{
    size_t off = 0;
    tier_error_t e;
    json_t *body;
    int type, r;

    while (b && (r = migmsg_batch_next (b, &off, &type, &body, &e)) != 0) {
        if (r < 0) {
            tell_error (m, e.text);
            continue;
        }
        (void) on_command (m, type, body);
        json_decref (body);
    }
}

/* The commands stashed while a publishing waited.  -1: quit. */
static int run_stash (struct migrator *m)
{
    int rc = 0;

    while (m->stash && rc == 0) {
        struct stashed *s = m->stash;
        if (!(m->stash = s->next))
            m->stash_tail = &m->stash;
        rc = on_command (m, s->type, s->body);
        json_decref (s->body);
        free (s);
    }
    return rc;
}

/* Read the commands that are there (at least one).  -1: quit, or the
 * agent is gone. */
static int read_commands (struct migrator *m)
{
    if (run_stash (m) < 0)
        return -1;
    for (int n = 0; n < CMD_BURST; n++) {
        struct pollfd p = { m->chan, POLLIN, 0 };
        tier_error_t e;
        json_t *body;
        int type, rc;

        if (n > 0 && (poll (&p, 1, 0) <= 0 || !p.revents))
            return 0;
        if (chmsg_recv (m->chan, &migmsg_proto, &type, &body, NULL, NULL, 0,
                        RECV_TIMEOUT_MS, &e)
            < 0) {
            if (errno != ECONNRESET && errno != ENODATA)
                tell_error (m, e.text);
            return -1;
        }
        rc = on_command (m, type, body);
        json_decref (body);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static void migrator_loop (struct migrator *m)
{
    for (;;) {
        struct pollfd p = { m->chan, POLLIN, 0 };
        int64_t next = -1, now = tier_now_ms ();
        int timeout;

        for (struct mfile *f = m->files; f; f = f->next)
            if (f->due_ms && (next < 0 || f->due_ms < next))
                next = f->due_ms;
        timeout = next < 0 ? -1 : (int) (next > now ? next - now : 0);
        if (m->beat_ms > 0 && (timeout < 0 || timeout > m->beat_ms))
            timeout = (int) m->beat_ms;
        if (m->stash)
            timeout = 0;
        if (poll (&p, 1, timeout) < 0 && errno != EINTR)
            return;
        if (m->stash && !p.revents && run_stash (m) < 0)
            return;
        if (p.revents && read_commands (m) < 0)
            return;
        now = tier_now_ms ();
        for (struct mfile *f = m->files; f; f = f->next)
            if (f->due_ms && f->due_ms <= now)
                migrate_one (m, f);
        migrator_beat (m);
    }
}

/* -------------------------------------------------------------- setup */

/* One writer per outbox, ever: a migrator of the job that is still
 * alive (its agent died a moment ago and its parent-death signal is on
 * its way, or it is stopped) holds the lock on the job's outbox until it
 * is gone; the new one waits for that, then gives up (the agent starts
 * it again later).  The descriptor stays open for the process's life. */
/* The job's outbox is written by one migrator at a time (holder.h): its
 * lock file, NvdimmDir/.outbox/JOB.RESTART/lock.  An earlier agent's
 * migrator still alive is ended; one that does not end in time (asleep
 * in the kernel on a stuck GFS) keeps the outbox, and this one exits
 * (MIGRATOR_EXIT_BUSY: the agent starts another later). */
static void outbox_lock (const struct migrate_spec *s,
                         const struct tier_conf *conf)
{
    int dfd = migrate_outbox_open (conf, s->job_id, s->restart, -1), fd;
    pid_t holder, ended;
    int wait_ms = OUTBOX_LOCK_MS;

    if (dfd < 0)
        return; /* no outbox: reported by migrator_main */
    fd = openat (dfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    close (dfd);
    if (fd < 0) {
        tier_log (LOG_ERR, "job %u: its outbox's lock: %s", s->job_id,
                  strerror (errno));
        _exit (MIGRATOR_EXIT_BUSY);
    }
    /* within StallTimeout: nothing is told while it waits */
    if (conf->stall_timeout > 0
        && conf->stall_timeout * 500 < (uint64_t) wait_ms)
        wait_ms = (int) conf->stall_timeout * 500;
    if (holder_lock (fd, "tierd-mig", wait_ms, &holder, &ended) == 0) {
        if (ended)
            tier_log (LOG_WARNING,
                      "job %u: ended migrator %d, left by an earlier "
                      "agent: it held the job's outbox",
                      s->job_id, (int) holder);
        return; /* held until this process ends */
    }
    tier_log (LOG_WARNING, "job %u: migrator %d still holds its outbox%s: %s",
              s->job_id, (int) holder, ended ? " (ended, not gone yet)" : "",
              strerror (errno));
    _exit (MIGRATOR_EXIT_BUSY);
}

int migrator_as_root (void *arg)
{
    struct migrator_arg *ma = arg;
    const struct migrate_spec *s = ma->spec;

    outbox_lock (s, ma->conf);
    for (int k = 0; k < s->ndirs; k++)
        /* a write cache that is gone is reported once the channel can
         * say so (migrator_main) */
        ma->upperfd[k] = migrate_outbox_open (ma->conf, s->job_id, s->restart,
                                              k);
    return 0;
}

/* Output directory k on the GFS, opened as the user beneath the allowed
 * root that holds it. */
static int setup_gfs (struct migrator *m, int k)
{
    struct mdir *d = &m->dirs[k];
    const char *root = NULL;
    char text[PATH_MAX + 128];
    int rootfd;

    for (int i = 0; i < m->conf->allowed_roots_count; i++)
        if (tier_path_under (d->gfs, m->conf->allowed_roots[i]))
            root = m->conf->allowed_roots[i];
    d->gfsfd = -1;
    if (root && (rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        d->gfsfd = tier_path_open_beneath (rootfd,
                                           tier_path_strip (d->gfs, root),
                                           O_RDONLY | O_DIRECTORY, 0, 0);
        close (rootfd);
    }
    if (d->upperfd >= 0 && d->gfsfd >= 0)
        return 0;
    (void) snprintf (text, sizeof (text), "%s %s", d->gfs,
                     d->upperfd < 0 ? "the write cache is gone"
                                    : strerror (errno));
    tell_error (m, text);
    return -1;
}

static void migrator_init (struct migrator *m, const struct migrator_arg *ma,
                           int chan)
{
    const struct migrate_spec *s = ma->spec;

    memset (m, 0, sizeof (*m));
    m->job_id = s->job_id;
    m->restart = s->restart;
    m->job_start = s->job_start;
    m->resumed = s->resumed;
    m->conf = ma->conf;
    m->uid = s->uid;
    m->chan = chan;
    /* StallTimeout / 4, at most a second: the agent hears from a
     * migrator that is not stuck well before it gives up on it */
    if (ma->conf->stall_timeout > 0)
        m->beat_ms = ma->conf->stall_timeout >= 4
                         ? 1000
                         : (int64_t) ma->conf->stall_timeout * 250;
    m->beat_last_ms = tier_now_ms ();
    (void) snprintf (m->node, sizeof (m->node), "%s", ma->node);
    (void) snprintf (m->user, sizeof (m->user), "%s", ma->user);
    m->ndirs = s->ndirs;
    for (int k = 0; k < s->ndirs; k++) {
        m->dirs[k].upperfd = ma->upperfd[k];
        m->dirs[k].gfsfd = -1;
        (void) snprintf (m->dirs[k].gfs, sizeof (m->dirs[k].gfs), "%s",
                         s->gfs[k]);
    }
}

int migrator_main (void *arg, int chan)
{
    struct migrator_arg *ma = arg;
    static struct migrator m; /* the process's one */
    struct migmsg ready = { .type = MIGMSG_READY };

    migrator_init (&m, ma, chan);
    /* its migrations take GFS streams and the user's bandwidth */
    streams_worker_init (ma->streams_fd, ma->limit);
    for (int k = 0; k < m.ndirs; k++) {
        const char *url = ma->spec->url[k];
        if ((url[0] ? migrate_obj_setup (&m, k, url) : setup_gfs (&m, k)) < 0)
            return 1;
    }
    resume (&m, ma->resume);
    migrator_tell (&m, &ready);
    migrator_loop (&m);
    return 0;
}
