#!/bin/bash
test_description='stage-out across crashes: each publish window hit on purpose, and the epilog across agent restarts'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
command -v strace >/dev/null || skip_all "needs strace"
test_expect_success 'start the cluster (GFS capped at 50 MiB/s)' '
    cluster_start --gfs-opts bandwidth=50M &&
    echo "StageOutTimeout = 60s" >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
# whatever fails, no request is left hanging for the reset
test_at_exit "gfsemu_fault_clear '$GFS' 2>/dev/null"
H=$GFS/home/alice
OUT=$H/crash
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
NV=$(cat $CLUSTER/run/nvdimm.path)
outbox_empty () { test -z "$(ls -A "$NV/$1/.outbox" 2>/dev/null)"; }
agent_pid () { cat $CLUSTER/state/$1/tierd.pid 2>/dev/null; }
agent_up () { $TIERCTL -N $1 ping >/dev/null 2>&1; }
# the migrator of the node's agent (its comm is tierd-mig): by pid
migrator_pid () {
    ps -o pid=,comm= --ppid "$(agent_pid $1)" | awk '$2 == "tierd-mig" { print $1; exit }'
}
has_migrator () { test -n "$(migrator_pid $1 2>/dev/null)"; }
# strace attached: wait until the kernel says so
traced () { grep -q "^TracerPid:[[:space:]]*$2\$" /proc/$1/status; }
# bytes the GFS was written under a name of the job's output
written () {
    gfsemu_stats "$GFS" | awk -v f="$1" '$1 == "file.write_bytes" && index($3, f) { s += $2 } END { print s + 0 }'
}
conflicts_of () { grep -c "job $1: conflict" $CLUSTER/log/tierd-$2.log; }
as_user alice mkdir -p "$OUT"

# Between the data's fsync and the rename: the migrator is killed as it
# renames.  Its temporary is complete and recorded; the next migrator
# removes it and publishes again.
test_expect_success 'killed between the fsync of a temporary and its rename: published once, no temporary left' '
    gfsemu_reset "$GFS" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-out=$OUT -o /dev/null \
        --wrap "sleep 3; head -c 8M /dev/urandom > $OUT/a.bin; sha256sum < $OUT/a.bin > $H/a.sum; sleep 4") &&
    wait_for 30 has_migrator n1 && mp=$(migrator_pid n1) && echo "migrator $mp" &&
    { strace -f -qq -o /dev/null -p $mp -e trace=rename,renameat,renameat2 \
        -e inject=rename,renameat,renameat2:signal=KILL:when=1 & } && st=$! &&
    wait_for 10 traced $mp $st &&
    wait_for 60 test ! -d /proc/$mp && { wait $st; true; } &&
    wait_for 120 job_done $id && test "$(job_state $id)" = COMPLETED &&
    wait_for 30 outbox_empty n1 &&
    test "$(sha256sum < $OUT/a.bin)" = "$(cat $H/a.sum)" &&
    find $OUT -name ".*.part" >$TRASH/parts && cat $TRASH/parts && test ! -s $TRASH/parts &&
    grep "job $id: migrator .* died\|job $id: migrator [0-9]* for" $CLUSTER/log/tierd-n1.log &&
    test "$(conflicts_of $id n1)" = 0 &&
    w=$(written a.bin) && echo "temporaries of a.bin: $w bytes" && test "$w" = $((16 << 20))
'

# Between the rename and its record: the agent dies while the migrator
# returns from the rename (held there by strace), and the job rewrites
# the file meanwhile.  The restarted agent knows that GFS file as its own
# (the inode it recorded before the rename) and replaces it with the
# new version: not a conflict.
test_expect_success 'agent killed between a rename and its record, file rewritten meanwhile: no false conflict, the last version on the GFS' '
    gfsemu_reset "$GFS" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-stage-out=$OUT -o /dev/null \
        --wrap "sleep 3; head -c 4M /dev/urandom > $OUT/b.bin; sleep 2; while ! test -e $H/b.go; do sleep 0.2; done; head -c 5M /dev/urandom > $OUT/b.bin; sha256sum < $OUT/b.bin > $H/b.sum") &&
    wait_for 30 has_migrator n2 && mp=$(migrator_pid n2) && ap=$(agent_pid n2) &&
    { strace -f -qq -o /dev/null -p $mp -e trace=rename,renameat,renameat2 \
        -e inject=rename,renameat,renameat2:delay_exit=30000000:when=1 & } && st=$! &&
    wait_for 10 traced $mp $st &&
    wait_for 60 test -e $GFS-backing/home/alice/crash/b.bin &&
    test "$(stat -c %s $GFS-backing/home/alice/crash/b.bin)" = $((4 << 20)) &&
    kill -9 $ap && { kill $st; wait $st; true; } &&
    touch $H/b.go &&
    wait_for 120 job_done $id && test "$(job_state $id)" = COMPLETED &&
    wait_for 30 outbox_empty n2 &&
    grep -q "job $id: resuming its outputs" $CLUSTER/log/tierd-n2.log &&
    test "$(sha256sum < $OUT/b.bin)" = "$(cat $H/b.sum)" &&
    test "$(conflicts_of $id n2)" = 0 && test ! -e $OUT/.tier-conflicts/$id &&
    $TIERCTL -N n2 outputs --job $id --json >$TRASH/b.json && cat $TRASH/b.json &&
    python3 -c "import json,sys; o=json.load(open(sys.argv[1])); assert o[\"conflicts\"] == 0 and o[\"done\"] == 1, o" $TRASH/b.json
'

# The same window, the file unchanged: adopted as it is (its bytes are
# not written to the GFS twice).
test_expect_success 'agent killed between a rename and its record: adopted, not copied again' '
    gfsemu_reset "$GFS" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n3 --tier-stage-out=$OUT -o /dev/null \
        --wrap "sleep 3; head -c 6M /dev/urandom > $OUT/c.bin; sha256sum < $OUT/c.bin > $H/c.sum; sleep 3") &&
    wait_for 30 has_migrator n3 && mp=$(migrator_pid n3) && ap=$(agent_pid n3) &&
    { strace -f -qq -o /dev/null -p $mp -e trace=rename,renameat,renameat2 \
        -e inject=rename,renameat,renameat2:delay_exit=30000000:when=1 & } && st=$! &&
    wait_for 10 traced $mp $st &&
    wait_for 60 test -e $GFS-backing/home/alice/crash/c.bin &&
    kill -9 $ap && { kill $st; wait $st; true; } &&
    wait_for 120 job_done $id && test "$(job_state $id)" = COMPLETED &&
    wait_for 30 outbox_empty n3 &&
    test "$(sha256sum < $OUT/c.bin)" = "$(cat $H/c.sum)" &&
    test "$(conflicts_of $id n3)" = 0 &&
    w=$(written c.bin) && echo "temporaries of c.bin: $w bytes" && test "$w" = $((6 << 20))
'

# The epilog waits for the outputs.  The migrator's first publish (the
# rename of its temporary) hangs in the GFS during the job (a stopped
# child would be killed by the agent at once), so that nothing is
# published before the epilog waits; then the agent is killed while it
# waits (twice): the epilog starts another and asks it again; once the
# hang ends (EIO, and the old migrator dies), the new one publishes, and
# the afterok dependent finds every output complete.
cat >"$H/verify.sh" <<EOF2
#!/bin/bash
cd $OUT && sha256sum -c --quiet $H/e.sum && echo SUMS-OK
EOF2
chmod 755 "$H/verify.sh"; chown alice "$H/verify.sh"
completing () { test "$(job_state $1)" = COMPLETING; }
rename_hung () { test "$(gfsemu_value "$GFS" fault.hung)" -ge 1; }
test_expect_success 'the agent killed twice while the epilog waits: the dependent sees every output complete' '
    gfsemu_reset "$GFS" && rm -f $H/e.sum $H/verify.out &&
    gfsemu_fault "$GFS" "home/alice/crash/.e*:rename:hang" &&
    n0=$(wc -l <$CLUSTER/log/slurmd-n1.log) &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-out=$OUT -o /dev/null \
        --wrap "sleep 2; for i in 1 2 3; do head -c 32M /dev/urandom > $OUT/e\$i.bin; done; (cd $OUT && sha256sum e?.bin) > $H/e.sum") &&
    dep=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-cache=off --dependency=afterok:$id \
        -o $H/verify.out "$H/verify.sh") &&
    wait_for 60 rename_hung && wait_for 90 completing $id &&
    (for k in 1 2; do
        ap=$(agent_pid n1) && kill -9 $ap && wait_for 20 test ! -d /proc/$ap &&
        wait_for 30 agent_up n1 && sleep 0.3 || exit 1
    done) && gfsemu_fault_clear "$GFS" &&
    wait_for 180 job_done $dep &&
    test "$(job_state $id)" = COMPLETED && test "$(job_state $dep)" = COMPLETED &&
    cat $H/verify.out && grep -qx SUMS-OK $H/verify.out &&
    tail -n +$n0 $CLUSTER/log/slurmd-n1.log >$TRASH/slurmd.log &&
    grep "tierd went away" $TRASH/slurmd.log &&
    ! grep "epilog of job $id: stage-out:" $TRASH/slurmd.log &&
    test "$(conflicts_of $id n1)" = 0 &&
    find $OUT -name ".*.part" >$TRASH/parts && test ! -s $TRASH/parts
'

# A step meets a dying agent: the agent is killed at its first fork after
# the job's registration arrived (the fork that freezes the job's
# policies), before it answers.  The step asks again, an agent is
# started, and the job runs as if nothing happened.
# The kill must meet that fork, not a stats publisher of an earlier job
# (they run every StatsInterval for a minute after a job ends): the
# interval is made long and the agent left with no child first.
reg_retried () { grep -q "job $1: registration: the node.s agent was restarting" $CLUSTER/log/slurmd-n1.log; }
reloaded () { grep -c "notice: reloaded" $CLUSTER/log/tierd-n1.log || :; }
no_children () { test -z "$(ps -o pid= --ppid "$1")"; }
test_expect_success 'the agent dies as a step registers: the step asks the next agent and runs' '
    wait_for 30 agent_up n1 && ap=$(agent_pid n1) &&
    cp $CLUSTER/etc/tier.conf $TRASH/tier.conf.orig &&
    sed -i "s/^StatsInterval *=.*/StatsInterval = 10m/" $CLUSTER/etc/tier.conf &&
    n=$(reloaded) && kill -HUP $ap && wait_for 10 sh -c "test \$(grep -c \"notice: reloaded\" $CLUSTER/log/tierd-n1.log) -gt $n" &&
    wait_for 30 no_children $ap &&
    { strace -f -qq -o /dev/null -p $ap -e trace=clone,clone3,fork,vfork \
        -e inject=clone,clone3,fork,vfork:signal=KILL:when=1 & } && st=$! &&
    wait_for 10 traced $ap $st &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-out=$OUT -o $H/reg.out \
        --wrap "echo ran > $OUT/reg.txt") &&
    wait_for 60 job_done $id && { wait $st; true; } && cat $H/reg.out &&
    wait_for 20 test ! -d /proc/$ap && echo "agent $ap is gone" &&
    test "$(job_state $id)" = COMPLETED && echo "job $id COMPLETED" &&
    ! grep untiered $H/reg.out && reg_retried $id && grep -x ran $OUT/reg.txt &&
    cp $TRASH/tier.conf.orig $CLUSTER/etc/tier.conf && wait_for 30 agent_up n1 &&
    kill -HUP $(agent_pid n1)
'

# The batch step's end publishes the outputs and waits for them (10 s):
# the agent is killed during that wait.  The step asks the next agent
# (started by the step where none answers) instead of logging an error,
# and the epilog then waits for the outputs as always.  The first
# publish hangs in the GFS (its rename) so that the step is still
# waiting when the agent dies.
sync_retried () { grep -q "job $1: stage-out sync: the node.s agent was restarting" $CLUSTER/log/slurmd-n1.log; }
test_expect_success 'the agent dies while the batch step waits for its outputs: the step asks the next agent' '
    gfsemu_reset "$GFS" && rm -f $H/s.sum $H/s.mark &&
    wait_for 30 agent_up n1 &&
    gfsemu_fault "$GFS" "home/alice/crash/.s*:rename:hang" &&
    n0=$(wc -l <$CLUSTER/log/slurmd-n1.log) &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-out=$OUT -o /dev/null \
        --wrap "head -c 4M /dev/urandom > $OUT/s.bin; sha256sum < $OUT/s.bin > $H/s.sum; touch $H/s.mark") &&
    wait_for 60 test -e $H/s.mark && wait_for 30 rename_hung && sleep 2 &&
    ap=$(agent_pid n1) && kill -9 $ap && wait_for 20 test ! -d /proc/$ap &&
    wait_for 30 agent_up n1 && wait_for 30 sync_retried $id && gfsemu_fault_clear "$GFS" &&
    wait_for 120 job_done $id && test "$(job_state $id)" = COMPLETED &&
    tail -n +$n0 $CLUSTER/log/slurmd-n1.log >$TRASH/slurmd-sync.log &&
    grep "job $id: stage-out sync: the node.s agent was restarting" $TRASH/slurmd-sync.log &&
    ! grep "job $id: stage-out: " $TRASH/slurmd-sync.log &&
    wait_for 30 outbox_empty n1 &&
    test "$(sha256sum < $OUT/s.bin)" = "$(cat $H/s.sum)" &&
    test "$(conflicts_of $id n1)" = 0 &&
    find $OUT -name ".*.part" >$TRASH/parts && test ! -s $TRASH/parts
'

# One writer per outbox.  The migrator hangs on a GFS write; the agent
# is killed meanwhile, and the migrator, its parent-death SIGKILL
# pending, sleeps on in the kernel (D: the request is the daemon's).
# The restarted agent's migrators find the outbox locked, end nothing
# they cannot end, and never write beside it: the hung write stays the
# only one.  Once the hang ends the old migrator dies and the next one
# publishes, byte for byte.
LOCKD=$H/lockd
hung_writes () { gfsemu_value "$GFS" fault.hung; }
one_hung () { test "$(hung_writes)" = 1; }
log_since () { tail -n +$N0 $CLUSTER/log/tierd-n2.log; }
busy_logged () { log_since | grep -q "job $1: another migrator still holds the job.s outbox"; }
in_d_state () { test "$(awk '{ print $3 }' /proc/$1/stat 2>/dev/null)" = D; }
test_expect_success 'a migrator hung in the kernel outlives its agent: the next ones wait for its outbox, never write beside it' '
    gfsemu_reset "$GFS" && as_user alice mkdir -p $LOCKD &&
    gfsemu_fault "$GFS" "home/alice/lockd/*:write:hang" &&
    N0=$(wc -l <$CLUSTER/log/tierd-n2.log) &&
    id=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-stage-out=$LOCKD -o /dev/null \
        --wrap "head -c 2M /dev/urandom > $LOCKD/l.bin; sha256sum < $LOCKD/l.bin > $H/l.sum; sleep 2") &&
    wait_for 60 one_hung && mp=$(migrator_pid n2) && echo "hung migrator $mp" &&
    ap=$(agent_pid n2) && kill -9 $ap && wait_for 20 test ! -d /proc/$ap &&
    wait_for 10 in_d_state $mp &&
    wait_for 60 agent_up n2 && test -d /proc/$mp &&
    wait_for 60 busy_logged $id &&
    log_since | grep "job $id: migrator $mp still holds its outbox (ended, not gone yet)" &&
    one_hung && test ! -e $GFS-backing/home/alice/lockd/l.bin &&
    gfsemu_fault_clear "$GFS" && wait_for 20 test ! -d /proc/$mp &&
    wait_for 120 job_done $id && test "$(job_state $id)" = COMPLETED &&
    wait_for 30 outbox_empty n2 &&
    test "$(sha256sum < $LOCKD/l.bin)" = "$(cat $H/l.sum)" &&
    test "$(conflicts_of $id n2)" = 0 &&
    find $LOCKD -name ".*.part" >$TRASH/parts && test ! -s $TRASH/parts
'
test_expect_success 'no node was drained' 'no_drain'
test_done
