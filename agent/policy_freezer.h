/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy_freezer.h - the policy freezer, for policy.c (see
 * policy_freezer.c) */
#ifndef TIER_AGENT_POLICY_FREEZER_H
#define TIER_AGENT_POLICY_FREEZER_H

#include "agent.h"
#include "policy_msg.h"

/* In a child with the user's own credentials, within 5 s, off the loop
 * (child_ask):
 *
 * read: the job's frozen set if one exists (POLMSG_FROZEN), else the
 * user's policies (POLMSG_USER), else POLMSG_NONE;
 *
 * write: publish text as the job's frozen set unless one exists (the
 * first node of the job wins), and sweep the user's old frozen sets now
 * and then; POLMSG_FROZEN with the set in force;
 *
 * POLMSG_ERROR if it cannot tell.  done hears the kind and the text (the
 * set, or the reason; NULL: the child failed; malloc'd, done's), exactly
 * once -- before these return if the child cannot start.  job and text
 * are needed only during the call.
 */
typedef void (*policy_freezer_f) (struct agent *a, int kind, char *out,
                                  void *arg);
void policy_freezer_read_start (struct agent *a, const struct store_job *job,
                                policy_freezer_f done, void *arg);
void policy_freezer_write_start (struct agent *a, const struct store_job *job,
                                 const char *text, policy_freezer_f done,
                                 void *arg);

#endif /* !TIER_AGENT_POLICY_FREEZER_H */
