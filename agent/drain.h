/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* drain.h - the block cache's drain child (issue 18)
 *
 * One per job and node, with the job's credentials: it holds the job's
 * write log (lib/blog.h) and a descriptor of every file the job's
 * processes registered, and applies the log to the files
 * (lib/bdrain.h).  The agent does not start it yet: doc/block-cache.md,
 * "What comes next", says how it will.
 *
 * The channel (agent/chmsg.h), agent -> drain:
 *   file {file} + its descriptor   a file the job registered (id file)
 *   flush {id}                     drain what is committed now; answered
 *                                  by flushed {id, tail}
 *   end {}                         the job ended: drain everything, say
 *                                  ended, exit
 * drain -> agent:
 *   progress {records, bytes, used, tail}   at most once a second
 *   failed {file, seq, errno, error}        a pass failed (once per file
 *                                           and errno until it clears);
 *                                           the records stay, retried
 *                                           every second
 *   flushed {id, tail}
 *   ended {records, bytes, abandoned, refused}
 *   damaged {error}                the log does not add up: it stops
 *
 * When the agent dies (the channel closes) the drain goes on alone: it
 * outlives the agent (child_spec.outlive), and a new agent takes its
 * descriptors (pidfd_getfd) and ends it; with nobody coming, it exits
 * once the log has stayed empty for a minute.
 *
 * Pacing by the log's fill (drain_budget): above the high watermark
 * (50 %) at full speed until below the low one (45 %), as dm-writecache
 * does; below, a trickle of the given bytes a second, so that a job
 * writing little keeps little in the log without taking the GFS from
 * others; a flush or the job's end at full speed.
 */
#ifndef TIER_AGENT_DRAIN_H
#define TIER_AGENT_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "chmsg.h"

enum drmsg_type {
    DRMSG_FILE = 1,
    DRMSG_FLUSH,
    DRMSG_END,
    DRMSG_PROGRESS,
    DRMSG_FAILED,
    DRMSG_FLUSHED,
    DRMSG_ENDED,
    DRMSG_DAMAGED,
};

extern const struct chmsg_proto drmsg_proto;

#define DRAIN_FILES_MAX 4096 /* files one job registers on a node */
#define DRAIN_HIGH_PCT 50
#define DRAIN_LOW_PCT 45

struct drain_arg {
    int logfd;           /* the job's log, read-write */
    unsigned blog_flags; /* BLOG_PMEM, BLOG_RECOVER */
    int tick_ms;         /* a pass at most this often (10) */
    uint64_t trickle;    /* bytes a second below the watermark */
};

struct drain_pace {
    bool hurry; /* above the high watermark, not yet
                                     * below the low one */
};

/* The byte budget of the next pass (0: no limit), for a log holding used
 * of cap bytes; flushing: a flush or the job's end waits. */
uint64_t drain_budget (struct drain_pace *p, uint64_t used, uint64_t cap,
                       bool flushing, uint64_t trickle, int tick_ms);

/* The child's main (child_spec.main): the exit status. */
int drain_main (void *arg, int chan);

#endif /* !TIER_AGENT_DRAIN_H */
