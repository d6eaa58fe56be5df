/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* submit.h - what the submitting process can know about the job: is it an
 * array?  SPANK gives no array items in sbatch, so the route is sbatch's
 * own command line, the script's #SBATCH lines and SBATCH_ARRAY_INX.
 */
#ifndef TIER_SPANK_SUBMIT_H
#define TIER_SPANK_SUBMIT_H

#include <stddef.h>

/* Scan sbatch's argv (argv[0] is the program).  Returns 1 if --array/-a
 * is given, 0 if not.  *script is set to the index of the batch script
 * argument (0 if none: --wrap or stdin).  *wrap is set if --wrap is given.
 */
int submit_argv_array (int argc, char *const argv[], int *script, int *wrap);

/* Scan a batch script's #SBATCH lines (those before the first command, as
 * sbatch reads them).  Returns 1 if one gives --array/-a, else 0.
 */
int submit_script_array (const char *text, size_t len);

/* Read /proc/self/cmdline into a NUL-separated argv.  Returns argc, or -1.
 * *buf must be freed.
 */
int submit_self_argv (char **buf, char ***argv);

/* 1 = an array job, 0 = not, -1 = cannot tell (script on stdin). */
int submit_is_array (void);

/* The (minimum) node count asked for at submit: -N/--nodes on the
 * command line, in #SBATCH lines, or SBATCH_NNODES; 0 if none.
 */
long submit_nodes (void);

#endif /* !TIER_SPANK_SUBMIT_H */
