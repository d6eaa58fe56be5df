/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fault.h - injected errors, short transfers and hangs of the GFS emulator */
#ifndef GFSEMU_FAULT_H
#define GFSEMU_FAULT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The requests a rule can name: the names are those of the counters in
 * stats.h ("any" in a rule is all of them). */
enum fault_op {
    FAULT_LOOKUP = 0,
    FAULT_GETATTR,
    FAULT_SETATTR,
    FAULT_OPEN,
    FAULT_CREATE,
    FAULT_OPENDIR,
    FAULT_READDIR,
    FAULT_READ,
    FAULT_WRITE,
    FAULT_FLUSH,
    FAULT_RELEASE,
    FAULT_FSYNC,
    FAULT_MKDIR,
    FAULT_MKNOD,
    FAULT_SYMLINK,
    FAULT_READLINK,
    FAULT_LINK,
    FAULT_UNLINK,
    FAULT_RMDIR,
    FAULT_RENAME,
    FAULT_STATFS,
    FAULT_NOPS,
};

/* What a request gets. */
enum fault_kind {
    FAULT_NONE = 0,
    FAULT_ERROR, /* answered with an errno value */
    FAULT_SHORT, /* READ or WRITE moves half its bytes (at least 1) */
    FAULT_HANG,  /* not answered until the rules change */
    FAULT_DELAY, /* answered as usual, after a number of milliseconds */
};

/* A parsed rule set.  Rules, one per line or separated by ';':
 *
 *   PATTERN:OP:ERROR[:WHEN]
 *
 * PATTERN is an fnmatch (3) glob (no flags: '*' matches '/' too) on the
 * path relative to the backing root, as the counters name it; it holds
 * no ':' or ';'.  OP is a request name or "any"; ERROR is EIO, ENOSPC,
 * EACCES, EDQUOT, EROFS, EPERM, ENOENT, ESTALE, ETIMEDOUT, EFBIG,
 * "short" (OP read, write or any: then it applies to reads and writes
 * only) or "hang"; WHEN is N (the Nth call the rule matches, from 1),
 * N+ (the Nth and every later one) or pP (each call with P percent
 * probability, 0 < P <= 100), by default every call.  A line "seed=S"
 * seeds the probabilities; '#' at the start of a line or after a blank
 * starts a comment; blank pieces are ignored.  The root (".") is never
 * faulted, so that the control files stay reachable.
 */
struct fault_rules;

/* Parse text (NULL or "" is no rules) with seed as the default seed.
 * Returns NULL with errno EINVAL and a message in msg (which rule, what
 * is wrong), or ENOMEM. */
struct fault_rules *fault_rules_parse (const char *text, uint64_t seed,
                                       char *msg, size_t msglen);
void fault_rules_destroy (struct fault_rules *r);

size_t fault_rules_count (const struct fault_rules *r);
uint64_t fault_rules_seed (const struct fault_rules *r);
/* The sum of the hits of every rule. */
uint64_t fault_rules_hits (const struct fault_rules *r);

/* One request of op on path: every rule whose pattern and op match counts
 * the call; the first of them that fires decides (and counts a hit).
 * Sets *err to the errno value for FAULT_ERROR, to the milliseconds for
 * FAULT_DELAY.  Thread-safe (atomic counters).
 */
enum fault_kind fault_rules_match (struct fault_rules *r, const char *path,
                                   enum fault_op op, int *err);

/* "seed=S", then each rule as written with its counters as a comment:
 * "RULE # hits H matched M".  The text parses back to the same rules. */
int fault_rules_format (const struct fault_rules *r, FILE *out);

/* Whether the Nth call (from 1) of rule idx fires at ppm parts per
 * million under seed: a pure function, so that a seed always picks the
 * same calls whatever the timing. */
int fault_chance (uint64_t seed, size_t idx, uint64_t n, uint32_t ppm);

/*
 * The emulator's rules at run time: requests check them under a read
 * lock, a new set replaces them (and releases every hung request).
 */
struct fault_ctl;

struct fault_ctl_stats {
    uint64_t rules;
    uint64_t hits; /* of the rules in force */
    uint64_t hung; /* requests hanging now */
    uint64_t seed;
};

/* Start with rules (taken, may be NULL); seed is the default seed of
 * later sets; at most hang_max requests hang at once (more are refused,
 * see fault_ctl_hang). */
struct fault_ctl *fault_ctl_create (struct fault_rules *rules, uint64_t seed,
                                    unsigned int hang_max);
void fault_ctl_destroy (struct fault_ctl *c);

/* Replace the rules by those of text; 0, or -1 with errno (and msg). */
int fault_ctl_set (struct fault_ctl *c, const char *text, char *msg,
                   size_t msglen);

/* fault_rules_match on the rules in force; FAULT_NONE when there are
 * none (without locking). */
enum fault_kind fault_ctl_check (struct fault_ctl *c, const char *path,
                                 enum fault_op op, int *err);

/* Hang: block until the rules are set again, or stop_f (arg) is true
 * (polled every 100 ms; e.g. the session has ended), holding no lock
 * meanwhile.  Returns 0 when released by new rules, 1 when stopped, -1
 * at once when hang_max requests hang already. */
int fault_ctl_hang (struct fault_ctl *c, int (*stop_f) (void *), void *arg);

void fault_ctl_get (struct fault_ctl *c, struct fault_ctl_stats *st);
int fault_ctl_format (struct fault_ctl *c, FILE *out);

#endif /* !GFSEMU_FAULT_H */
