/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* opts.c - the --tier-* options */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "opts.h"
