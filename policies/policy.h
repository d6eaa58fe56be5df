/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy.h - the directory policy model: parse, validate, resolve,
 * freeze.  See doc/policies.md.
 *
 * Pure code: no I/O and no globals (Jansson parses and prints JSON).  It
 * is linked by tierd and tierctl only, never by tier.so (libc only).
 *
 * A policy says what a directory is (its role) and how tier treats it
 * (attributes).  Policies come in layers -- site (policies.d/NAME.json),
 * user (the user's store), job (the --tier-* options) -- and a path gets
 * the policy of the longest matching directory prefix, on component
 * boundaries, in the highest layer that has one (job > user > site),
 * unless a locked site policy covers the path: then the site layer alone
 * decides.  A set holds the policies of any number of documents and
 * layers; each policy remembers its layer and source (the file, or
 * "command line", or the option it came from).
 */
#ifndef TIER_POLICY_H
#define TIER_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

#define TIER_POLICY_FORMAT 1            /* "version" of a layer document */
#define TIER_POLICY_MAX 4096            /* policies in one set */
#define TIER_POLICY_TEXT_MAX (1024 * 1024)      /* one document */

enum tier_policy_role {
    TIER_POLICY_NONE = 0,       /* the GFS as it is: no tier */
    TIER_POLICY_BATCH,          /* read-only, shared: BB replica cache */
    TIER_POLICY_PIPELINE,       /* private intermediates: NVDIMM overlay */
    TIER_POLICY_ENDPOINT,       /* inputs and outputs: staged, migrated */
};

enum tier_policy_layer {
    TIER_LAYER_SITE = 0,
    TIER_LAYER_USER,
    TIER_LAYER_JOB,
};
#define TIER_LAYER_COUNT 3

enum tier_policy_keep {
    TIER_PKEEP_NEVER = 0,
    TIER_PKEEP_ON_FAILURE,
    TIER_PKEEP_ALWAYS,
};

enum tier_policy_tier {
    TIER_PTIER_BB = 0,
    TIER_PTIER_NVDIMM,
};

enum tier_policy_share {
    TIER_PSHARE_USER = 0,
    TIER_PSHARE_WORLD,
};

enum tier_policy_prefetch {
    TIER_PREFETCH_OFF = 0,
    TIER_PREFETCH_SEQUENTIAL,
    TIER_PREFETCH_STRIDE,
};

/* Which way an endpoint directory is staged: an output directory (a
 * write cache migrated to the GFS) or an input (a snapshot copied to the
 * node's fast tier before the tasks start, read-only at its GFS path). */
enum tier_policy_stage {
    TIER_PSTAGE_OUT = 0,
    TIER_PSTAGE_IN,
    TIER_PSTAGE_NONE, /* the files stay on the GFS: the block cache */
};

/* Which attributes a policy gives explicitly (struct tier_policy.set). */
enum {
    TIER_PA_TTL = 1 << 0,
    TIER_PA_REVALIDATE = 1 << 1,
    TIER_PA_KEEP = 1 << 2,
    TIER_PA_TIER = 1 << 3,
    TIER_PA_SHARE = 1 << 4,
    TIER_PA_SIZE = 1 << 5,
    TIER_PA_WINDOW = 1 << 6,
    TIER_PA_BLOCK = 1 << 7,
    TIER_PA_PREFETCH = 1 << 8,
    TIER_PA_LOCKED = 1 << 9,
    TIER_PA_COMMENT = 1 << 10,
    TIER_PA_STAGE = 1 << 11,
};

/* Defaults of attributes a policy does not give. */
#define TIER_POLICY_REVALIDATE_DEFAULT 30       /* seconds (DESIGN 3.2) */
#define TIER_POLICY_BLOCK_DEFAULT (1024 * 1024) /* prefetch block */

struct tier_policy {
    char *dir;                  /* absolute, normalised */
    enum tier_policy_role role;
    unsigned set;               /* TIER_PA_* given explicitly */
    uint64_t ttl;               /* s: replicas older than this go */
    uint64_t revalidate;        /* s: recheck the source at most this often */
    enum tier_policy_keep keep; /* pipeline data back to the GFS at end */
    enum tier_policy_tier tier;
    enum tier_policy_share share;       /* site only */
    uint64_t size;              /* bytes: scratch reservation */
    uint64_t window;            /* bytes: NVDIMM write-behind window */
    uint64_t block;             /* bytes: prefetch block */
    enum tier_policy_prefetch prefetch;
    enum tier_policy_stage stage;       /* endpoint: out (default) or in */
    bool locked;                /* site only: users cannot override it */
    char *comment;
    enum tier_policy_layer layer;
    char *source;               /* file, "command line", "--tier-batch" */
};

struct tier_policy_set {
    struct tier_policy *v;
    int n;
    int cap;
};

/* Names of the enumerations (NULL for a value out of range) and their
 * parsers (-1 if the name is unknown).
 */
const char *tier_policy_role_name (enum tier_policy_role role);
int tier_policy_role_parse (const char *name);
const char *tier_policy_layer_name (enum tier_policy_layer layer);
int tier_policy_layer_parse (const char *name);
const char *tier_policy_keep_name (enum tier_policy_keep keep);
const char *tier_policy_tier_name (enum tier_policy_tier tier);
const char *tier_policy_share_name (enum tier_policy_share share);
const char *tier_policy_prefetch_name (enum tier_policy_prefetch p);
const char *tier_policy_stage_name (enum tier_policy_stage stage);

/* Sets.  _add copies p (dir, comment and source are duplicated) and
 * replaces a policy of the same directory and layer.  Returns 0, or -1
 * with errno ENOMEM, or E2BIG past TIER_POLICY_MAX.
 */
struct tier_policy_set *tier_policy_set_create (void);
void tier_policy_set_destroy (struct tier_policy_set *set);
int tier_policy_add (struct tier_policy_set *set, const struct tier_policy *p,
                     tier_error_t *error);

/* Remove the policy of dir (normalised) in layer; returns 1 if one was
 * removed, 0 if there was none.
 */
int tier_policy_remove (struct tier_policy_set *set, const char *dir,
                        enum tier_policy_layer layer);

/* The policy of exactly dir in layer, or NULL. */
const struct tier_policy *tier_policy_find (const struct tier_policy_set *set,
                                            const char *dir,
                                            enum tier_policy_layer layer);

/* Start a policy: dir made absolute against nothing (it must already be
 * absolute), normalised; ".." is refused (it means something else once
 * a symlink is involved).  The caller frees it with tier_policy_clear.
 */
int tier_policy_init (struct tier_policy *p, const char *dir,
                      enum tier_policy_role role, enum tier_policy_layer layer,
                      const char *source, tier_error_t *error);
void tier_policy_clear (struct tier_policy *p);

/* Set one attribute from its text, as given on a command line ("ttl",
 * "7d").  Errors name the source, the directory and the key.
 */
int tier_policy_set_attr (struct tier_policy *p, const char *key,
                          const char *value, tier_error_t *error);

/* Check the whole policy: each attribute applies to its role, share and
 * locked only in the site layer.
 */
int tier_policy_validate (const struct tier_policy *p, tier_error_t *error);

/* Parse a layer document (see doc/policies.md)
 *
 *     { "version": 1,
 *       "policies": { "/gfs/db": { "role": "batch", "ttl": "7d" } } }
 *
 * named name (for messages) into set, every policy of it in layer.  All
 * or nothing: on error set is unchanged and error says "name: ...", with
 * the directory and the key, never the offending value.
 */
int tier_policy_parse (struct tier_policy_set *set, const char *text,
                       size_t len, enum tier_policy_layer layer,
                       const char *name, tier_error_t *error);

/* The policies of one layer of set as a layer document (malloc'd text,
 * keys sorted, two-space indent), or NULL with errno.
 */
char *tier_policy_dump (const struct tier_policy_set *set,
                        enum tier_policy_layer layer);

/* One policy as JSON: role and the attributes it gives, as text ("7d",
 * "16M"); with origin, also dir, layer and source.
 */
json_t *tier_policy_to_json (const struct tier_policy *p, bool origin);

/* Every attribute of p with defaults filled in, for display. */
json_t *tier_policy_effective_json (const struct tier_policy *p);

/* A frozen set: an array of policies with their origin (as
 * tier_policy_to_json with origin) -- and back.  _from_json is as strict
 * as tier_policy_parse; name is for messages.
 */
json_t *tier_policy_set_to_json (const struct tier_policy_set *set);
int tier_policy_set_from_json (struct tier_policy_set *set, json_t *array,
                               const char *name, tier_error_t *error);

/* The job layer from the job's options as the registry records them (a
 * JSON object with batch, scratch and stage_out lists: DIR[,DIR], '\'
 * escaping; scratch items DIR[:SIZE][:keep=WHEN]; keep applies to the
 * job's scratch items that give none).  Items with filename patterns (%)
 * are per task and not part of the set.
 */
int tier_policy_from_options (struct tier_policy_set *set, json_t *options,
                              tier_error_t *error);

/* Format seconds as a duration ("7d", "90m", "45s") and bytes as a size
 * ("16M", "1536K", "100"); returns buf.
 */
char *tier_policy_fmt_duration (uint64_t s, char *buf, size_t size);
char *tier_policy_fmt_size (uint64_t b, char *buf, size_t size);

/* Resolution. */
struct tier_policy_match {
    const struct tier_policy *policy;   /* NULL: no policy (role none) */
    const struct tier_policy *lock;     /* the locked site policy that
                                           decided, or NULL */
};

/* The effective policy of path (absolute; normalised here).  Returns 0,
 * or -1 with errno EINVAL (path not absolute) or ENAMETOOLONG.
 */
int tier_policy_resolve (const struct tier_policy_set *set, const char *path,
                         struct tier_policy_match *m);

/* Where policies may act: under one of allowed (AllowedRoots), never
 * inside one of tier's own directories (and a pipeline or endpoint
 * directory may not contain one either).
 */
struct tier_policy_roots {
    const char *const *allowed;
    int nallowed;
    const char *const *own;
    int nown;
};

int tier_policy_check_roots (const struct tier_policy *p,
                             const struct tier_policy_roots *roots,
                             tier_error_t *error);

/* True for the roles whose directories become mounts in the job
 * (pipeline, endpoint -- outputs and inputs alike): nothing may nest
 * inside them.
 */
bool tier_policy_role_mounts (enum tier_policy_role role);

/* True for an endpoint policy that makes its directory a stage-in input
 * (stage = in); false for an output directory and every other role. */
bool tier_policy_is_input (const struct tier_policy *p);
/* An endpoint directory with a window and no stage (or stage = none):
 * its files stay on the GFS and writes to them go through the block
 * cache (doc/block-cache.md). */
bool tier_policy_is_window (const struct tier_policy *p);
/* An endpoint directory staged out (stage = out, given or by default
 * without a window): the write cache. */
bool tier_policy_is_output (const struct tier_policy *p);

/* Freeze: the policies of in (all layers) that take effect, into out
 * (copies), and every one that does not into refused (an array of
 * objects: the policy with its origin and "reason"), when refused is not
 * NULL.  A policy is refused when it lies outside roots, inside a locked
 * site policy (user and job layers), or nests in a refused way: inside a
 * pipeline or endpoint directory, where the lower layer gives way (a
 * locked site policy counts as the highest; in one layer the inner one
 * gives way).  Returns 0, or -1 with errno ENOMEM.
 */
int tier_policy_freeze (const struct tier_policy_set *in,
                        const struct tier_policy_roots *roots,
                        struct tier_policy_set *out, json_t *refused,
                        tier_error_t *error);

#endif /* !TIER_POLICY_H */
