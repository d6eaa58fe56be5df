/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cmd_predict.c - tierctl predict (placeholder until the EVT model lands) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>

#include "ctl.h"

int cmd_predict (struct ctl *ctl, int argc, char **argv)
{
    fprintf (stderr, "tierctl predict: not built yet\n");
    return CTL_ERROR;
}
