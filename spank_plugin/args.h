/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* args.h - the plugin's arguments in plugstack.conf:
 *
 *   required /path/tier.so conf=/etc/tier/tier.conf default=off
 *
 * conf=PATH      tier.conf (default SYSCONFDIR/tier/tier.conf)
 * default=MODE   --tier-cache when a job gives no --tier option:
 *                off (default), auto or required
 * preload=PATH   the interposer to put into tasks (default: installed one)
 *
 * Root code takes configuration only from here and tier.conf, never from
 * the environment.
 */
#ifndef TIER_SPANK_ARGS_H
#define TIER_SPANK_ARGS_H

#include <limits.h>

#include "lib/error.h"
#include "opts.h"

struct tier_args {
    char conf[PATH_MAX];
    enum tier_cache_mode default_mode;
    char preload[PATH_MAX];
};

/* Parse plugstack arguments into args (defaults first).  Returns 0, or
 * -1 with error naming the argument and the problem.
 */
int args_parse (int ac, char **av, struct tier_args *args, tier_error_t *error);

#endif /* !TIER_SPANK_ARGS_H */
