/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrator.h - the migrator's own state, shared by its three modules
 * (migrator.c, migrator_gfs.c, migrate_obj.c); nothing of it is in the
 * agent's process but the code.
 */
#ifndef TIER_AGENT_MIGRATOR_H
#define TIER_AGENT_MIGRATOR_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "lib/conf.h"
#include "migrate.h"

#define MIGRATOR_SETTLE_MS 500      /* a file still written: again after */
#define MIGRATOR_RETRY_MAX_MS 60000 /* the longest backoff of a failure */

/* A version of a file: what tells it from another one. */
struct ident {
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

bool migrator_ident_eq (const struct ident *a, const struct stat *st);
void migrator_ident_set (struct ident *a, const struct stat *st);

/* What the migrator knows of one output. */
enum mfile_state {
    MF_PENDING = 1, /* to be published */
    MF_DONE,        /* published at src */
    MF_FAILED,      /* retried after its backoff */
    MF_CONFLICT,    /* somebody else's version is there */
    MF_GONE,        /* no output (any more) */
    MF_NOT_OUTPUT,  /* a whiteout, a fifo, a symlink */
};

struct mfile {
    int k;
    char *rel;
    struct ident src; /* the cached version last published (ino
                                 * 0: known from the agent's records, size
                                 * and mtime only) */
    struct ident gfs; /* what it became on the GFS */
    bool published;
    bool ours;      /* created on the GFS by this job */
    int64_t due_ms; /* 0: nothing to do */
    int64_t backoff_ms;
    enum mfile_state state;
    bool cleaned; /* a dead migrator's temporaries gone */
    /* a publishing recorded before its rename (intent, publishing): the
     * GFS file of this inode and size is this job's copy of the cached
     * version of size and mtime, whatever the records say after */
    struct {
        ino_t ino; /* 0: none */
        off_t gfs_size, size;
        struct timespec mtime;
        char sha256[65];
        bool ours;
    } pub;
    bool failing; /* a failure reported since the last
                                 * success (retries are not counted) */
    /* outputs to an object store (DIR=URL) */
    char etag[256];            /* the object's ETag after our upload */
    bool claimed;              /* the key is this job's (an upload of it
                                 * was recorded as begun, or done) */
    struct tier_s3_upload *up; /* a multipart upload under way, as far as
                                 * its state was reported */
    struct mfile *next;
};

struct mdir {
    int upperfd; /* the upper directory (opened as root) */
    int gfsfd;   /* the GFS directory (opened as the user);
                                 * -1 for outputs to an object store */
    char gfs[PATH_MAX];
    struct tier_url *url;     /* DIR=URL: the prefix the files go to */
    struct tier_creds *creds; /* s3: the user's, read when first needed */
};

struct migrator {
    uint32_t job_id, restart;
    char node[TIER_NODENAME_MAX];
    bool resumed; /* copies of a dead migrator may be left */
    int64_t job_start;
    int ndirs;
    struct mdir dirs[MIGRATE_DIRS_MAX];
    struct mfile *files;
    uint64_t held; /* bytes the write cache held at the last walk */
    const struct tier_conf *conf;
    char user[64]; /* the job's user (for the credentials) */
    uid_t uid;
    int chan;                      /* the channel to the agent */
    int64_t beat_ms, beat_last_ms; /* the stall watchdog's beats */
    /* commands that came while a publishing waited for noted, in order */
    struct stashed {
        int type;
        json_t *body;
        struct stashed *next;
    } * stash, **stash_tail;
};

/* migrator.c */
struct mfile *migrator_file (struct migrator *m, int k, const char *rel,
                             bool create);
void migrator_due (struct migrator *m, int k, const char *rel, int64_t delay);
/* Tell the agent (a lost agent is not an error here: the migrator dies
 * with it). */
void migrator_tell (struct migrator *m, const struct migmsg *msg);
/* f failed (err, text): backoff, and the report. */
void migrator_fail (struct migrator *m, struct mfile *f, int err,
                    const char *text);
/* f's name is no output any more: its record goes. */
void migrator_gone (struct migrator *m, struct mfile *f);
/* Tell the agent that f's temporary is complete as tmp (the version of
 * size, mtime and sha256), and wait until it recorded that: 0, or an
 * errno value (the agent did not answer: not published now). */
int migrator_intent (struct migrator *m, struct mfile *f,
                     const struct stat *tmp, const struct stat *st,
                     const char *sha256, bool ours);
/* The hex SHA-256 of fd's content (beating on the way when m is set). */
int migrator_sha256 (struct migrator *m, int fd, char hex[65]);
/* Tell the agent it is alive (not stuck), if it said nothing for its
 * beat interval: between chunks of a copy or a hash, and in its loop. */
void migrator_beat (struct migrator *m);
/* For the copy engine's and the endpoints' progress callbacks (arg: the
 * migrator). */
void migrator_progress (uint64_t done, uint64_t total, void *arg);
/* Wait for one of the node's GFS streams, telling the agent while it is
 * queued (a wait that is no stall); streams_give gives it back. */
void migrator_take_stream (struct migrator *m);
/* Is there nothing but a whiteout, or nothing at all, under rel in the
 * write cache k (the name is gone from the job's view)?  */
bool migrator_upper_gone (struct migrator *m, int k, const char *rel);

/* migrator_gfs.c: publish f (src: the cached file, st its stat) to the
 * GFS; take the names gone from the upper off it again */
void migrator_gfs_publish (struct migrator *m, struct mfile *f, int src,
                           const struct stat *st);
void migrator_gfs_unpublish (struct migrator *m, struct mfile *f);

/* migrate_obj.c: the same for DIR=URL, and the resume commands of its
 * outputs (known_object, claim, upload, part) */
void migrate_obj_publish (struct migrator *m, struct mfile *f, int src,
                          const struct stat *st);
void migrate_obj_unpublish (struct migrator *m, struct mfile *f);
int migrate_obj_setup (struct migrator *m, int k, const char *url);
void migrate_obj_resume (struct migrator *m, const struct migmsg *msg);

#endif /* !TIER_AGENT_MIGRATOR_H */
