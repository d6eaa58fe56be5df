/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* endpoint.h - object-store and HTTP endpoints: s3://, https://, http://
 *
 * Stage-in fetches an object into an open file; stage-out sends a file's
 * contents to an object.  The calls block (the agent makes them from a
 * forked worker, never from its request loop) and honour a cancel flag, a
 * shared bandwidth limit (struct tier_copy_limit of lib/copy.h) and a
 * progress callback.
 *
 *   struct tier_url *url = tier_url_parse ("s3://bucket/a/key", &error);
 *   struct tier_creds *creds = tier_creds_load (path, "default", uid,
 *                                               &error);
 *   struct tier_endpoint_opts opts = { .creds = creds, .cancel = &stop };
 *   struct tier_endpoint *ep = tier_endpoint_create (url, &opts, &error);
 *   tier_endpoint_get (ep, fd, 0, &res, &error);     or _put (ep, fd, ...)
 *   tier_endpoint_destroy (ep);
 *
 * Back-ends (the Slurm _p_ pattern: one struct tier_backend_ops per
 * scheme, functions named <impl>_<op>):
 *
 *  s3     GET (with Range to resume), HEAD, PUT of small files, multipart upload
 *         of large ones (parts retried with backoff; the upload's state is
 *         handed to the caller after every part, as JSON, so that an
 *         upload resumes after a crash), AbortMultipartUpload.  SigV4
 *         signed; path-style addressing when the credentials name an
 *         endpoint (s3rver, MinIO, Ceph), virtual-hosted on AWS.
 *  http   http:// and https://.  GET (with Range to resume), HEAD.  PUT as
 *         WebDAV by default: the data goes to a temporary name beside the
 *         target (".NAME.tier-XXXXXXXXXX.part"), then MOVE renames it, so
 *         the target appears complete or not at all; with
 *         TIER_ENDPOINT_PLAIN_PUT a single PUT, which is NOT atomic (a
 *         failed upload may leave a partial object under the target).
 *
 * TLS is always verified (peer and host name) against opts->ca_file or
 * the system's CA store; credentials in URLs are refused; messages show a
 * URL's query as "?..." (it may hold a presigned signature).
 *
 * Errors are -1/NULL with errno set and a line in *error naming the URL
 * and the problem: EINVAL (a bad URL or option), ENOENT (404),
 * EACCES (401/403), ECANCELED (*opts->cancel), ETIMEDOUT, ECONNREFUSED,
 * EHOSTUNREACH, EPROTO (an unexpected answer), ENOTSUP (the server lacks an
 * operation), ESTALE (the object or file changed during the transfer),
 * EIO (other transfer failures), EFBIG (too large for S3).
 */
#ifndef TIER_ENDPOINT_H
#define TIER_ENDPOINT_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "copy.h"
#include "error.h"
#include "url.h"

/*
 * Prefix URLs (the parser is in url.h).
 */

/* A new URL for name (a relative path, '/'-separated, no "." or ".."
 * components) under the prefix url.  For http(s) each component is
 * percent-encoded.  Returns NULL with errno set (EINVAL: not a prefix, or
 * a bad name).
 */
struct tier_url *tier_url_child (const struct tier_url *url,
                                 const char *name, tier_error_t *error);

/*
 * Credentials: an INI-like file, one section per profile,
 *
 *   [default]
 *   access_key = AKIA...
 *   secret_key = ...
 *   region = us-east-1                  (default us-east-1)
 *   endpoint = http://127.0.0.1:4568    (optional: a non-AWS S3 service;
 *                                        implies path-style addressing)
 *   session_token = ...                 (optional, temporary credentials)
 *   addressing = path | virtual         (optional)
 *
 * '#' or ';' starts a comment line; blanks around keys and values are
 * ignored.  Where it lives: SharedStateDir/users/USER/credentials (see
 * tier_creds_path and doc/endpoints.md).  The file must be a regular file
 * (not a symlink) owned by the expected user and readable by nobody else
 * (no group or other bits): anything else is refused, naming the file and
 * its mode.  Errors name the file, line and key, never a value.
 */

enum tier_s3_addressing {
    TIER_S3_ADDR_AUTO = 0,          /* path-style with an endpoint or a
                                     * bucket with '.', else virtual */
    TIER_S3_ADDR_PATH,
    TIER_S3_ADDR_VIRTUAL,
};

struct tier_creds {
    char *file;                     /* where they came from */
    char *profile;
    char *access_key;
    char *secret_key;               /* never logged */
    char *session_token;            /* never logged; or NULL */
    char *region;
    char *endpoint;                 /* or NULL: AWS */
    enum tier_s3_addressing addressing;
};

/* Parse text (the contents of file, for messages) and take profile's
 * section.  Returns new credentials, or NULL with errno set (EINVAL: a
 * syntax error, unknown or repeated key, a missing access_key or
 * secret_key, a bad endpoint; ENOENT: no such profile).
 */
struct tier_creds *tier_creds_parse (const char *text, const char *file,
                                     const char *profile,
                                     tier_error_t *error);

/* Open path (no symlink), check that it is a regular file owned by uid
 * with mode 0600 or stricter (lib/trust.h's USER_PRIVATE), read it (at
 * most 64 KiB) and parse it.
 * errno EPERM for a file with the wrong owner or mode.
 */
struct tier_creds *tier_creds_load (const char *path, const char *profile,
                                    uid_t uid, tier_error_t *error);

/* The credentials for s3://BUCKET/... in the user's file at path: the
 * profile named like the bucket if the file has one, else [default].
 * NULL with errno set and a message naming the file (never a value):
 * ENOENT for no file or neither profile, EPERM for a refused file.
 */
struct tier_creds *tier_creds_for_bucket (const char *path,
                                          const char *bucket, uid_t uid,
                                          tier_error_t *error);

/* Wipe the secrets and free.  NULL-safe. */
void tier_creds_destroy (struct tier_creds *creds);

/* SharedStateDir/users/USER/credentials into buf.  Returns 0, or -1 with
 * errno ENAMETOOLONG or EINVAL (an empty directory or a user name with
 * '/'). */
int tier_creds_path (const char *shared_state_dir, const char *user,
                     char *buf, size_t size);

/*
 * Multipart uploads.
 */

#define TIER_S3_MIN_PART (5ull << 20)           /* 5 MiB */
#define TIER_S3_MAX_PART (5ull << 30)           /* 5 GiB */
#define TIER_S3_MAX_PARTS 10000u
#define TIER_S3_MAX_OBJECT (5ull << 40)         /* 5 TiB */
#define TIER_S3_DEFAULT_PART (8ull << 20)       /* 8 MiB */
#define TIER_S3_DEFAULT_THRESHOLD (64ull << 20) /* multipart above */

/* The part size for an object of size bytes: want (0: the default 8 MiB),
 * at least 5 MiB, grown (in whole MiB) until 10,000 parts hold size.
 * Returns 0 with errno EFBIG when size exceeds what S3 can store (5 TiB).
 */
uint64_t tier_s3_part_size (uint64_t size, uint64_t want);

/* The state of one multipart upload: what a caller persists so that the
 * upload resumes after a crash.  etags[i] is the ETag of part i + 1, or
 * NULL while that part is not known to be uploaded. */
struct tier_s3_upload {
    char *url;                      /* s3://bucket/key */
    char *upload_id;
    uint64_t size;                  /* the source's size ... */
    int64_t mtime_ns;               /* ... and mtime when it started */
    uint64_t part_size;
    unsigned int nparts;
    char **etags;
};

/* As JSON text ({"version":1,"url":...,"upload_id":...,"size":...,
 * "mtime_ns":...,"part_size":...,"parts":[{"n":1,"etag":"..."},...]}),
 * malloc'ed; NULL with errno set. */
char *tier_s3_upload_dump (const struct tier_s3_upload *up);

/* Parse tier_s3_upload_dump's text.  NULL with errno EINVAL and a message
 * when it is not one (the upload id is not printed). */
struct tier_s3_upload *tier_s3_upload_load (const char *json,
                                            tier_error_t *error);
void tier_s3_upload_destroy (struct tier_s3_upload *up);

/*
 * Endpoints.
 */

enum tier_endpoint_flags {
    /* http(s) PUT: one PUT to the target (not atomic) instead of WebDAV
     * PUT to a temporary name + MOVE. */
    TIER_ENDPOINT_PLAIN_PUT = 0x01,
    /* s3 PUT: send the payload as UNSIGNED-PAYLOAD, read once, without
     * Content-MD5.  By default each PUT and part is read twice: once for
     * its SHA-256 (signed) and MD5 (Content-MD5: the server rejects
     * corrupted data), once to send it. */
    TIER_ENDPOINT_UNSIGNED = 0x02,
    /* s3 PUT: never abort a multipart upload that failed, even without a
     * state callback (the caller aborts it later). */
    TIER_ENDPOINT_KEEP_UPLOAD = 0x04,
};

/* Progress: bytes moved so far (resumed bytes count as done) and the
 * total when known (0 otherwise).  Called from the calling thread between
 * blocks of data; keep it short. */
typedef void (*tier_endpoint_progress_f) (uint64_t done, uint64_t total,
                                          void *arg);

/* Multipart state: json is the upload's state (tier_s3_upload_dump) after
 * CreateMultipartUpload and after every part, or NULL once the upload is
 * complete or aborted (the state can be dropped).  Persist it (write,
 * fsync, rename) before returning: a part acknowledged here is never sent
 * again after a resume.  Return -1 to stop the upload (the call then
 * fails with the errno the callback left, and keeps the upload). */
typedef int (*tier_endpoint_state_f) (const char *json, void *arg);

struct tier_endpoint_opts {
    unsigned int flags;             /* enum tier_endpoint_flags, or'ed */
    const struct tier_creds *creds; /* s3 (required); not copied */
    const char *ca_file;            /* PEM CA bundle; NULL: system store */
    long connect_timeout_ms;        /* 0: 30 s */
    long stall_timeout_s;           /* fail when no byte moved for this
                                     * long; 0: 60 s */
    long timeout_s;                 /* per request, all included; 0: none */
    int retries;                    /* per request or part, after the first
                                     * try; 0: 4; -1: none */
    long retry_delay_ms;            /* first backoff (doubles, with jitter,
                                     * at most 30 s); 0: 500 ms */
    uint64_t part_size;             /* s3 multipart (tier_s3_part_size);
                                     * 0: 8 MiB */
    uint64_t multipart_threshold;   /* s3: multipart above; 0: 64 MiB */
    const char *resume;             /* s3 PUT: a state from the state
                                     * callback of an earlier, interrupted
                                     * PUT of the same file and URL */
    atomic_int *cancel;             /* non-zero: stop with ECANCELED */
    struct tier_copy_limit *limit;  /* shared bandwidth limit, or NULL */
    tier_endpoint_progress_f progress;
    void *progress_arg;
    tier_endpoint_state_f state;
    void *state_arg;
};

/* What one call did (zeroed first, filled even when it fails). */
struct tier_endpoint_result {
    uint64_t bytes;                 /* payload bytes sent or received */
    uint64_t size;                  /* the object's or file's size */
    unsigned int requests;          /* HTTP requests made */
    unsigned int retries;           /* of which retries */
    unsigned int parts;             /* multipart: parts in the object */
    unsigned int parts_resumed;     /* multipart: parts not sent again */
    int http_status;                /* of the last response, or 0 */
    int aborted_upload;             /* a failed multipart upload was
                                     * aborted */
    char etag[256];                 /* PUT: the new object's ETag when the
                                     * answer named it (s3 PUT and
                                     * CompleteMultipartUpload; WebDAV's
                                     * MOVE does not: HEAD), or "" */
};

/* What HEAD says about an object. */
struct tier_endpoint_info {
    int exists;                     /* 0: the server said 404 (or 410) */
    uint64_t size;                  /* Content-Length, when it exists */
    char etag[256];                 /* as sent (quotes kept), or "" */
};

struct tier_endpoint;

struct tier_backend_ops {
    const char *name;
    int (*get) (struct tier_endpoint *ep, int fd, uint64_t offset,
                struct tier_endpoint_result *res, tier_error_t *error);
    int (*put) (struct tier_endpoint *ep, int fd,
                struct tier_endpoint_result *res, tier_error_t *error);
    int (*remove) (struct tier_endpoint *ep,
                   struct tier_endpoint_result *res, tier_error_t *error);
    int (*abort_upload) (struct tier_endpoint *ep,
                         const struct tier_s3_upload *up,
                         struct tier_endpoint_result *res,
                         tier_error_t *error);
    int (*head) (struct tier_endpoint *ep, struct tier_endpoint_info *info,
                 struct tier_endpoint_result *res, tier_error_t *error);
};

/* The back-end of a scheme (never NULL for a parsed URL's scheme). */
const struct tier_backend_ops *tier_backend_ops_find (
    enum tier_url_scheme scheme);

/* An endpoint for one URL (copied) with options (copied; creds, ca_file,
 * cancel, limit and the callbacks' args are not: they must outlive the
 * endpoint).  NULL with errno set: EINVAL (an s3 URL without credentials,
 * a prefix URL, a bad endpoint in the credentials), ENOMEM, EIO (libcurl).
 * Call curl_global_init before any thread is started (tier_endpoint_init).
 */
struct tier_endpoint *tier_endpoint_create (
    const struct tier_url *url, const struct tier_endpoint_opts *opts,
    tier_error_t *error);
void tier_endpoint_destroy (struct tier_endpoint *ep);

/* curl_global_init/cleanup: once per process, before threads. */
int tier_endpoint_init (tier_error_t *error);
void tier_endpoint_fini (void);

/* Fetch the object into fd.  With offset > 0, fd already holds the first
 * offset bytes of this object (an earlier, interrupted GET): only the rest
 * is asked for (Range), and if the server sends the whole object instead
 * the file is rewritten from the start.  Interrupted transfers are retried
 * from where they stopped, with If-Range on the object's ETag so that a
 * changed object is fetched whole again.  A regular fd is written with
 * pwrite from offset and truncated to the object's size; a pipe or socket
 * gets write (offset must be 0, and retries then restart nothing: a
 * failure after the first byte is final).  fd's own file offset is not
 * used.
 */
int tier_endpoint_get (struct tier_endpoint *ep, int fd, uint64_t offset,
                       struct tier_endpoint_result *res,
                       tier_error_t *error);

/* Send the contents of the regular file open for reading as fd (from 0 to
 * its size at the start; it must not change meanwhile: ESTALE) to the
 * URL, as described for each back-end above.
 */
int tier_endpoint_put (struct tier_endpoint *ep, int fd,
                       struct tier_endpoint_result *res,
                       tier_error_t *error);

/* Delete the object (s3 DELETE, http DELETE).  A missing object is not an
 * error. */
int tier_endpoint_remove (struct tier_endpoint *ep,
                          struct tier_endpoint_result *res,
                          tier_error_t *error);

/* HEAD the object: info->exists, and its size and ETag.  A missing
 * object (404) is not an error.  HEAD answers carry no body, so a
 * refusal says less than a GET's would (HTTP 403 without S3's code).
 */
int tier_endpoint_head (struct tier_endpoint *ep,
                        struct tier_endpoint_info *info,
                        struct tier_endpoint_result *res,
                        tier_error_t *error);

/* Abort the multipart upload of a persisted state (e.g. an upload whose
 * file is gone).  ENOTSUP when the server does not implement
 * AbortMultipartUpload (s3rver), EINVAL for a state of another URL. */
int tier_endpoint_abort_upload (struct tier_endpoint *ep, const char *json,
                                struct tier_endpoint_result *res,
                                tier_error_t *error);

#endif /* !TIER_ENDPOINT_H */
