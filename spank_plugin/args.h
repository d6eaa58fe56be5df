/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* args.h - the plugin's arguments in plugstack.conf */
#ifndef TIER_SPANK_ARGS_H
#define TIER_SPANK_ARGS_H
#endif
