#!/bin/bash
# 0140-hostile-fds.t - a user's descriptor cannot stall the agent
#
# bob mounts his own FUSE file system (tests/gfsemu/hangfs: its flush
# never answers, so a close(2) of its file sleeps in the kernel until the
# daemon dies) and passes a descriptor of its file to the node's agent
# four ways (tests/lib/rawclient.py hostile).  The agent must refuse it
# as it arrives, without touching the file, never close it on its loop
# (a closer thread per copy does, and hangs there alone), never let a
# child inherit it (a child's close would hang too: alice's migrators
# are forked during the attack), take no more descriptors from bob
# meanwhile, and keep serving: a ping once a second answers, and alice's
# array, which starts its tasks during the attack, completes with its
# outputs.  /dev/fuse is made usable by everyone for the test,
# as it is on a stock install, and restored at the end.
test_description='hostile descriptors: a FUSE file whose flush never answers does not stall the agent'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster' 'cluster_start'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
OUT=$H/hostile
DB=$H/hdb
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
RAW="python3 $TIER_SRCDIR/tests/lib/rawclient.py"
SOCK=$CLUSTER/run/tier/n1/tierd.sock
HANGFS=$TIER_BUILDDIR/tests/gfsemu/hangfs
D=$(mktemp -d /tmp/tier-hostile.XXXXXX)
M=$D/mnt
GO=$D/go
FUSE_MODE=$(stat -c %a /dev/fuse)
chmod 755 $D && chown bob $D
test_at_exit "chmod $FUSE_MODE /dev/fuse; rm -rf $D"
test_at_exit "touch $GO; kill -9 \$(cat $D/pid); sleep 1; umount -l $M"

mounted () { awk -v m="$M" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
closing () { $TIERCTL -N n1 status | grep "^closing: $1 client descriptor"; }
not_closing () { ! $TIERCTL -N n1 status | grep -q "^closing:"; }

test_expect_success 'bob mounts a FUSE file system whose flush never answers' '
    chmod 0666 /dev/fuse &&
    as_user bob mkdir $M &&
    { as_user bob sh -c "echo \$\$ > $D/pid; exec $HANGFS $M" >$D/hangfs.log 2>&1 & } &&
    wait_for 10 mounted && test "$(as_user bob stat -c %s $M/f)" = 64
'

test_expect_success 'alice starts a 4-task array (batch input, stage-out) on the node' '
    as_user alice mkdir -p $OUT $DB &&
    as_user alice sh -c "head -c 1M /dev/urandom > $DB/in" &&
    sum=$(md5sum < $DB/in) &&
    aid=$(cd $H && as_user alice sbatch --parsable --array=1-4 -w n1 \
        --tier-batch=$DB --tier-stage-out=$OUT -o $OUT/t_%a.log \
        --wrap "sleep 6; md5sum < $DB/in > $OUT/o_\$SLURM_ARRAY_TASK_ID") &&
    echo "array $aid" && wait_for 30 $TIERCTL -N n1 ping
'

test_expect_success 'bob passes the descriptor four ways: each refused, the agent answers' '
    { as_user bob $RAW $SOCK hostile $M/f $GO >$D/attack.out 2>&1 & } && ap=$! &&
    { wait_for 30 grep -q "^done" $D/attack.out; cat $D/attack.out; } &&
    grep -q "^done" $D/attack.out &&
    grep "^open: .*FUSE file system a user mounted" $D/attack.out &&
    grep -x "byte: sent" $D/attack.out &&
    grep "^again: .*descriptors are not accepted on this connection now" $D/attack.out &&
    grep "^first: " $D/attack.out | grep -v errno &&
    grep "^later: .*descriptors are not accepted on this connection now" $D/attack.out &&
    grep -q "a flush came" $D/hangfs.log &&
    closing 4
'

# Latency of a ping once a second while bob's close hangs (reported)
test_expect_success 'a ping once a second answers while the close hangs' '
    : >$D/ping.ms &&
    (for i in 1 2 3 4 5 6 7 8; do
        t0=$(date +%s%N) && timeout 5 $TIERCTL -N n1 ping >/dev/null &&
        echo $((($(date +%s%N) - t0) / 1000000)) >>$D/ping.ms || exit 1
        sleep 1
    done) &&
    sort -n $D/ping.ms | awk "{ v[NR] = \$1 } END { printf \"ping ms: p50 %d, max %d of %d\n\", v[int((NR + 1) / 2)], v[NR], NR }" &&
    closing 4
'

test_expect_success 'alice'"'"'s array completes with every output' '
    wait_for 120 job_done $aid && test "$(job_state $aid)" = COMPLETED &&
    (for t in 1 2 3 4; do
        test "$(cat $OUT/o_$t)" = "$sum" || exit 1
    done) &&
    ! grep -h "tier:" $OUT/t_*.log
'

test_expect_success 'bob'"'"'s daemon dies: the hung close returns, nothing is left closing' '
    kill -9 $(cat $D/pid) && wait_for 10 not_closing &&
    umount -l $M && touch $GO && wait $ap
'
test_expect_success '/dev/fuse has its mode back' '
    chmod $FUSE_MODE /dev/fuse && test "$(stat -c %a /dev/fuse)" = "$FUSE_MODE"
'
test_expect_success 'no node was drained' 'no_drain'
test_done
