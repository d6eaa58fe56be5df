/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* tier.c - SPANK entry points, dispatched by context */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <slurm/spank.h>

SPANK_PLUGIN (tier, 1);

int slurm_spank_init (spank_t sp, int ac, char **av)
{
    return 0;
}
