#!/bin/bash
test_description='crash loop: kill -9 of tierd and its children at random moments while every tier works; the invariants after each iteration'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

# CI: at least CRASH_MIN_KILLS kills (100) over at least CRASH_ITERATIONS
# iterations (4), at most CRASH_MAX_ITERATIONS (20).  make torture runs
# it larger (see tests/README).
CRASH_MIN_KILLS=${CRASH_MIN_KILLS:-100}
CRASH_ITERATIONS=${CRASH_ITERATIONS:-4}
CRASH_MAX_ITERATIONS=${CRASH_MAX_ITERATIONS:-20}

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start a cluster whose agents are supervised (GFS capped at 60 MiB/s)' '
    CLUSTER_NAME=crash cluster_start --supervise --gfs-opts bandwidth=60M &&
    echo "StageOutTimeout = 120s" >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
. "$TIER_SRCDIR/tests/lib/crashloop.sh"

test_expect_success 'the inputs, the batch directory and the scripts' '
    for n in n1 n2 n3; do wait_for 30 $TIERCTL -N $n ping || exit 1; done &&
    crashloop_setup
'
test_expect_success 'iterations with kill -9 at random moments' '
    i=0 && ok=0 &&
    while [ $i -lt $CRASH_MAX_ITERATIONS ] &&
          { [ $i -lt $CRASH_ITERATIONS ] || [ "$(crashloop_kills)" -lt $CRASH_MIN_KILLS ]; }; do
        i=$((i + 1)) && crashloop_iteration $i || { ok=1; break; }
        echo "# after iteration $i: $(crashloop_kills) kills"
    done && test $ok = 0 &&
    crashloop_report && test "$(crashloop_kills)" -ge $CRASH_MIN_KILLS
'
test_expect_success 'every invariant held after every iteration' '
    crashloop_report && test "$(crashloop_violations)" = 0
'
# A part whose stager or copier was killed three times fails its task
# (doc/staging.md): such arrays are counted apart; of the others, most
# must complete.
test_expect_success 'most arrays ran to completion (the rest are counted, not checked)' '
    echo "# $CR_NOTRUN of $CR_ITER not completed, $CR_STAGEKILL of them by a stage-in kill" &&
    test $(((CR_NOTRUN - CR_STAGEKILL) * 2)) -le $((CR_ITER - CR_STAGEKILL))
'
test_expect_success 'no node was drained' '! sinfo -h -R | grep .'
crashloop_report
test_done
