/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* mirror.c - eager mode: a fully prefetched batch directory, bound
 * read-only into the job's namespace
 *
 * The interposer sees only dynamically linked programs' opens.  For a
 * batch directory whose every file has a replica, `tierctl prefetch
 * --bind DIR` asks for a mirror: a tree of hard links to the replicas,
 * with the source's names, on the burst buffer (shared by the nodes):
 *
 *   BBDir/mirrors/              root 0711
 *   BBDir/mirrors/uUID/         root 0700 (only root code opens it)
 *   BBDir/mirrors/uUID/H/       H: a hash of DIR
 *     dir                       DIR
 *     manifest                  the source as the user saw it: one JSON
 *                               object per entry (path, type, mode, and
 *                               a file's replica key or a link's target),
 *                               sorted
 *     tree/                     root 0555 directories, hard links to the
 *                               replicas (root, 0444 or 0555), symlinks
 *
 * When a job whose frozen policies say DIR is batch starts on a node, the
 * agent walks DIR again with the user's credentials and compares it with
 * the manifest: only an identical source is bound, read-only, nosuid,
 * nodev, over DIR in the job's namespace (by the plugin); a changed one
 * drops the mirror and the job uses the interposer.  Within the job the
 * mirror is not revalidated: every binary, static ones and executables
 * included, reads the replicas.  Evicting any of its replicas drops the
 * mirror.  The source is walked as the user, never as root: by a child
 * ("tierd-walk", of a root child of the agent) with the job's credentials
 * (lib/cred.h's TIER_CRED_DATA: the job's group list; outside a job, the
 * user's groups from NSS), which answers with one message of
 * replica_msg.h (the manifest in a sealed memfd).  For a replica.mirror
 * request the whole of it -- the walker, the sort, the tree of hard links
 * on the BB -- runs in a root child ("tierd-mirror", one a user at a
 * time) that reports once (repmsg_mirror_proto): the agent's loop only
 * starts it and answers.  At a job's start, the checker ("tierd-binds")
 * does the same for the walks and comparisons (repmsg_binds_proto).
 *
 * Owns BBDir/mirrors/.  Calls child.c, replica_msg.c, replica.c (keys,
 * the caller's policy), policy.c, jobs.c (jobs_cred) and lib/trust.h for
 * the root-owned directories and files it reads.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/cred.h"
#include "lib/jobns.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/trust.h"
#include "child.h"
#include "peer.h"
#include "policy.h"
#include "replica.h"
#include "replica_msg.h"

#define MANIFEST_MAX REPMSG_MANIFEST_MAX /* bytes */
#define ENTRIES_MAX 200000
#define DEPTH_MAX 64
/* A walk of a source takes this long at most: tierctl prefetch --bind's
 * (in the builder, off the loop).  At each job start all the job's
 * mirrors are walked again together (in the checker: mirror_job_binds)
 * within what is left of the registration's deadline, less
 * CHECK_ANSWER_MS for the checker to answer (a walker given up on is
 * waited for 1 s).  A directory that cannot be walked in time is not
 * mirrored or not bound, and its jobs use the interposer.
 */
#define WALK_MS 5000
#define CHECK_ANSWER_MS 1500
/* A replica.mirror's builder (off the loop: the walk, then the tree of
 * hard links on the BB), within the client's AgentTimeout (10 s). */
#define MIRROR_MS 9000

/* ------------------------------------------------ the walk, as the user */

struct walk {
    const char *dir;
    FILE *out;
    size_t bytes;
    int entries;
    char err[512];
};

static int emit (struct walk *w, json_t *o)
{
    /* the path first: sorted lines then list a directory before what
     * it holds */
    char *s = o ? json_dumps (o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

    json_decref (o);
    if (!s || ++w->entries > ENTRIES_MAX) {
        free (s);
        (void) snprintf (w->err, sizeof (w->err), "more than %d entries",
                         ENTRIES_MAX);
        return -1;
    }
    w->bytes += strlen (s) + 1;
    if (w->bytes > MANIFEST_MAX) {
        free (s);
        (void) snprintf (w->err, sizeof (w->err),
                         "a manifest of more than "
                         "%u MiB",
                         MANIFEST_MAX >> 20);
        return -1;
    }
    fprintf (w->out, "%s\n", s);
    free (s);
    return 0;
}

/* One entry of a directory (name in dfd, sub its relative path). */
static int walk_entry (struct walk *w, int dfd, const char *name,
                       const char *sub, int depth);

static int walk_dir (struct walk *w, int dfd, const char *rel, int depth)
{
    struct dirent *de;
    int fd = dup (dfd);
    DIR *d;

    if (depth > DEPTH_MAX) {
        (void) snprintf (w->err, sizeof (w->err), "%s: deeper than %d",
                         rel, DEPTH_MAX);
        return -1;
    }
    if (fd < 0 || !(d = fdopendir (fd))) {
        (void) snprintf (w->err, sizeof (w->err), "%s: %s", rel[0] ? rel
                         : ".", strerror (errno));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    while ((de = readdir (d))) {
        char sub[PATH_MAX];

        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        (void) snprintf (sub, sizeof (sub), "%s%s%s", rel, rel[0] ? "/" : "",
                         de->d_name);
        if (walk_entry (w, dfd, de->d_name, sub, depth) < 0) {
            closedir (d);
            return -1;
        }
    }
    closedir (d);
    return 0;
}

static int walk_entry (struct walk *w, int dfd, const char *name,
                       const char *sub, int depth)
{
    char key[160], target[PATH_MAX];
    struct stat st;
    int rc = 0;

    if (fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        (void) snprintf (w->err, sizeof (w->err), "%.300s: %s", sub,
                         strerror (errno));
        rc = -1;
    }
    else if (S_ISREG (st.st_mode)) {
        replica_key (&st, key, sizeof (key));
        rc = emit (w, json_pack ("{s:s s:s s:i s:s}", "p", sub, "t", "f", "m",
                                 (int) (st.st_mode & 07777), "k", key));
    }
    else if (S_ISLNK (st.st_mode)) {
        ssize_t n = readlinkat (dfd, name, target, sizeof (target) - 1);
        if (n < 0)
            n = 0;
        target[n] = '\0';
        rc = emit (w, json_pack ("{s:s s:s s:s}", "p", sub, "t", "l", "l",
                                 target));
    }
    else if (S_ISDIR (st.st_mode)) {
        int sfd = openat (dfd, name,
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0) {
            (void) snprintf (w->err, sizeof (w->err), "%.300s: %s", sub,
                             strerror (errno));
            rc = -1;
        }
        else {
            rc = emit (w, json_pack ("{s:s s:s s:i}", "p", sub, "t", "d", "m",
                                     (int) (st.st_mode & 07777)));
            if (rc == 0)
                rc = walk_dir (w, sfd, sub, depth + 1);
            close (sfd);
        }
    }
    else {
        (void) snprintf (w->err, sizeof (w->err),
                         "%.300s: not a file, "
                         "directory or symlink",
                         sub);
        rc = -1;
    }
    return rc;
}

/* Walk w->dir into w->out. */
static int walk_all (struct walk *w)
{
    struct stat st;
    int fd, rc;

    if ((fd = open (w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0
        || fstat (fd, &st) < 0) {
        (void) snprintf (w->err, sizeof (w->err), "%.400s: %s", w->dir,
                         strerror (errno));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    rc = emit (w, json_pack ("{s:s s:s s:i}", "p", "", "t", "d", "m",
                             (int) (st.st_mode & 07777)));
    if (rc == 0)
        rc = walk_dir (w, fd, "", 0);
    close (fd);
    return rc;
}

/* The walker (child.c made it, with the user's credentials): its lines,
 * unsorted, in a sealed memfd, or why not. */
static int walker_main (void *arg, int chan)
{
    struct walk w = { .dir = arg };
    struct repmsg m = { .type = REPMSG_WALK_ERROR };
    char *text = NULL;
    size_t len = 0;
    int fd = -1, rc;

    if (!(w.out = open_memstream (&text, &len)))
        (void) snprintf (w.err, sizeof (w.err), "out of memory");
    else if ((rc = walk_all (&w)) < 0 || fclose (w.out) != 0) {
        if (rc == 0)
            (void) snprintf (w.err, sizeof (w.err), "out of memory");
        else
            (void) fclose (w.out);
    }
    else if ((fd = chmsg_text_fd ("tier-manifest", text, len)) < 0)
        (void) snprintf (w.err, sizeof (w.err), "memfd: %s", strerror (errno));
    else {
        m.type = REPMSG_MANIFEST;
        m.bytes = len;
    }
    free (text);
    m.error = w.err;
    if (repmsg_send (chan, &m, fd) < 0 || m.type != REPMSG_MANIFEST)
        return 1;
    return 0;
}

static int cmp_lines (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

/* buf's lines (len bytes), sorted, in a malloc'd text; NULL with errno. */
static char *sorted_lines (char *buf, size_t len)
{
    char **lines = NULL, *out;
    size_t n = 0, o = 0;

    for (char *p = buf, *nl; *p && (nl = strchr (p, '\n')); p = nl + 1) {
        char **more;
        if (!(more = realloc (lines, (n + 1) * sizeof (*lines)))) {
            free (lines);
            return NULL;
        }
        lines = more;
        lines[n++] = p;
        *nl = '\0';
    }
    qsort (lines, n, sizeof (*lines), cmp_lines);
    if ((out = malloc (len + 1))) {
        for (size_t i = 0; i < n; i++) {
            size_t l = strlen (lines[i]);
            memcpy (out + o, lines[i], l);
            o += l;
            out[o++] = '\n';
        }
        out[o] = '\0';
    }
    free (lines);
    return out;
}

/* The walker's answer: the manifest's text (malloc'd), or NULL with the
 * reason in error. */
static char *walk_answer (int type, json_t *body, int fd, tier_error_t *error)
{
    struct repmsg m;
    char *text;

    if (repmsg_unpack (type, body, &m, error) < 0)
        return NULL;
    if (m.type == REPMSG_WALK_ERROR) {
        errno = EIO;
        tier_errprintf (error, "%s", m.error);
        return NULL;
    }
    if (chmsg_text_read (fd, m.bytes, MANIFEST_MAX, &text) < 0) {
        tier_errprintf (error, "the walk's manifest: %s", strerror (errno));
        return NULL;
    }
    return text;
}

/* The walker's answer as a manifest: its text sorted (malloc'd: the
 * canonical form), or NULL with the reason in error.  Takes body and fd
 * (-1: none). */
static char *walk_manifest (int type, json_t *body, int fd, tier_error_t *error)
{
    char *text = walk_answer (type, body, fd, error), *out = NULL;

    if (fd >= 0)
        close (fd);
    json_decref (body);
    if (text && !(out = sorted_lines (text, strlen (text))))
        tier_errprintf (error, "out of memory");
    free (text);
    return out;
}

/* -------------------------------------------------------- the mirrors */

static unsigned long long hash64 (const char *s)
{
    unsigned long long h = 1469598103934665603ULL;

    while (*s)
        h = (h ^ (unsigned char) *s++) * 1099511628211ULL;
    return h;
}

/* BBDir/mirrors/uUID (made if create): root's, only root may enter. */
static int user_mirrors (struct agent *a, uid_t uid, bool create)
{
    const struct tier_trust t = { .kind = TIER_TRUST_ROOT_DIR, .deny = 077 };
    char path[PATH_MAX];
    int fd;

    (void) snprintf (path, sizeof (path), "%.2048s/mirrors", a->conf->bb_dir);
    if (create && mkdir (path, 0711) < 0 && errno != EEXIST)
        return -1;
    (void) snprintf (path, sizeof (path), "%.2048s/mirrors/u%u",
                     a->conf->bb_dir, (unsigned) uid);
    if (create && mkdir (path, 0700) < 0 && errno != EEXIST)
        return -1;
    if ((fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
        < 0)
        return -1;
    if (tier_trust_check (fd, path, &t, NULL) < 0) {
        close (fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

static DIR *opendir_at (int dfd)
{
    int fd = dup (dfd);
    DIR *d = fd >= 0 ? fdopendir (fd) : NULL;

    if (!d && fd >= 0)
        close (fd);
    return d;
}

/* A file of a mirror: root's (lib/trust.h's ROOT_FILE), at most max
 * bytes (malloc'd), or NULL. */
static char *read_at (int dfd, const char *name, size_t max)
{
    const struct tier_trust t = { .kind = TIER_TRUST_ROOT_FILE };
    int fd = openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    char *s;
    ssize_t n;

    if (fd < 0)
        return NULL;
    if (tier_trust_check (fd, name, &t, NULL) < 0 || fstat (fd, &st) < 0
        || (size_t) st.st_size > max || !(s = malloc (st.st_size + 1))) {
        close (fd);
        return NULL;
    }
    n = read (fd, s, st.st_size);
    close (fd);
    if (n != st.st_size) {
        free (s);
        return NULL;
    }
    s[n] = '\0';
    return s;
}

static int write_at (int dfd, const char *name, const char *text)
{
    int fd = openat (dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
                     | O_CLOEXEC, 0600);
    size_t len = strlen (text), o = 0;

    if (fd < 0)
        return -1;
    while (o < len) {
        ssize_t n = write (fd, text + o, len - o);
        if (n <= 0) {
            close (fd);
            return -1;
        }
        o += (size_t) n;
    }
    return close (fd);
}

static void drop (int ufd, const char *name, const char *why)
{
    tier_error_t e;

    if (tier_rmtree_at (ufd, name, &e) < 0)
        tier_log (LOG_WARNING, "mirror %s: %s", name, e.text);
    else
        tier_log (LOG_INFO, "mirror %s dropped: %s", name, why);
}

/* Build the tree of manifest m in the directory treefd from the replicas
 * in the scope directories (the user's, then world).
 */
static int build_tree (int treefd, const char *m, int scopefd, int worldfd,
                       json_int_t *files, json_int_t *bytes,
                       tier_error_t *error)
{
    const char *p = m;
    char line[PATH_MAX * 3];

    while (*p) {
        const char *nl = strchr (p, '\n');
        size_t l = nl ? (size_t) (nl - p) : strlen (p);
        json_error_t jerr;
        json_t *o;
        const char *rel = NULL, *t = NULL, *k = NULL, *lt = NULL;
        int mode = 0, rc = 0;

        if (l >= sizeof (line))
            return tier_errprintf (error, "manifest line too long");
        memcpy (line, p, l);
        line[l] = '\0';
        p += l + (nl ? 1 : 0);
        if (!(o = json_loads (line, 0, &jerr))
            || json_unpack (o, "{s:s s:s s?i s?s s?s}", "p", &rel, "t", &t,
                            "m", &mode, "k", &k, "l", &lt) < 0) {
            json_decref (o);
            return tier_errprintf (error, "bad manifest line");
        }
        if (!rel[0])
            ;                           /* the root: treefd itself */
        else if (!strcmp (t, "d"))
            rc = mkdirat (treefd, rel, 0700);
        else if (!strcmp (t, "l"))
            rc = symlinkat (lt ? lt : "", treefd, rel);
        else if (!strcmp (t, "f") && k) {
            struct stat st;
            int from = scopefd;
            if (fstatat (from, k, &st, AT_SYMLINK_NOFOLLOW) < 0
                && worldfd >= 0) {
                from = worldfd;
                if (fstatat (from, k, &st, AT_SYMLINK_NOFOLLOW) < 0)
                    from = -1;
            }
            if (from < 0 || (rc = linkat (from, k, treefd, rel, 0)) < 0) {
                errno = ENOENT;
                tier_errprintf (error, "%s is not prefetched", rel);
                json_decref (o);
                return -1;
            }
            (*files)++;
            *bytes += st.st_size;
        }
        if (rc < 0) {
            tier_errprintf (error, "%s: %s", rel, strerror (errno));
            json_decref (o);
            return -1;
        }
        json_decref (o);
    }
    /* read-only directories, once filled (deepest last is fine: root
     * ignores modes) */
    for (p = m; *p;) {
        const char *nl = strchr (p, '\n');
        size_t l = nl ? (size_t) (nl - p) : strlen (p);
        json_error_t jerr;
        json_t *o;
        const char *rel = NULL, *t = NULL;

        memcpy (line, p, l);
        line[l] = '\0';
        p += l + (nl ? 1 : 0);
        if ((o = json_loads (line, 0, &jerr))
            && json_unpack (o, "{s:s s:s}", "p", &rel, "t", &t) == 0
            && !strcmp (t, "d"))
            (void) fchmodat (treefd, rel[0] ? rel : ".", 0555, 0);
        json_decref (o);
    }
    return 0;
}

/* The credentials of the caller's walks (TIER_CRED_DATA): its job's
 * groups inside a job, else the user's from NSS. */
static int caller_cred (struct conn *c, const struct store_job *job,
                        bool in_job, struct tier_cred *cred,
                        tier_error_t *error)
{
    struct passwd pw, *pwp = NULL;
    char buf[4096];

    if (in_job && job->uid == c->cred.uid && jobs_cred (job, cred) == 0)
        return 0;
    if (getpwuid_r (c->cred.uid, &pw, buf, sizeof (buf), &pwp) != 0 || !pwp) {
        errno = ENOENT;
        return tier_errprintf (error, "uid %u has no passwd entry",
                               (unsigned) c->cred.uid);
    }
    tier_cred_init (cred, c->cred.uid, pw.pw_gid);
    if (tier_cred_lookup (cred, pw.pw_name) < 0)
        return tier_errprintf (error, "the groups of %s: %s", pw.pw_name,
                               strerror (errno));
    return 0;
}

/* Make BBDir/mirrors/uUID/.build-NAME/{tree/,dir,manifest} for manifest
 * m of dir, from the replicas of scope directories sfd and wfd. */
static int mirror_build (int ufd, const char *build, const char *dir,
                         const char *m, int sfd, int wfd, json_int_t *files,
                         json_int_t *bytes, tier_error_t *error)
{
    int bfd = -1, tfd = -1, rc = -1;

    (void) tier_rmtree_at (ufd, build, error);
    if (mkdirat (ufd, build, 0700) < 0
        || (bfd = openat (ufd, build,
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
               < 0
        || mkdirat (bfd, "tree", 0700) < 0
        || (tfd = openat (bfd, "tree",
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
               < 0) {
        tier_errprintf (error, "mirror: %s", strerror (errno));
        goto out;
    }
    error->text[0] = '\0';
    if (build_tree (tfd, m, sfd, wfd, files, bytes, error) < 0
        || write_at (bfd, "dir", dir) < 0 || write_at (bfd, "manifest", m) < 0
        || fsync (bfd) < 0) {
        if (!error->text[0])
            tier_errprintf (error, "mirror: %s", strerror (errno));
        (void) tier_rmtree_at (ufd, build, NULL);
        goto out;
    }
    rc = 0;
out:
    if (tfd >= 0)
        close (tfd);
    if (bfd >= 0)
        close (bfd);
    return rc;
}

/* Put the built mirror in place of an older one of the same directory. */
static int mirror_publish (int ufd, const char *name, const char *build,
                           tier_error_t *error)
{
    char old[64];

    (void) snprintf (old, sizeof (old), ".old-%s", name);
    (void) tier_rmtree_at (ufd, old, NULL);
    if ((renameat (ufd, name, ufd, old) < 0 && errno != ENOENT)
        || renameat (ufd, build, ufd, name) < 0) {
        tier_errprintf (error, "mirror: %s", strerror (errno));
        (void) tier_rmtree_at (ufd, build, NULL);
        return -1;
    }
    (void) tier_rmtree_at (ufd, old, NULL);
    (void) fsync (ufd);
    return 0;
}

/* Check a replica.mirror request: the path, and the caller's policy. */
static const char *mirror_req (struct agent *a, struct conn *c, json_t *req,
                               struct tier_cred *cred, tier_error_t *error)
{
    const char *dir = NULL;
    char norm[PATH_MAX];
    struct store_job job;
    struct tier_policy pol;
    bool in_job;

    if (json_unpack (req, "{s:s}", "path", &dir) < 0 || dir[0] != '/'
        || tier_path_normalize (dir, norm, sizeof (norm)) < 0
        || strcmp (norm, dir)) {
        errno = EINVAL;
        tier_errprintf (error, "'path' must be a normalised absolute path");
        return NULL;
    }
    if (!a->conf->bb_dir[0]) {
        errno = ENOTSUP;
        tier_errprintf (error, "node %s has no burst buffer (BBDir)",
                        a->node);
        return NULL;
    }
    if (replica_caller_policy (a, c, dir, &job, &in_job, &pol, error) < 0)
        return NULL;
    if (pol.role != TIER_POLICY_BATCH) {
        errno = EPERM;
        tier_errprintf (error, "%s is not a batch directory of yours", dir);
        return NULL;
    }
    if (caller_cred (c, &job, in_job, cred, error) < 0)
        return NULL;
    return dir;
}

/* A mirror being made for a replica.mirror request: one a user at a
 * time.  The builder (root, "tierd-mirror") runs the walker as the user,
 * sorts its manifest and builds and publishes the tree on the BB, all
 * off the agent's loop; the request is answered when it reports. */
struct mirror_run {
    struct agent *a;
    struct conn *c; /* who asked; NULL once gone or answered */
    uint32_t msgid;
    uid_t uid;
    char dir[PATH_MAX];
    struct tier_cred cred;
    struct mirror_run *next;
};
static struct mirror_run *runs;

/* The walker, from a root child (the builder, the checker): dir's
 * manifest as cred sees it (malloc'd, sorted lines), within timeout_ms,
 * or NULL with the reason in error. */
static char *walk_as (const struct tier_cred *cred, const char *dir,
                      int timeout_ms, const char *budget, tier_error_t *error)
{
    struct child_spec spec = {
        .name = "tierd-walk",
        .cred = cred,
        .mode = TIER_CRED_DATA,
        .proto = &repmsg_walk_proto,
        .main = walker_main,
        .arg = (void *) dir,
    };
    int type, chan, status, fds[1] = { -1 }, nfds = 0;
    json_t *body = NULL;
    char *out = NULL;
    pid_t pid;

    if (timeout_ms <= 0) {
        errno = ETIMEDOUT;
        tier_errprintf (error,
                        "no time left to walk %s: the walks before "
                        "it took the time they are given (%s)",
                        dir, budget);
        return NULL;
    }
    (void) snprintf (spec.title, sizeof (spec.title), "tierd-walk uid %u %.96s",
                     (unsigned) cred->uid, dir);
    if ((pid = child_spawn (&spec, &chan, error)) < 0)
        return NULL;
    if (chmsg_recv (chan, &repmsg_walk_proto, &type, &body, fds, &nfds, 1,
                    timeout_ms, error)
        < 0) {
        if (errno == ETIMEDOUT)
            tier_errprintf (error,
                            "the walk of %s as uid %u did not finish "
                            "within %s",
                            dir, (unsigned) cred->uid, budget);
        else
            tier_errprintf (error, "the walk failed");
    }
    else
        out = walk_manifest (type, body, nfds > 0 ? fds[0] : -1, error);
    close (chan);
    /* done, or given up on: one stuck in a GFS request is left to the
     * agent (the subreaper) once this child exits */
    (void) kill (pid, SIGKILL);
    for (int i = 0; i < 100 && waitpid (pid, &status, WNOHANG) == 0; i++)
        (void) usleep (10000);
    return out;
}

/* The builder (a child_main_f; arg: the run): walk, build, publish. */
static int builder_main (void *arg, int chan)
{
    struct mirror_run *run = arg;
    struct agent *a = run->a;
    struct repmsg msg = { .type = REPMSG_BUILD_ERROR };
    char name[32], build[64], path[PATH_MAX];
    json_int_t files = 0, bytes = 0;
    tier_error_t error = { .text = "" };
    int ufd = -1, sfd = -1, wfd = -1;
    char *m;

    if (!(m = walk_as (&run->cred, run->dir, WALK_MS, "5 s", &error)))
        goto out;
    if ((ufd = user_mirrors (a, run->uid, true)) < 0) {
        tier_errprintf (&error, "%s/mirrors: %s", a->conf->bb_dir,
                        strerror (errno));
        goto out;
    }
    (void) snprintf (path, sizeof (path), "%.2048s/replicas/u%u",
                     a->conf->bb_dir, (unsigned) run->uid);
    sfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    (void) snprintf (path, sizeof (path), "%.2048s/replicas/world",
                     a->conf->bb_dir);
    wfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0 && wfd < 0) {
        tier_errprintf (&error,
                        "%s has no replicas yet (tierctl prefetch "
                        "it first)",
                        run->dir);
        goto out;
    }
    (void) snprintf (name, sizeof (name), "%016llx", hash64 (run->dir));
    (void) snprintf (build, sizeof (build), ".build-%s", name);
    if (mirror_build (ufd, build, run->dir, m, sfd, wfd, &files, &bytes, &error)
            < 0
        || mirror_publish (ufd, name, build, &error) < 0)
        goto out;
    msg.type = REPMSG_BUILT;
    msg.files = (uint64_t) files;
    msg.bytes = (uint64_t) bytes;
out:
    if (ufd >= 0)
        close (ufd);
    if (sfd >= 0)
        close (sfd);
    if (wfd >= 0)
        close (wfd);
    free (m);
    msg.error = error.text[0] ? error.text : "the mirror could not be made";
    return repmsg_send (chan, &msg, -1) < 0 || msg.type != REPMSG_BUILT;
}

/* Answer the request (once; body is consumed).  The connection may close
 * in server_reply: the run lets go of it first. */
static void run_answer (struct mirror_run *run, char *body)
{
    struct conn *c = run->c;

    if (!c) {
        free (body);
        return;
    }
    run->c = NULL;
    c->waiting--;
    server_reply (run->a, c, run->msgid, body);
}

static void on_builder_msg (struct agent *a, struct child *c, int type,
                            json_t *body, int *fds, int nfds, void *owner)
{
    struct mirror_run *run = owner;
    struct repmsg m;
    tier_error_t e;
    json_t *o;

    (void) a;
    (void) c;
    (void) fds;
    (void) nfds;
    if (repmsg_unpack (type, body, &m, &e) < 0)
        run_answer (run, rpc_error_body (EPROTO, "%s", e.text));
    else if (m.type == REPMSG_BUILD_ERROR)
        run_answer (run, rpc_error_body (EIO, "%s", m.error));
    else {
        tier_log (LOG_INFO,
                  "mirror of %s for uid %u: %llu files, %llu "
                  "bytes",
                  run->dir, (unsigned) run->uid, (unsigned long long) m.files,
                  (unsigned long long) m.bytes);
        o = json_pack ("{s:s s:I s:I}", "dir", run->dir, "files",
                       (json_int_t) m.files, "bytes", (json_int_t) m.bytes);
        run_answer (run, o ? json_dumps (o, JSON_COMPACT) : NULL);
        json_decref (o);
    }
    json_decref (body);
}

static void on_builder_done (struct agent *a, struct child *c, int status,
                             void *owner)
{
    struct mirror_run *run = owner, **pp;

    (void) a;
    (void) c;
    run_answer (run, rpc_error_body (EIO,
                                     "the mirror of %s was not made: "
                                     "its builder ended (status %d)",
                                     run->dir, status));
    for (pp = &runs; *pp && *pp != run; pp = &(*pp)->next)
        ;
    if (*pp)
        *pp = run->next;
    free (run);
}

void mirror_conn_gone (struct agent *a, struct conn *c)
{
    (void) a;
    for (struct mirror_run *run = runs; run; run = run->next)
        if (run->c == c) {
            run->c = NULL;
            c->waiting--;
        }
}

/* replica.mirror {path}: after tierctl prefetch --bind, make the mirror
 * of the batch directory path for the caller's jobs (answered once the
 * builder reports).
 */
json_t *op_replica_mirror (struct agent *a, struct conn *c, json_t *req,
                           tier_error_t *error)
{
    struct child_spec spec = {
        .name = "tierd-mirror",
        .proto = &repmsg_mirror_proto,
        .main = builder_main,
        .deadline_ms = MIRROR_MS,
        .on_msg = on_builder_msg,
        .on_done = on_builder_done,
    };
    struct mirror_run *run;
    struct tier_cred cred;
    const char *dir;

    if (!c->upol) /* first the caller's policies, off the loop */
        return userpol_call (a, c, op_replica_mirror, req, error);
    if (!(dir = mirror_req (a, c, req, &cred, error)))
        return NULL;
    for (run = runs; run; run = run->next)
        if (run->uid == c->cred.uid) {
            errno = EBUSY;
            tier_errprintf (error,
                            "a mirror of yours is being made (%s): "
                            "try again once it is done",
                            run->dir);
            return NULL;
        }
    if (!(run = calloc (1, sizeof (*run)))) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    run->a = a;
    run->uid = c->cred.uid;
    run->cred = cred;
    (void) snprintf (run->dir, sizeof (run->dir), "%s", dir);
    spec.arg = spec.owner = run;
    spec.for_uid = run->uid;
    (void) snprintf (spec.title, sizeof (spec.title),
                     "tierd-mirror uid %u %.96s", (unsigned) run->uid,
                     run->dir);
    if (!child_start (a, &spec, error)) {
        free (run);
        return NULL;
    }
    run->c = c;
    run->msgid = c->req_id;
    c->waiting++;
    run->next = runs;
    runs = run;
    return RPC_DEFERRED;
}

/* The mirrors to bind for a starting job: those of its user whose
 * directory is batch in the job's frozen set and whose source is still
 * exactly what was mirrored (walked again as the user).  The loop finds
 * the candidates (the root-owned dir files on the BB, the frozen set);
 * a root child, the checker ("tierd-binds"), reads their manifests, has
 * the walker walk each source as the user, all within WALK_MS, drops the
 * mirrors whose source changed, and answers "DIR=TREE:..." (directories
 * with ':' or '=' are left out).
 */
#define BINDS_MAX 32
struct binds_check {
    struct agent *a;
    uid_t uid;
    uint32_t job_id;
    struct tier_cred cred;
    int64_t deadline; /* of the walks */
    mirror_binds_f done;
    void *arg;
    int n;
    struct {
        char name[NAME_MAX + 1];
        char dir[PATH_MAX];
    } m[BINDS_MAX];
};

static int checker_main (void *arg, int chan)
{
    struct binds_check *b = arg;
    struct agent *a = b->a;
    int64_t deadline = b->deadline;
    static char out[REPMSG_BINDS_MAX];
    char budget[64];
    struct repmsg msg = { .type = REPMSG_BINDS, .binds = out };
    size_t o = 0;
    int ufd;

    out[0] = '\0';
    (void) snprintf (budget, sizeof (budget), "the job start's %d s",
                     AGENT_REGISTER_MS / 1000);
    if ((ufd = user_mirrors (a, b->uid, false)) < 0)
        return repmsg_send (chan, &msg, -1) < 0;
    for (int i = 0; i < b->n; i++) {
        const char *dir = b->m[i].dir;
        char *m = NULL, *now = NULL, item[PATH_MAX * 2];
        tier_error_t e;
        int mfd, n;

        if ((mfd = openat (ufd, b->m[i].name,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
            >= 0) {
            m = read_at (mfd, "manifest", MANIFEST_MAX);
            close (mfd);
        }
        if (!m)
            continue;
        if (!(now = walk_as (&b->cred, dir, (int) (deadline - tier_now_ms ()),
                             budget, &e))
            || strcmp (now, m)) {
            if (now) {
                tier_log (LOG_INFO,
                          "job %u: the source of mirror %s "
                          "changed: not bound",
                          b->job_id, dir);
                drop (ufd, b->m[i].name, "its source changed");
            }
            else
                tier_log (LOG_INFO, "job %u: mirror %s not bound: %s",
                          b->job_id, dir, e.text);
            goto next;
        }
        n = snprintf (item, sizeof (item), "%s=%.2048s/mirrors/u%u/%s/tree",
                      dir, a->conf->bb_dir, (unsigned) b->uid, b->m[i].name);
        if (n > 0 && o + (size_t) n + 2 < sizeof (out)) {
            if (o)
                out[o++] = ':';
            memcpy (out + o, item, (size_t) n);
            o += (size_t) n;
            out[o] = '\0';
        }
    next:
        free (m);
        free (now);
    }
    close (ufd);
    return repmsg_send (chan, &msg, -1) < 0;
}

static void on_checked (struct agent *a, int rc, int type, json_t *body, int fd,
                        const tier_error_t *error, void *arg)
{
    struct binds_check *b = arg;
    char *binds = NULL;
    struct repmsg m;
    tier_error_t e;

    if (fd >= 0)
        close (fd);
    if (rc)
        tier_log (LOG_WARNING, "job %u: its mirrors are not bound: %s",
                  b->job_id, error->text);
    else if (repmsg_unpack (type, body, &m, &e) < 0)
        tier_log (LOG_WARNING, "job %u: its mirrors are not bound: %s",
                  b->job_id, e.text);
    else if (m.binds[0])
        binds = strdup (m.binds);
    json_decref (body);
    b->done (a, binds, b->arg);
    free (b);
}

void mirror_job_binds (struct agent *a, const struct store_job *job,
                       int64_t deadline, mirror_binds_f done, void *arg)
{
    struct child_spec spec = {
        .name = "tierd-binds",
        .proto = &repmsg_binds_proto,
        .main = checker_main,
    };
    struct binds_check *b = NULL;
    struct dirent *de;
    int64_t left;
    int ufd = -1;
    DIR *d = NULL;

    if (!a->conf->bb_dir[0] || (ufd = user_mirrors (a, job->uid, false)) < 0
        || !(b = calloc (1, sizeof (*b))) || jobs_cred (job, &b->cred) < 0
        || !(d = opendir_at (ufd)))
        goto none;
    b->a = a;
    b->uid = job->uid;
    b->job_id = job->job_id;
    b->done = done;
    b->arg = arg;
    while ((de = readdir (d)) && b->n < BINDS_MAX) {
        struct tier_policy pol;
        char *dir;
        int mfd;

        if (de->d_name[0] == '.' || strlen (de->d_name) > NAME_MAX)
            continue;
        if ((mfd = openat (ufd, de->d_name,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
            < 0)
            continue;
        dir = read_at (mfd, "dir", PATH_MAX - 1);
        close (mfd);
        if (dir && !strchr (dir, ':') && !strchr (dir, '=')
            && policy_job_resolve (a, job, dir, &pol) == 0
            && pol.role == TIER_POLICY_BATCH) {
            (void) snprintf (b->m[b->n].name, sizeof (b->m[b->n].name), "%s",
                             de->d_name);
            (void) snprintf (b->m[b->n].dir, sizeof (b->m[b->n].dir), "%s",
                             dir);
            b->n++;
        }
        free (dir);
    }
    closedir (d);
    close (ufd);
    if (!b->n) {
        free (b);
        done (a, NULL, arg);
        return;
    }
    left = deadline - tier_now_ms ();
    if (left <= CHECK_ANSWER_MS) {
        tier_log (LOG_INFO,
                  "job %u: its mirrors are not bound: its policies took "
                  "the registration's time",
                  job->job_id);
        free (b);
        done (a, NULL, arg);
        return;
    }
    b->deadline = deadline - CHECK_ANSWER_MS;
    spec.arg = b;
    spec.for_uid = job->uid;
    (void) snprintf (spec.title, sizeof (spec.title),
                     "tierd-binds job %u uid %u", (unsigned) job->job_id,
                     (unsigned) job->uid);
    child_ask (a, &spec, (int) left, on_checked, b);
    return;
none:
    if (d)
        closedir (d);
    if (ufd >= 0)
        close (ufd);
    free (b);
    done (a, NULL, arg);
}

/* Drop the mirrors of uid that use the replica key, or (key NULL) whose
 * directory lies under path.
 */
void mirror_drop (struct agent *a, uid_t uid, const char *key,
                  const char *path)
{
    struct dirent *de;
    int ufd;
    DIR *d;

    if (!a->conf->bb_dir[0] || (ufd = user_mirrors (a, uid, false)) < 0)
        return;
    if (!(d = opendir_at (ufd))) {
        close (ufd);
        return;
    }
    while ((de = readdir (d))) {
        char *dir = NULL, *m = NULL, pat[200];
        bool hit = false;
        int mfd;

        if (de->d_name[0] == '.')
            continue;
        if ((mfd = openat (ufd, de->d_name, O_RDONLY | O_DIRECTORY
                           | O_NOFOLLOW | O_CLOEXEC)) < 0)
            continue;
        if (key) {
            (void) snprintf (pat, sizeof (pat), "\"k\":\"%s\"", key);
            hit = (m = read_at (mfd, "manifest", MANIFEST_MAX))
                  && strstr (m, pat);
        }
        else
            hit = (dir = read_at (mfd, "dir", PATH_MAX))
                  && tier_path_under (dir, path);
        close (mfd);
        if (hit)
            drop (ufd, de->d_name, key ? "one of its replicas was evicted"
                                       : "tierctl evict");
        free (dir);
        free (m);
    }
    closedir (d);
    close (ufd);
}
