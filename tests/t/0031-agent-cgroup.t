#!/bin/bash
test_description='the agent outlives jobs under proctrack/cgroup, and a supervisor restarts it'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM || skip_all "needs root and Slurm"
[ -d /sys/fs/cgroup/freezer ] && test_set_prereq CGROUP1

test_expect_success CGROUP1 'start a cluster with proctrack/cgroup (cgroup v1)' '
    cluster_start --proctrack cgroup --supervise
'
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
agent_pid () { cat "$CLUSTER/state/$1/tierd.pid" 2>/dev/null; }
agent_alive () { p=$(agent_pid "$1") && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
# gone PID: exited (a zombie counts: its parent, the supervisor, may be
# stopped before it reaps it)
gone () { ! kill -0 "$1" 2>/dev/null || grep -q "^State:.*Z" "/proc/$1/status" 2>/dev/null; }

test_expect_success CGROUP1 'the supervisor started an agent on every node' '
    wait_for 20 agent_alive n1 && wait_for 20 agent_alive n2 &&
    wait_for 20 agent_alive n3
'
test_expect_success CGROUP1 'a job started by the plugin runs with the agent' '
    p=$(agent_pid n1) && kill -TERM $p && kill -STOP $(cat "$CLUSTER/run/supervisor-n1.dpid") &&
    wait_for 10 gone $p &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o cg.out --wrap "echo TIER \$TIER_JOB_ID; cat /proc/self/cgroup") &&
    cat "$GFS/home/alice/cg.out" && grep -q "TIER $id" "$GFS/home/alice/cg.out" &&
    grep -q "job_$id" "$GFS/home/alice/cg.out"
'
test_expect_success CGROUP1 'the agent that job started survived it, outside every job cgroup' '
    kill -CONT $(cat "$CLUSTER/run/supervisor-n1.dpid") &&
    agent_alive n1 && cat /proc/$(agent_pid n1)/cgroup &&
    ! grep -q "job_" /proc/$(agent_pid n1)/cgroup
'
test_expect_success CGROUP1 'kill -9: the supervisor brings the agent back, with its registry' '
    old=$(agent_pid n1) && kill -9 $old &&
    wait_for 20 sh -c "p=\$(cat $CLUSTER/state/n1/tierd.pid); [ \"\$p\" != $old ] && kill -0 \$p" &&
    # the pid file comes before the socket listens: ask until it answers
    wait_for 20 sh -c "$TIERCTL -N n1 jobs | grep -q \"^$id \""
'
test_expect_success CGROUP1 'no node is drained' '! sinfo -h -R | grep .'
test_expect_success CGROUP1 'tier-cluster stop leaves no process of the cluster' '
    id=$(cd "$GFS/home/alice" && as_user alice sbatch --parsable -w n2 \
         --tier-cache=auto -o /dev/null --wrap "sleep 300") &&
    wait_for 30 sh -c "$TIERCTL -N n2 jobs | grep -q \"^$id .* running \"" &&
    cluster_procs >"$TRASH/procs" && cat "$TRASH/procs" &&
    grep -q " slurmstepd" "$TRASH/procs" && grep -q " sleep 300" "$TRASH/procs" &&
    grep -q "tier-cluster start" "$TRASH/procs" &&
    grep -q "tierd -F" "$TRASH/procs" &&
    cluster_stop &&
    cluster_procs >"$TRASH/left" && cat "$TRASH/left" && ! test -s "$TRASH/left"
'
test_done
