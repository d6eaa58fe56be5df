/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* tier.h - state shared by the plugin's per-context files */
#ifndef TIER_SPANK_TIER_H
#define TIER_SPANK_TIER_H

#include <slurm/spank.h>

#include "args.h"
#include "opts.h"

struct tier_plugin {
    struct tier_args args;      /* from plugstack.conf */
    int args_ok;
    int disabled;               /* a site configuration error on the node */
    struct tier_opts opts;      /* the --tier-* options */
    char opt_error[512];        /* a bad option value seen on the node */
};

extern struct tier_plugin tier;

/* --tier-cache as it applies: the option, else implied by other options
 * (auto), else the plugstack default.
 */
enum tier_cache_mode tier_effective_mode (void);

/* remote.c: slurmstepd */
int tier_remote_init_post_opt (spank_t sp);

#endif /* !TIER_SPANK_TIER_H */
