/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* opts.h - the --tier-* options: parse and validate (libc only) */
#ifndef TIER_SPANK_OPTS_H
#define TIER_SPANK_OPTS_H
#endif
