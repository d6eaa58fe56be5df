/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* remote.c - the plugin in slurmstepd (REMOTE context)
 *
 * Never returns an error from init/init_post_opt/user_init: that drains
 * the node.  A job that must fail (a bad option injected through the
 * environment, --tier-cache=required without a tier) fails from
 * task_init_privileged, which makes its tasks exit 1 with our message on
 * their stderr.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <slurm/spank.h>

#include "opts.h"
#include "tier.h"

int tier_remote_init_post_opt (spank_t sp)
{
    return 0;
}

/* The node-side check of the options, from the job's real items. */
static int node_check (spank_t sp, tier_error_t *error)
{
    uint32_t task_id = 0;
    int is_array;

    if (tier.opt_error[0])
        return tier_errprintf (error, "%s", tier.opt_error);
    if (spank_get_item (sp, S_JOB_ARRAY_TASK_ID, &task_id) != ESPANK_SUCCESS)
        is_array = -1;
    else
        is_array = (task_id != 0xfffffffe && task_id != 0xffffffff) ? 1 : 0;
    return tier_opts_check (&tier.opts, is_array, error);
}

int slurm_spank_task_init_privileged (spank_t sp, int ac, char **av)
{
    tier_error_t error;

    if (spank_context () != S_CTX_REMOTE || tier.disabled)
        return 0;
    if (tier_effective_mode () == TIER_CACHE_OFF && !tier_opts_any (&tier.opts)
        && !tier.opt_error[0])
        return 0;
    if (node_check (sp, &error) < 0) {
        slurm_error ("tier: %s", error.text);
        return -1;                      /* fails this job's tasks cleanly */
    }
    return 0;
}
