#!/bin/bash
test_description='under load: one large job array through every tier, every invariant of the crash loop at the end, the agents'"'"' memory'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

# CI: 100 tasks of 1 MiB of outputs each; make torture: 1,000
# (LOAD_TASKS, LOAD_MB).
CRASH_TASKS=${LOAD_TASKS:-100}
CRASH_MB=${LOAD_MB:-1}
CRASH_NOKILL=1
CRASH_IN_KB=${LOAD_IN_KB:-64}
CRASH_DB_MB=${LOAD_DB_MB:-8}
CRASH_ARRAY_TIMEOUT=${CRASH_ARRAY_TIMEOUT:-1800}

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster' 'cluster_start'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
. "$TIER_SRCDIR/tests/lib/crashloop.sh"
rss () { awk '/^VmRSS|^VmHWM/ { printf "%s %s kB  ", $1, $2 }' /proc/$1/status; }

test_expect_success 'the inputs, the batch directory and the scripts' '
    crashloop_setup
'
test_expect_success "a $CRASH_TASKS-task array with stage-in, batch replicas and stage-out, and its afterok dependent" '
    crashloop_iteration 1 && test "$CR_NOTRUN" = 0
'
test_expect_success 'every invariant held' '
    crashloop_report && test "$(crashloop_violations)" = 0
'
test_expect_success 'the agents served it all (memory reported)' '
    for n in n1 n2 n3; do
        p=$(cat $CLUSTER/state/$n/tierd.pid) && echo "# tierd $n: $(rss $p)" &&
        $TIERCTL -N $n ping || exit 1
    done
'
for n in n1 n2 n3; do
    p=$(cat $CLUSTER/state/$n/tierd.pid 2>/dev/null) && echo "# tierd $n after $CRASH_TASKS tasks: $(rss $p)"
done
crashloop_report
test_done
