/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate_obj.c - the migrator's outputs to an object store (DIR=URL)
 *
 * The job writes under DIR (the overlay's lower, never written here);
 * each file REL goes to the object URL + REL with the endpoint library,
 * as the user, with the user's own S3 credentials.
 *
 *   - Never clobbered: before the first upload the object is HEADed; one
 *     that exists is an object that was there before the job (or that
 *     somebody else wrote meanwhile): a conflict, the job's version is put
 *     beside it at URL + .tier-conflicts/JOB/NODE/REL.  Before an upload
 *     again (a file reopened after its migration) and before removing an
 *     object, its ETag must still be the one our upload made.
 *   - A key is claimed (claimed, recorded by the agent) before its upload
 *     starts, so that after a crash the object found there is known to be
 *     this job's, not another writer's.
 *   - S3 multipart uploads report their upload id (upload_begun) and each
 *     part's ETag (part_done) as they go; the agent keeps them in LMDB and
 *     hands them back to a restarted migrator (upload, part), whose upload
 *     resumes with the parts the server has.
 *   - WebDAV: the library's PUT to a temporary name, then MOVE.
 *
 * Owns these steps in the migrator's process (migrator.h); calls the
 * endpoint library (lib/endpoint.h) and the user's credentials file.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/clock.h"
#include "lib/endpoint.h"
#include "migrator.h"

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
            tier_errprintf (error,
                            "%s: no S3 credentials: SharedStateDir "
                            "is not set in tier.conf",
                            d->url->display);
            return NULL;
        }
        if (tier_creds_path (m->conf->shared_state_dir, m->user, path,
                             sizeof (path))
            < 0) {
            tier_errprintf (error, "%s: no S3 credentials: %s", d->url->display,
                            strerror (errno));
            return NULL;
        }
        if (!(d->creds = tier_creds_for_bucket (path, d->url->bucket, m->uid,
                                                error)))
            return NULL;
    }
    opts.creds = d->creds;
    /* beats of the stall watchdog while a part goes */
    opts.progress = migrator_progress;
    opts.progress_arg = m;
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
    migrator_fail (m, f, err, text);
}

static void tell_file (struct migrator *m, enum migmsg_type type,
                       const struct mfile *f)
{
    struct migmsg msg = { .type = type, .k = f->k, .rel = f->rel };

    migrator_tell (m, &msg);
}

struct upctx {
    struct migrator *m;
    struct mfile *f;
};

/* The library's multipart state after each step: what is new in it goes
 * to the agent, one message per part (a whole state of 10,000 parts
 * would make a large message). */
static int on_upload_state (const char *json, void *arg)
{
    struct upctx *u = arg;
    struct mfile *f = u->f;
    struct tier_s3_upload *up;
    tier_error_t err;

    if (!json) {
        if (f->up)
            tell_file (u->m, MIGMSG_UPLOAD_GONE, f);
        tier_s3_upload_destroy (f->up);
        f->up = NULL;
        return 0;
    }
    if (!(up = tier_s3_upload_load (json, &err)))
        return 0;
    if (!f->up || strcmp (f->up->upload_id, up->upload_id)) {
        struct migmsg msg = { .type = MIGMSG_UPLOAD_BEGUN,
                              .k = f->k,
                              .rel = f->rel,
                              .upload_id = up->upload_id,
                              .part_size = (int64_t) up->part_size,
                              .size = (int64_t) up->size,
                              .mtime_ns = (int64_t) up->mtime_ns };
        migrator_tell (u->m, &msg);
        tier_s3_upload_destroy (f->up);
        f->up = NULL;
    }
    for (unsigned i = 0; i < up->nparts; i++)
        if (up->etags[i] && !(f->up && i < f->up->nparts && f->up->etags[i])) {
            struct migmsg msg = { .type = MIGMSG_PART_DONE,
                                  .k = f->k,
                                  .rel = f->rel,
                                  .n = i + 1,
                                  .etag = up->etags[i] };
            migrator_tell (u->m, &msg);
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
    char side[PATH_MAX * 2];
    char why[TIER_ERROR_MAX + 200];
    struct migmsg msg = {
        .type = MIGMSG_CONFLICT, .k = f->k, .rel = f->rel, .side = side
    };
    tier_error_t err;

    (void) snprintf (side, sizeof (side), ".tier-conflicts/%u/%s/%s", m->job_id,
                     m->node, f->rel);
    if (!(ep = obj_endpoint (m, f->k, side, NULL, &err))
        || tier_endpoint_put (ep, src, &res, &err) < 0) {
        int e2 = errno;
        tier_endpoint_destroy (ep);
        if (e2 == ESTALE) {
            migrator_due (m, f->k, f->rel, MIGRATOR_SETTLE_MS);
            return;
        }
        (void) snprintf (why, sizeof (why),
                         "the object existed before "
                         "the job, or changed since its upload: not "
                         "overwritten, and this job's version could not be "
                         "put beside it: %s",
                         err.text);
        obj_fail (m, f, e2, why);
        return;
    }
    tier_endpoint_destroy (ep);
    migrator_ident_set (&f->src, st);
    f->state = MF_CONFLICT;
    f->backoff_ms = 0;
    f->failing = false;
    migrator_tell (m, &msg);
}

/* The upload went through: the version we made is the answer's ETag, or
 * HEAD's (WebDAV). */
static void obj_published (struct migrator *m, struct mfile *f,
                           struct tier_endpoint *ep,
                           const struct tier_endpoint_result *res,
                           const struct stat *st, const char *hex, int64_t us)
{
    struct migmsg msg = { .type = MIGMSG_OBJECT_DONE,
                          .k = f->k,
                          .rel = f->rel,
                          .size = st->st_size,
                          .mtime = st->st_mtim,
                          .sha256 = hex,
                          .us = us > 0 ? us : 0,
                          .first = !f->published,
                          .etag = f->etag };
    struct tier_endpoint_info info;
    tier_error_t err;

    tier_s3_upload_destroy (f->up);
    f->up = NULL;
    if (res->etag[0])
        (void) snprintf (f->etag, sizeof (f->etag), "%s", res->etag);
    else if (tier_endpoint_head (ep, &info, NULL, &err) == 0 && info.exists)
        (void) snprintf (f->etag, sizeof (f->etag), "%s", info.etag);
    else
        f->etag[0] = '\0';
    migrator_ident_set (&f->src, st);
    f->published = true;
    f->ours = true;
    f->state = MF_DONE;
    f->backoff_ms = 0;
    f->failing = false;
    migrator_tell (m, &msg);
}

/* Upload the file (the key is free, or ours): claimed first. */
static void obj_upload (struct migrator *m, struct mfile *f,
                        struct tier_endpoint *ep, int src,
                        const struct stat *st)
{
    struct tier_endpoint_result res;
    tier_error_t err;
    char hex[65];
    int64_t t0;

    /* claimed before any byte goes: after a crash the object is ours */
    tell_file (m, MIGMSG_CLAIMED, f);
    f->claimed = true;
    t0 = tier_now_us ();
    if (migrator_sha256 (m, src, hex) < 0) {
        migrator_fail (m, f, errno, strerror (errno));
        return;
    }
    if (tier_endpoint_put (ep, src, &res, &err) < 0) {
        if (errno == ESTALE) /* still written */
            migrator_due (m, f->k, f->rel, MIGRATOR_SETTLE_MS);
        else
            obj_fail (m, f, errno, err.text);
        return;
    }
    obj_published (m, f, ep, &res, st, hex, tier_now_us () - t0);
}

void migrate_obj_publish (struct migrator *m, struct mfile *f, int src,
                          const struct stat *st)
{
    struct upctx uc = { .m = m, .f = f };
    struct tier_endpoint_opts opts = { .state = on_upload_state,
                                       .state_arg = &uc };
    struct tier_endpoint_info info;
    struct tier_endpoint *ep = NULL;
    char *resume = NULL;
    tier_error_t err;

    /* this version is kept beside another writer's object already */
    if (f->state == MF_CONFLICT && migrator_ident_eq (&f->src, st))
        return;
    if (f->up && !(resume = tier_s3_upload_dump (f->up))) {
        migrator_fail (m, f, ENOMEM, "out of memory");
        return;
    }
    opts.resume = resume;
    if (!(ep = obj_endpoint (m, f->k, f->rel, &opts, &err))
        || tier_endpoint_head (ep, &info, NULL, &err) < 0)
        obj_fail (m, f, errno, err.text);
    else if (obj_foreign (f, &info))
        obj_conflict (m, f, src, st);
    else
        obj_upload (m, f, ep, src, st);
    tier_endpoint_destroy (ep);
    free (resume);
}

/* A name of an object output gone from the job's view (renamed, deleted):
 * abort its unfinished upload, and remove the object if it is still the
 * version this job made (or a key it claimed).  A failure to reach the
 * server leaves it for the next sync. */
void migrate_obj_unpublish (struct migrator *m, struct mfile *f)
{
    struct tier_endpoint_info info;
    struct tier_endpoint *ep;
    tier_error_t err;

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
        tell_file (m, MIGMSG_UPLOAD_GONE, f);
    }
    if (tier_endpoint_head (ep, &info, NULL, &err) < 0
        || (info.exists && !obj_foreign (f, &info)
            && tier_endpoint_remove (ep, NULL, &err) < 0)) {
        tier_endpoint_destroy (ep);
        return;
    }
    tier_endpoint_destroy (ep);
    migrator_gone (m, f);
    f->published = false;
    f->claimed = false;
    f->etag[0] = '\0';
    f->state = MF_GONE;
}

int migrate_obj_setup (struct migrator *m, int k, const char *url)
{
    static bool curl_ready;
    struct migmsg msg = { .type = MIGMSG_ERROR };
    struct mdir *d = &m->dirs[k];
    char text[TIER_ERROR_MAX + 64];
    tier_error_t err;

    /* DIR=URL: the files go to the URL; DIR is not written */
    d->gfsfd = -1;
    if (!(d->url = tier_url_parse_output (url, &err))
        || (!curl_ready && tier_endpoint_init (&err) < 0))
        msg.error = err.text;
    else if (d->upperfd < 0) {
        (void) snprintf (text, sizeof (text), "%s the write cache is gone",
                         d->url->display);
        msg.error = text;
    }
    else {
        curl_ready = true;
        return 0;
    }
    migrator_tell (m, &msg);
    return -1;
}

/* upload: the library's own state format, for opts.resume. */
static void resume_upload (struct migrator *m, struct mfile *f,
                           const struct migmsg *c)
{
    struct tier_url *u;
    tier_error_t err;
    char *text = NULL;
    json_t *o;

    if (!(u = tier_url_child (m->dirs[c->k].url, c->rel, &err)))
        return;
    o = json_pack ("{s:i s:s s:s s:I s:I s:I s:[]}", "version", 1, "url",
                   u->text, "upload_id", c->upload_id, "size",
                   (json_int_t) c->size, "mtime_ns", (json_int_t) c->mtime_ns,
                   "part_size", (json_int_t) c->part_size, "parts");
    tier_url_destroy (u);
    if (o)
        text = json_dumps (o, JSON_COMPACT);
    json_decref (o);
    tier_s3_upload_destroy (f->up);
    f->up = text ? tier_s3_upload_load (text, &err) : NULL;
    free (text);
    f->claimed = true;
}

/* What a restarted agent knows of object outputs (its records):
 *   known_object   published, this version, this ETag
 *   claim          an upload of it had begun
 *   upload, part   a multipart upload and its parts
 */
void migrate_obj_resume (struct migrator *m, const struct migmsg *c)
{
    struct mfile *f;

    if (!m->dirs[c->k].url
        || !(f = migrator_file (m, c->k, c->rel, c->type != MIGMSG_PART)))
        return;
    switch (c->type) {
        case MIGMSG_KNOWN_OBJECT:
            f->published = f->ours = f->claimed = true;
            f->state = MF_DONE;
            (void) snprintf (f->etag, sizeof (f->etag), "%.255s", c->etag);
            f->src.ino = 0; /* adopted when unchanged */
            f->src.size = (off_t) c->size;
            f->src.mtime = c->mtime;
            break;
        case MIGMSG_CLAIM:
            f->claimed = true;
            break;
        case MIGMSG_UPLOAD:
            resume_upload (m, f, c);
            break;
        case MIGMSG_PART:
            if (f->up && c->n >= 1 && c->n <= f->up->nparts
                && !f->up->etags[c->n - 1])
                f->up->etags[c->n - 1] = strdup (c->etag);
            break;
        default:
            break;
    }
}
