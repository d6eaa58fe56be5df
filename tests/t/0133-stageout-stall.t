#!/bin/bash
test_description='stage-out on a hung GFS: a stuck migrator is abandoned, never waited for'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

# A GFS write that is never answered keeps the writer in the kernel (D
# state), where even SIGKILL waits for the answer.  A migrator beats
# while it runs, hashes or copies; one that says nothing for
# StallTimeout is killed, and, stuck, abandoned: its GFS stream goes back
# at once (another user's stage-out takes it), no successor competes for
# the job's outbox until it lets go, the epilog returns at
# StageOutTimeout saying the outputs are late, and once the GFS answers
# again the outputs are published, byte for byte.  Only the migrator
# writes the hung names (the temporaries .NAME.tier-*.part of alice's
# out/): the job's own processes write the write cache.
test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster (StallTimeout 3 s, one GFS stream a node, StageOutTimeout 12 s)' '
    cluster_start --gfs-opts latency=0 &&
    printf "%s\n" "StallTimeout = 3s" "GfsStreams = 1" "StageOutTimeout = 12s" \
        >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
# whatever fails, no request is left hanging for the reset
test_at_exit "gfsemu_fault_clear '$GFS' 2>/dev/null"
H=$GFS/home/alice
HB=$GFS-backing/home/alice
BH=$GFS/home/bob
BHB=$GFS-backing/home/bob
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
LOG=$CLUSTER/log/tierd-n1.log
sum_of () { sha256sum <$1 | cut -d" " -f1; }
abandoned_logged () {
    grep -q "job $1: stage-out of $H/out/.stuck.bin.tier-[A-Za-z0-9]*.part: no progress for 3 s (StallTimeout): migrator [0-9]* abandoned" $LOG
}
streams_free () {
    $TIERCTL -N n1 status >$TRASH/st 2>&1 && grep -q "GFS streams: 0 of 1 in use, 0 waiting" $TRASH/st
}
as_user alice mkdir -p "$H/out"
as_user bob mkdir -p "$BH/out"

HANG="home/alice/out/.stuck.bin.tier-*.part:write:hang"
test_expect_success 'alice'"'"'s stage-out hangs in a GFS write: her migrator is abandoned, naming the file' '
    gfsemu_fault "$GFS" "$HANG" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-out=$H/out -o $H/a.out -e $H/a.err \
        --wrap "head -c 4M /dev/urandom >$H/out/stuck.bin && sha256sum <$H/out/stuck.bin >$H/a.sum") &&
    echo $id >$TRASH/a && wait_for 60 gfsemu_hung "$GFS" &&
    wait_for 30 abandoned_logged $id && grep "job $id: stage-out of" $LOG &&
    agent_stuck n1 tierd-mig &&
    grep -q "GFS stream of stage-out of job $id: job $id: stage-out of" $LOG
'
test_expect_success 'meanwhile bob'"'"'s stage-out on the node takes the stream back and publishes' '
    b=$(sbatch_wait bob -w n1 --tier-stage-out=$BH/out -o $BH/b.out \
        --wrap "head -c 2M /dev/urandom >$BH/out/b.bin && sha256sum <$BH/out/b.bin >$BH/b.sum") &&
    test "$(job_state $b)" = COMPLETED &&
    test "$(sum_of $BHB/out/b.bin)" = "$(cut -d" " -f1 $BHB/b.sum)" && gfsemu_hung "$GFS"
'
test_expect_success 'tierctl status counts the stalled migrator and says outputs wait for it' '
    id=$(cat $TRASH/a) &&
    (cd $H && as_user alice $TIERCTL -N n1 status) >$TRASH/ast && cat $TRASH/ast &&
    grep -q "^migrations: .* 1 migrator(s) stalled (StallTimeout)$" $TRASH/ast &&
    grep -A3 "^  job $id " $TRASH/ast | grep -q "1 migrator(s) stalled; one is stuck in a GFS request" &&
    (cd $H && as_user alice $TIERCTL -N n1 status --json) | python3 -c "
import json,sys; m=json.load(sys.stdin)[\"migrations\"]
j=[j for j in m[\"jobs\"] if j[\"job_id\"]==$id][0]
assert m[\"stalled_migrators\"]==1 and j[\"stalled\"]==1 and j[\"stuck_migrator\"]>0, m"
'
# another user sees the node's totals, never alice's job or migrator
test_expect_success 'bob'"'"'s tierctl status counts the node'"'"'s migrations but shows none of alice'"'"'s jobs' '
    id=$(cat $TRASH/a) &&
    (cd $BH && as_user bob $TIERCTL -N n1 status) >$TRASH/bst && cat $TRASH/bst &&
    grep -q "^migrations: .* 1 migrator(s) stalled (StallTimeout)$" $TRASH/bst &&
    ! grep -q "job $id" $TRASH/bst &&
    (cd $BH && as_user bob $TIERCTL -N n1 status --json) | python3 -c "
import json,sys; m=json.load(sys.stdin)[\"migrations\"]
assert not [j for j in m[\"jobs\"] if j[\"job_id\"]==$id], m"
'
# The batch step's end waits 10 s: the migrator is stuck by then, and
# the job's stderr and record say so; the epilog waits StageOutTimeout.
test_expect_success 'the job'"'"'s stderr and record say its migrator is stuck; the epilog returns at StageOutTimeout, late' '
    id=$(cat $TRASH/a) && wait_for 60 job_done $id && echo "job $id $(job_state $id)" &&
    test "$(job_state $id)" = COMPLETED && cat $H/a.err &&
    grep -q "^tier: warning: 1 output file(s) not on the GFS yet: the job.s migrator is stuck in a GFS request (no progress for StallTimeout); .*; first: $H/out/stuck.bin: its migrator is stuck in a GFS request$" $H/a.err &&
    scontrol show job $id | grep AdminComment= &&
    scontrol show job $id | grep -q "AdminComment=tier: on node n1, 1 output file(s) not on the GFS (0 failed, 0 in conflict): $H/out/stuck.bin: its migrator is stuck in a GFS request; kept and retried" &&
    grep -q "job $id: ended before its outputs were all on the GFS (its epilog.s StageOutTimeout passed)" $LOG &&
    grep -q "error: tier: on node n1, 1 output file(s) of job $id not on the GFS at job end (0 failed, 0 in conflict, StageOutTimeout passed)" \
        $CLUSTER/log/slurmd-n1.log &&
    (cd $H && as_user alice $TIERCTL -N n1 outputs --job $id) >$TRASH/ao && cat $TRASH/ao &&
    grep -q "^late: the job ended before these were all on the GFS" $TRASH/ao &&
    test ! -e $HB/out/stuck.bin && gfsemu_hung "$GFS" && no_drain
'
test_expect_success 'the hang ends: the stuck migrator lets go, the next one publishes byte for byte' '
    id=$(cat $TRASH/a) && gfsemu_fault_clear "$GFS" && wait_for 10 gfsemu_unhung "$GFS" &&
    wait_for 30 grep -q "job $id: the stuck migrator [0-9]* let go of the job" $LOG &&
    wait_for 60 test -e $HB/out/stuck.bin &&
    test "$(sum_of $HB/out/stuck.bin)" = "$(cut -d" " -f1 $HB/a.sum)" &&
    (cd $H && as_user alice $TIERCTL -N n1 outputs --job $id) >$TRASH/ao2 && cat $TRASH/ao2 &&
    grep -q "^done .*stuck.bin" $TRASH/ao2
'
test_expect_success 'nothing is left: no temporary, no zombie, streams free, no node drained' '
    test -z "$(find $HB/out $BHB/out -name "*.part")" &&
    { test -z "$(agent_zombies n1)" || { agent_zombies n1; exit 1; }; } &&
    streams_free n1 && no_drain
'
test_done
