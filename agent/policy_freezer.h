/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy_freezer.h - the policy freezer, for policy.c (see
 * policy_freezer.c) */
#ifndef TIER_AGENT_POLICY_FREEZER_H
#define TIER_AGENT_POLICY_FREEZER_H

#include "agent.h"
#include "policy_msg.h"

/* In a child with the user's own credentials, within 5 s: the job's
 * frozen set if one exists (POLMSG_FROZEN), else the user's policies
 * (POLMSG_USER), else POLMSG_NONE; POLMSG_ERROR if it cannot tell.  The
 * text goes to *out (malloc'd): the set, or the reason (NULL: the child
 * failed).
 */
int policy_freezer_read (struct agent *a, const struct store_job *job,
                         char **out);

/* The same child: publish text as the job's frozen set unless one
 * exists (the first node of the job wins), and sweep the user's old
 * frozen sets now and then; POLMSG_FROZEN with the set in force in *out,
 * or POLMSG_ERROR as above.
 */
int policy_freezer_write (struct agent *a, const struct store_job *job,
                          const char *text, char **out);

/* The same, off the loop (child_ask): done hears the kind and *out as
 * above (out is done's), exactly once -- before these return if the
 * child cannot start.  job and text are needed only during the call. */
typedef void (*policy_freezer_f) (struct agent *a, int kind, char *out,
                                  void *arg);
void policy_freezer_read_start (struct agent *a, const struct store_job *job,
                                policy_freezer_f done, void *arg);
void policy_freezer_write_start (struct agent *a, const struct store_job *job,
                                 const char *text, policy_freezer_f done,
                                 void *arg);

#endif /* !TIER_AGENT_POLICY_FREEZER_H */
