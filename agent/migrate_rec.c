/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate_rec.c - stage-out: the records of a job's outputs in LMDB
 *
 * One record per output, key "JOB.RESTART/K/REL", a JSON object: its
 * state (done with size and SHA-256, uploading, failed and why,
 * conflict), and what the migrator needs to resume (the GFS file it
 * made; an object's ETag).  Multipart uploads in flight have their own
 * records, "JOB.RESTART/K/REL u" (the upload) and "... pNNNNN" (a part's
 * ETag), with REL escaped (no blank: the prefix "JOB.RESTART/K/REL " is
 * one file's).  The job's manifest, job.outputs and the failures that
 * status shows are read from here.
 *
 * Owns these records; calls the store (store.h) and the counters
 * (ctr_add), and is called by migrate.c with the migrator's results.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/log.h"
#include "lib/endpoint.h" /* tier_url_child */
#include "lib/url.h"
#include "migrate.h"

/* Escaped names longer than this make no upload records (LMDB keys are
 * at most 511 bytes): such an upload starts afresh after a crash. */
#define UPLOAD_NAME_MAX 400

/* ------------------------------------------------------------- keys */

/* Names in upload keys: bytes <= ' ', '%' and DEL as %XX. */
static size_t key_esc (const char *in, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *) in; *p; p++) {
        if (o + 4 >= size)
            break;
        if (*p <= ' ' || *p == '%' || *p == 0x7f) {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
        else
            out[o++] = (char) *p;
    }
    out[o] = '\0';
    return o;
}

/* in[0..n) unescaped into out; -1 if malformed or too long. */
static int key_unesc (const char *in, size_t n, char *out, size_t size)
{
    return tier_url_unescape (in, n, out, size) < 0 ? -1 : 0;
}

static void job_prefix (const struct mig *g, char *buf, size_t size)
{
    (void) snprintf (buf, size, "%u.%u/", g->job_id, g->restart);
}

/* "JOB.RESTART/K/ESCREL " (the upload records of one file); -1 if the
 * name is too long to have any. */
static int upload_prefix (const struct mig *g, int k, const char *rel,
                          char *buf, size_t size)
{
    char e[PATH_MAX * 3];

    if (key_esc (rel, e, sizeof (e)) > UPLOAD_NAME_MAX)
        return -1;
    (void) snprintf (buf, size, "%u.%u/%d/%s ", g->job_id, g->restart, k, e);
    return 0;
}

/* "sec.nsec", as the records keep times. */
static void ts_format (const struct timespec *ts, char *buf, size_t size)
{
    (void) snprintf (buf, size, "%lld.%09ld", (long long) ts->tv_sec,
                     ts->tv_nsec);
}

static int ts_parse (const char *s, struct timespec *ts)
{
    char *end;
    long long sec;
    long ns = 0;
    int digits = 0;

    errno = 0;
    sec = strtoll (s, &end, 10);
    if (errno || end == s || *end != '.')
        return -1;
    for (end++; *end >= '0' && *end <= '9' && digits < 9; end++, digits++)
        ns = ns * 10 + (*end - '0');
    if (*end || digits != 9)
        return -1;
    ts->tv_sec = (time_t) sec;
    ts->tv_nsec = ns;
    return 0;
}

/* ----------------------------------------------------------- records */

/* Put (val set, consumed) or delete the record of rel in dir k. */
static void record (struct agent *a, struct mig *g, int k, const char *rel,
                    json_t *val)
{
    char key[PATH_MAX + 64];
    struct store_kv kv;
    tier_error_t e;
    char *s;

    if (val) {
        char path[PATH_MAX * 2];
        (void) snprintf (path, sizeof (path), "%s/%s", g->spec.gfs[k], rel);
        json_object_set_new (val, "dir", json_string (g->spec.gfs[k]));
        json_object_set_new (val, "path", json_string (path));
        if (g->spec.url[k][0]) {
            /* DIR=URL: where the file goes (path: its name in the job) */
            struct tier_url *pre, *u = NULL;
            if ((pre = tier_url_parse (g->spec.url[k], &e)))
                u = tier_url_child (pre, rel, &e);
            json_object_set_new (val, "url", json_string (u ? u->text : "?"));
            tier_url_destroy (u);
            tier_url_destroy (pre);
        }
    }
    s = val ? json_dumps (val, JSON_COMPACT) : NULL;
    json_decref (val);
    (void) snprintf (key, sizeof (key), "%u.%u/%d/%s", g->job_id, g->restart, k,
                     rel);
    kv.key = key;
    kv.val = s;
    if (store_output_apply (a->store, &kv, 1, &e) < 0)
        tier_log (LOG_ERR, "outputs of job %u: %s", g->job_id, e.text);
    free (s);
}

/* The record of an output, parsed (NULL if none). */
static json_t *record_get (struct agent *a, const struct mig *g, int k,
                           const char *rel)
{
    char key[PATH_MAX + 64], *val = NULL;
    json_error_t jerr;
    tier_error_t e;
    size_t vlen = 0;
    json_t *o;

    (void) snprintf (key, sizeof (key), "%u.%u/%d/%s", g->job_id, g->restart, k,
                     rel);
    if (store_output_get (a->store, key, &val, &vlen, &e) < 0)
        return NULL;
    o = json_loadb (val, vlen, 0, &jerr);
    free (val);
    return o;
}

/* Drop the upload records of one object output. */
static void uploads_drop (struct agent *a, struct mig *g, int k,
                          const char *rel)
{
    char prefix[PATH_MAX * 3 + 64];
    tier_error_t e;

    if (upload_prefix (g, k, rel, prefix, sizeof (prefix)) < 0)
        return;
    if (store_upload_delete (a->store, prefix, &e) < 0)
        tier_log (LOG_ERR, "uploads of job %u: %s", g->job_id, e.text);
}

static void upload_put (struct agent *a, struct mig *g, const char *key,
                        const char *val)
{
    struct store_kv kv = { .key = key, .val = val };
    tier_error_t e;

    if (val && store_upload_apply (a->store, &kv, 1, &e) < 0)
        tier_log (LOG_ERR, "uploads of job %u: %s", g->job_id, e.text);
}

/* ----------------------------------------------------------- results */

/* Files: outputs, each once; bytes and time: every migration (whole
 * milliseconds, the rest carried). */
static void count_published (struct agent *a, struct mig *g,
                             const struct store_job *job,
                             const struct migmsg *m, bool gfs)
{
    if (!job)
        return;
    g->out_us += (uint64_t) m->us;
    if (m->first)
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_STAGE_OUT_FILES, 1);
    ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_STAGE_OUT_MS,
             g->out_us / 1000);
    g->out_us %= 1000;
    ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_STAGE_OUT_BYTES,
             (uint64_t) m->size);
    if (!gfs)
        return; /* an object's bytes are no GFS bytes */
    ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_GFS_BYTES_WRITTEN,
             (uint64_t) m->size);
    /* on the GFS: the temporary's create and its rename */
    ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_GFS_META_OPS, 2);
}

/* A publishing recorded before its rename ("pub"): kept in the record
 * whatever comes after, until a new one replaces it. */
static void pub_keep (struct agent *a, struct mig *g, const struct migmsg *m,
                      json_t *o)
{
    json_t *old = o ? record_get (a, g, m->k, m->rel) : NULL, *pub;

    if (old && (pub = json_object_get (old, "pub")))
        json_object_set (o, "pub", pub);
    json_decref (old);
}

/* publishing: the temporary is complete; recorded (with the record's
 * state as it is), then the migrator may rename it. */
static void on_publishing (struct agent *a, struct mig *g,
                           const struct migmsg *m)
{
    struct migmsg noted = { .type = MIGMSG_NOTED, .k = m->k, .rel = m->rel };
    json_t *o = record_get (a, g, m->k, m->rel);
    char mt[48];

    ts_format (&m->mtime, mt, sizeof (mt));
    if (!o)
        o = json_pack ("{s:s s:i s:I}", "state", "pending", "k", m->k, "time",
                       (json_int_t) time (NULL));
    if (o)
        json_object_set_new (o, "pub",
                             json_pack ("{s:I s:I s:I s:s s:s s:b}", "ino",
                                        (json_int_t) m->ino, "gfs_size",
                                        (json_int_t) m->gfs_size, "size",
                                        (json_int_t) m->size, "mtime", mt,
                                        "sha256", m->sha256, "ours", m->ours));
    json_object_del (o, "dir"); /* record () sets them again */
    json_object_del (o, "path");
    json_object_del (o, "url");
    record (a, g, m->k, m->rel, o);
    (void) migrate_tell (g, &noted);
}

static void on_done (struct agent *a, struct mig *g, const struct migmsg *m,
                     const struct store_job *job)
{
    char gm[48], gc[48];

    ts_format (&m->gfs_mtime, gm, sizeof (gm));
    ts_format (&m->gfs_ctime, gc, sizeof (gc));
    record (a, g, m->k, m->rel,
            json_pack ("{s:s s:i s:I s:s s:b s:I s:I s:s s:s s:s s:I}", "state",
                       "done", "k", m->k, "size", (json_int_t) m->size,
                       "sha256", m->sha256, "ours", m->ours, "ino",
                       (json_int_t) m->ino, "gfs_size",
                       (json_int_t) m->gfs_size, "gfs_mtime", gm, "gfs_ctime",
                       gc, "mtime", gm, "time", (json_int_t) time (NULL)));
    count_published (a, g, job, m, true);
}

static void on_failed (struct agent *a, struct mig *g, const struct migmsg *m,
                       const struct store_job *job)
{
    bool url = g->spec.url[m->k][0] != '\0';
    json_t *o = json_pack ("{s:s s:i s:i s:s s:I}", "state", "failed", "k",
                           m->k, "errno", m->err, "error", m->error, "time",
                           (json_int_t) time (NULL));
    json_t *old = url ? record_get (a, g, m->k, m->rel) : NULL;

    if (job && m->first)
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_FAILURES, 1);
    /* an object key this job claimed stays claimed */
    if (o && old && json_is_true (json_object_get (old, "claimed")))
        json_object_set_new (o, "claimed", json_true ());
    json_decref (old);
    pub_keep (a, g, m, o);
    record (a, g, m->k, m->rel, o);
    if (url)
        tier_log (LOG_WARNING,
                  "job %u: %s/%s did not reach its object "
                  "store (%s): %s (kept, retried)",
                  g->job_id, g->spec.gfs[m->k], m->rel, g->spec.url[m->k],
                  m->error);
    else
        tier_log (LOG_WARNING,
                  "job %u: %s/%s did not reach the GFS: %s "
                  "(kept, retried)",
                  g->job_id, g->spec.gfs[m->k], m->rel, m->error);
}

static void on_conflict (struct agent *a, struct mig *g, const struct migmsg *m,
                         const struct store_job *job)
{
    char why[PATH_MAX * 3];
    const char *dir = g->spec.gfs[m->k];
    json_t *o;

    if (g->spec.url[m->k][0]) {
        struct tier_url *pre, *u = NULL;
        tier_error_t e;
        if ((pre = tier_url_parse (g->spec.url[m->k], &e)) && m->side)
            u = tier_url_child (pre, m->side, &e);
        (void) snprintf (why, sizeof (why),
                         "the object existed before the "
                         "job, or changed since its upload (another "
                         "writer): not overwritten; this job's version is "
                         "at %s",
                         u ? u->text : "?");
        tier_url_destroy (u);
        tier_url_destroy (pre);
        uploads_drop (a, g, m->k, m->rel);
    }
    else if (m->side)
        (void) snprintf (why, sizeof (why),
                         "the GFS file changed during the "
                         "job (another writer): not overwritten; this job's "
                         "version is in %s/%s",
                         dir, m->side);
    else
        (void) snprintf (why, sizeof (why),
                         "the GFS file changed during the "
                         "job (another writer): not overwritten; this job's "
                         "version could not be saved beside it");
    o = json_pack ("{s:s s:i s:s s:I}", "state", "conflict", "k", m->k, "error",
                   why, "time", (json_int_t) time (NULL));
    pub_keep (a, g, m, o);
    record (a, g, m->k, m->rel, o);
    tier_log (LOG_WARNING, "job %u: conflict on %s/%s: %s", g->job_id, dir,
              m->rel, why);
    if (job)
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_CONFLICTS, 1);
}

/* claimed: the key is this job's from now on, even if this upload fails
 * (parts and counts of a multipart one are kept).  A retry of a failed
 * upload stays "failed", with its reason, until it succeeds: the
 * migrator counts it failed until then, and a view must show why. */
static void on_claimed (struct agent *a, struct mig *g, const struct migmsg *m)
{
    json_t *o = record_get (a, g, m->k, m->rel);
    const char *st;

    if (!o || !json_is_object (o)) {
        json_decref (o);
        o = json_object ();
    }
    st = json_string_value (json_object_get (o, "state"));
    if (st && !strcmp (st, "failed"))
        json_object_set_new (o, "retrying", json_true ());
    else {
        json_object_set_new (o, "state", json_string ("uploading"));
        json_object_del (o, "error");
        json_object_del (o, "errno");
    }
    json_object_set_new (o, "k", json_integer (m->k));
    json_object_set_new (o, "claimed", json_true ());
    json_object_set_new (o, "time", json_integer (time (NULL)));
    json_object_del (o, "sha256"); /* of an older version */
    record (a, g, m->k, m->rel, o);
}

static void on_upload_begun (struct agent *a, struct mig *g,
                             const struct migmsg *m)
{
    char key[PATH_MAX * 3 + 96];
    json_t *u, *o;
    char *text;

    if (!m->part_size
        || upload_prefix (g, m->k, m->rel, key, sizeof (key) - 2) < 0)
        return;
    uploads_drop (a, g, m->k, m->rel); /* an older upload's */
    u = json_pack ("{s:s s:I s:I s:I}", "upload_id", m->upload_id, "part_size",
                   (json_int_t) m->part_size, "size", (json_int_t) m->size,
                   "mtime_ns", (json_int_t) m->mtime_ns);
    text = u ? json_dumps (u, JSON_COMPACT) : NULL;
    json_decref (u);
    strcat (key, "u");
    upload_put (a, g, key, text);
    free (text);
    if ((o = record_get (a, g, m->k, m->rel))) {
        json_int_t n = m->size ? (m->size + m->part_size - 1) / m->part_size
                               : 1;
        json_object_set_new (o, "parts", json_integer (n));
        json_object_set_new (o, "parts_done", json_integer (0));
        record (a, g, m->k, m->rel, o);
    }
}

static void on_part_done (struct agent *a, struct mig *g,
                          const struct migmsg *m)
{
    char prefix[PATH_MAX * 3 + 64], key[PATH_MAX * 3 + 96];
    json_t *o;

    if (upload_prefix (g, m->k, m->rel, prefix, sizeof (prefix)) < 0)
        return;
    (void) snprintf (key, sizeof (key), "%sp%05u", prefix, (unsigned) m->n);
    upload_put (a, g, key, m->etag);
    if ((o = record_get (a, g, m->k, m->rel))) {
        json_int_t done = json_integer_value (json_object_get (o,
                                                               "parts_done"));
        json_object_set_new (o, "parts_done", json_integer (done + 1));
        record (a, g, m->k, m->rel, o);
    }
}

static void on_object_done (struct agent *a, struct mig *g,
                            const struct migmsg *m, const struct store_job *job)
{
    json_t *old = record_get (a, g, m->k, m->rel), *o;
    char mtime[48];

    ts_format (&m->mtime, mtime, sizeof (mtime));
    uploads_drop (a, g, m->k, m->rel);
    o = json_pack ("{s:s s:i s:I s:s s:b s:b s:s s:s s:I}", "state", "done",
                   "k", m->k, "size", (json_int_t) m->size, "sha256", m->sha256,
                   "ours", 1, "claimed", 1, "etag", m->etag, "mtime", mtime,
                   "time", (json_int_t) time (NULL));
    /* a multipart upload: how many parts it took */
    if (o && old && json_object_get (old, "parts"))
        json_object_set (o, "parts", json_object_get (old, "parts"));
    json_decref (old);
    record (a, g, m->k, m->rel, o);
    count_published (a, g, job, m, false);
}

void migrate_rec_result (struct agent *a, struct mig *g, const struct migmsg *m)
{
    struct store_job job;
    tier_error_t e;
    const struct store_job *jp = NULL;

    if (store_job_get (a->store, g->job_id, g->restart, &job, &e) == 0)
        jp = &job;
    switch (m->type) {
        case MIGMSG_DONE:
            on_done (a, g, m, jp);
            break;
        case MIGMSG_FAILED:
            on_failed (a, g, m, jp);
            break;
        case MIGMSG_CONFLICT:
            on_conflict (a, g, m, jp);
            break;
        case MIGMSG_GONE:
            record (a, g, m->k, m->rel, NULL);
            if (g->spec.url[m->k][0])
                uploads_drop (a, g, m->k, m->rel);
            break;
        case MIGMSG_CLAIMED:
            on_claimed (a, g, m);
            break;
        case MIGMSG_UPLOAD_BEGUN:
            on_upload_begun (a, g, m);
            break;
        case MIGMSG_PART_DONE:
            on_part_done (a, g, m);
            break;
        case MIGMSG_UPLOAD_GONE:
            uploads_drop (a, g, m->k, m->rel);
            break;
        case MIGMSG_OBJECT_DONE:
            on_object_done (a, g, m, jp);
            break;
        case MIGMSG_PUBLISHING:
            on_publishing (a, g, m);
            break;
        default:
            break;
    }
}

/* ------------------------------------------------------------ resume */

struct resume_ctx {
    struct mig *g;
    struct migmsg_batch *b;
    bool parts; /* the upload records' second pass */
    int uploads;
    int rc;
};

static void resume_add (struct resume_ctx *rc, const struct migmsg *m)
{
    if (migmsg_batch_add (rc->b, m) < 0)
        rc->rc = -1;
}

/* A publishing whose end may not be recorded: intent. */
static void resume_pub (struct resume_ctx *rc, const char *rel, int k,
                        json_t *pub)
{
    struct migmsg m = { .type = MIGMSG_INTENT, .k = k, .rel = rel };
    const char *mt = NULL;
    json_int_t ino = 0, gsize = 0, size = 0;
    int ours = 0;

    if (!pub
        || json_unpack (pub, "{s:I s:I s:I s:s s:s s:b}", "ino", &ino,
                        "gfs_size", &gsize, "size", &size, "mtime", &mt,
                        "sha256", &m.sha256, "ours", &ours)
               < 0
        || ino <= 0 || gsize < 0 || size < 0 || ts_parse (mt, &m.mtime) < 0)
        return;
    m.ino = ino;
    m.gfs_size = gsize;
    m.size = size;
    m.ours = ours;
    resume_add (rc, &m);
}

/* An output's record: known (GFS), known_object or claim. */
static void resume_record (struct resume_ctx *rc, const char *rel, json_t *o)
{
    struct migmsg m = { .rel = rel };
    const char *st = NULL, *sm = NULL, *gm = NULL, *gc = NULL, *etag = NULL;
    json_int_t k = -1, ino = 0, gsize = 0, size = 0;

    if (json_unpack (o, "{s:s s:I s?I s?I s?I s?s s?s s?s s?s}", "state", &st,
                     "k", &k, "ino", &ino, "gfs_size", &gsize, "size", &size,
                     "mtime", &sm, "gfs_mtime", &gm, "gfs_ctime", &gc, "etag",
                     &etag)
            < 0
        || k < 0 || k >= rc->g->spec.ndirs)
        return;
    m.k = (int) k;
    if (json_object_get (o, "url")) {
        /* an object output: published (with its ETag), or claimed */
        if (!strcmp (st, "done") && sm && ts_parse (sm, &m.mtime) == 0) {
            m.type = MIGMSG_KNOWN_OBJECT;
            m.size = size;
            m.etag = etag ? etag : "";
            resume_add (rc, &m);
        }
        else if (!strcmp (st, "uploading")
                 || (!strcmp (st, "failed")
                     && json_is_true (json_object_get (o, "claimed")))) {
            m.type = MIGMSG_CLAIM;
            resume_add (rc, &m);
        }
        return;
    }
    resume_pub (rc, rel, (int) k, json_object_get (o, "pub"));
    if (strcmp (st, "done") || !sm || !gm || !gc || ts_parse (sm, &m.mtime) < 0
        || ts_parse (gm, &m.gfs_mtime) < 0 || ts_parse (gc, &m.gfs_ctime) < 0)
        return;
    m.type = MIGMSG_KNOWN;
    m.ours = json_is_true (json_object_get (o, "ours"));
    m.ino = ino;
    m.gfs_size = gsize;
    m.size = size;
    resume_add (rc, &m);
}

static int known_cb (const char *key, const void *val, size_t len, void *arg)
{
    struct resume_ctx *rc = arg;
    char prefix[64];
    const char *rel;
    json_error_t jerr;
    json_t *o;
    size_t plen;

    job_prefix (rc->g, prefix, sizeof (prefix));
    plen = strlen (prefix);
    if (strncmp (key, prefix, plen) || !(rel = strchr (key + plen, '/')))
        return 0;
    if ((o = json_loadb (val, len, 0, &jerr))) {
        resume_record (rc, rel + 1, o);
        json_decref (o);
    }
    return 0;
}

/* "JOB.RESTART/K/REL u" -> upload, "JOB.RESTART/K/REL pN" -> part (REL
 * escaped); key starts with this job's prefix (plen bytes). */
static void resume_upload (struct resume_ctx *rc, const char *key, size_t plen,
                           const char *val, size_t len)
{
    struct migmsg m = { 0 };
    const char *sp = strrchr (key, ' ');
    char *end, rel[PATH_MAX], etag[512];
    long k;

    errno = 0;
    k = strtol (key + plen, &end, 10);
    if (!sp || errno || end == key + plen || *end != '/' || k < 0
        || k >= rc->g->spec.ndirs || sp < end + 1
        || key_unesc (end + 1, (size_t) (sp - end - 1), rel, sizeof (rel)) < 0)
        return;
    m.k = (int) k;
    m.rel = rel;
    if (!rc->parts && !strcmp (sp, " u")) {
        json_error_t jerr;
        json_t *o = json_loadb (val, len, 0, &jerr);
        json_int_t psize = 0, size = 0, mtime = 0;
        m.type = MIGMSG_UPLOAD;
        if (o
            && json_unpack (o, "{s:s s:I s:I s:I}", "upload_id", &m.upload_id,
                            "part_size", &psize, "size", &size, "mtime_ns",
                            &mtime)
                   == 0
            && psize > 0 && size >= 0) {
            m.part_size = psize;
            m.size = size;
            m.mtime_ns = mtime;
            resume_add (rc, &m);
            rc->uploads++;
        }
        json_decref (o);
    }
    else if (rc->parts && sp[1] == 'p' && len < sizeof (etag)) {
        unsigned long n = strtoul (sp + 2, &end, 10);
        if (*end || n < 1 || n > UINT32_MAX)
            return;
        memcpy (etag, val, len);
        etag[len] = '\0';
        m.type = MIGMSG_PART;
        m.n = (uint32_t) n;
        m.etag = etag;
        resume_add (rc, &m);
    }
}

static int uploads_cb (const char *key, const void *val, size_t len, void *arg)
{
    struct resume_ctx *rc = arg;
    char prefix[64];

    job_prefix (rc->g, prefix, sizeof (prefix));
    if (!strncmp (key, prefix, strlen (prefix)))
        resume_upload (rc, key, strlen (prefix), val, len);
    return 0;
}

int migrate_rec_resume (struct agent *a, struct mig *g, struct migmsg_batch *b,
                        int *uploads)
{
    struct resume_ctx rc = { .g = g, .b = b };
    char prefix[64];
    tier_error_t e;

    job_prefix (g, prefix, sizeof (prefix));
    /* what is published already (an earlier migrator's work) */
    (void) store_output_foreach (a->store, known_cb, &rc, &e);
    /* multipart uploads under way: each upload, then its parts (they
     * come first in key order) */
    (void) store_upload_foreach (a->store, prefix, uploads_cb, &rc, &e);
    rc.parts = true;
    (void) store_upload_foreach (a->store, prefix, uploads_cb, &rc, &e);
    *uploads = rc.uploads;
    return rc.rc;
}

/* ----------------------------------------------------------- reading */

static int list_cb (const char *key, const void *val, size_t len, void *arg)
{
    struct migrate_list *lc = arg;
    char prefix[64];
    const char *rel, *st = "";
    json_int_t k = 0;
    json_error_t jerr;
    json_t *o;
    size_t plen;

    plen = (size_t) snprintf (prefix, sizeof (prefix), "%u.%u/", lc->job_id,
                              lc->restart);
    if (strncmp (key, prefix, plen))
        return 0;
    if (!(rel = strchr (key + plen, '/'))) {
        if (!strcmp (key + plen, "late"))
            lc->late = true;
        return 0;
    }
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
        json_object_del (o, "pub"); /* the migrator's, for a resume */
        json_object_set_new (o, "file", json_string (rel));
        if (lc->g && k >= 0 && k < lc->g->spec.ndirs) {
            char path[PATH_MAX * 2];
            (void) snprintf (path, sizeof (path), "%s/%s", lc->g->spec.gfs[k],
                             rel);
            json_object_set_new (o, "path", json_string (path));
            json_object_set_new (o, "dir", json_string (lc->g->spec.gfs[k]));
        }
        json_array_append (lc->arr, o);
    }
    json_decref (o);
    return 0;
}

void migrate_rec_late (struct agent *a, const struct mig *g)
{
    json_t *o = json_pack ("{s:b s:I}", "late", 1, "time",
                           (json_int_t) time (NULL));
    char key[64], *s = o ? json_dumps (o, JSON_COMPACT) : NULL;
    struct store_kv kv;
    tier_error_t e;

    json_decref (o);
    if (!s)
        return;
    (void) snprintf (key, sizeof (key), "%u.%u/late", g->job_id, g->restart);
    kv.key = key;
    kv.val = s;
    if (store_output_apply (a->store, &kv, 1, &e) < 0)
        tier_log (LOG_ERR, "outputs of job %u: %s", g->job_id, e.text);
    free (s);
}

int migrate_rec_list (struct agent *a, struct migrate_list *lc,
                      tier_error_t *error)
{
    return store_output_foreach (a->store, list_cb, lc, error);
}

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

    job_prefix (fc->g, prefix, sizeof (prefix));
    if (strncmp (key, prefix, strlen (prefix))
        || json_array_size (fc->arr) >= fc->max
        || !(o = json_loadb (val, len, 0, &jerr)))
        return 0;
    /* an object output is named by its URL */
    if (json_unpack (o, "{s:s s?s s?s s?s}", "state", &st, "path", &path,
                     "error", &why, "url", &url)
            == 0
        && url)
        path = url;
    if (st && !strcmp (st, "failed") && path)
        json_array_append_new (fc->arr, json_pack ("{s:s s:s}", "path", path,
                                                   "error", why ? why : ""));
    json_decref (o);
    return 0;
}

json_t *migrate_rec_failures (struct agent *a, const struct mig *g, size_t max)
{
    struct fail_ctx fc = { .g = g, .max = max, .arr = json_array () };
    tier_error_t e;

    if (fc.arr)
        (void) store_output_foreach (a->store, fail_cb, &fc, &e);
    return fc.arr;
}

bool migrate_rec_arrived (struct agent *a, const struct mig *g, int k,
                          const char *rel, off_t size)
{
    json_t *o = record_get (a, g, k, rel);
    const char *st = NULL;
    json_int_t sz = -1;
    bool ok = false;

    if (o && json_unpack (o, "{s:s s?I}", "state", &st, "size", &sz) == 0)
        ok = !strcmp (st, "conflict")
             || (!strcmp (st, "done") && sz == (json_int_t) size);
    json_decref (o);
    return ok;
}
