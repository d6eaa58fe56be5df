/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* preload.c - libtier_preload.so: redirect read-only opens under batch
 * directories to BB replicas (placeholder: passes everything through) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
