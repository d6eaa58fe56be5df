/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* main.c - tierd */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>

int main (int argc, char **argv)
{
    printf ("tierd %s\n", PACKAGE_VERSION);
    return 0;
}
