/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* args.c - the plugin's arguments in plugstack.conf */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "args.h"
