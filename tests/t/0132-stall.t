#!/bin/bash
test_description='stalls: a child stuck on a hung GFS is abandoned, never waited for'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

# A GFS read that is never answered keeps the reader in the kernel (D
# state), where even SIGKILL waits for the answer.  A stage-in copier or
# a replica fetcher that moves no data for StallTimeout is killed and
# abandoned: its GFS stream goes back at once, its operation fails with
# the stuck file named (stage-in: the job fails; fetch: the task reads
# the GFS itself), and it is reaped whenever the hang ends.  Only tier's
# own children read the hung files here: a job's process stuck the same
# way could not be killed either, and Slurm would drain the node.
test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster (StallTimeout 3 s, one GFS stream a node)' '
    cluster_start --gfs-opts latency=0 &&
    printf "%s\n" "StallTimeout = 3s" "GfsStreams = 1" "FetchesPerUser = 4" >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
# whatever fails, no request is left hanging for the reset
test_at_exit "gfsemu_fault_clear '$GFS' 2>/dev/null"
H=$GFS/home/alice
HB=$GFS-backing/home/alice
BH=$GFS/home/bob
BHB=$GFS-backing/home/bob
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
sum_of () { sha256sum <$1 | cut -d" " -f1; }
mkfile () { head -c $3 /dev/urandom >$2 && chown $1: $2; }
no_procs () { test -z "$(agent_children $1 $2)"; }
stager_up () { test -n "$(agent_children $1 tierd-stage)"; }
streams_free () {
    $TIERCTL -N $1 status >$TRASH/st.$1 2>&1 && grep -q "GFS streams: 0 of 1 in use, 0 waiting" $TRASH/st.$1
}
# ping_under NODE NAME JOB...: ping NODE's agent once a second until the
# jobs are done (at least 8 times): every ping answers; the latencies
# (never asserted on) go to TRASH/NAME.sum
ping_under () {
    _n=$1 _name=$2 && shift 2 && : >$TRASH/$_name.us && _i=0 &&
    while [ $_i -lt 8 ] || ! jobs_done "$@"; do
        [ $_i -lt 60 ] || { echo "jobs $* still $(for j; do job_state $j; done)"; return 1; }
        _t0=$(date +%s%N) &&
        (cd $H && as_user alice $TIERCTL -N $_n ping) >/dev/null || { echo "ping $_i failed"; return 1; }
        echo $(( ($(date +%s%N) - _t0) / 1000 )) >>$TRASH/$_name.us && _i=$((_i + 1)) && sleep 1
    done &&
    sort -n $TRASH/$_name.us | awk -v what="$_name" "{ v[NR] = \$1 } END {
        printf \"tierctl ping during %s: %d pings, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n\",
            what, NR, v[int((NR + 1) * 0.5)] / 1000, v[int(NR * 0.99 + 0.999)] / 1000, v[NR] / 1000 }" \
        >$TRASH/$_name.sum && cat $TRASH/$_name.sum
}
jobs_done () { for j; do job_done $j || return 1; done; }
as_user alice mkdir -p "$H/in" "$H/db"
as_user bob mkdir -p "$BH/in"
mkfile alice $HB/in/stuck.bin 4194304
mkfile bob $BHB/in/b.bin 2000000
BSUM=$(sum_of $BHB/in/b.bin)

# ------------------------------------------------------------- stage-in
#
# First every READ of alice's input hangs: a copier waiting for a READ
# of the page cache can still be killed, and is.  Then its OPEN hangs:
# that copier sleeps where SIGKILL waits too, and is abandoned.  n1 has
# one GFS stream: the stuck copier holds it, so bob's stage-in, submitted
# meanwhile, starts only when that stream is taken back.
SIREAD="home/alice/in/stuck.bin:read:hang"
SIOPEN="home/alice/in/stuck.bin:open:hang"
test_expect_success 'stage-in whose GFS read hangs: the job fails naming the stuck input' '
    gfsemu_fault "$GFS" "$SIREAD" &&
    id=$(sbatch_wait alice -w n1 --tier-stage-in=$H/in/stuck.bin -o $H/sr.out -e $H/sr.err         --wrap "echo ran") &&
    echo "job $id $(job_state $id)" && cat $H/sr.err && test "$(job_state $id)" = FAILED &&
    ! grep -q ran $H/sr.out && gfsemu_hung "$GFS" &&
    grep -q "tier: stage-in failed: $H/in/stuck.bin: no progress for 3 s (StallTimeout)" $H/sr.err &&
    grep "job $id: stage-in failed: $H/in/stuck.bin: no progress" $CLUSTER/log/tierd-n1.log &&
    test "$(scontrol show job $id | grep -o "Restarts=[0-9]*")" = Restarts=0 &&
    wait_for 10 streams_free n1
'
# A stager killed (the OOM killer, an admin) writes no outcome: the
# tasks see it gone and ask the agent to start it again, which it does
# twice a part; a copier killed ends its stager for a fresh start.  Each
# kill here hits a copy stuck in a hung READ (so that it is mid-copy);
# the hang is lifted once the kill is sent.
stager_of () { agent_children n1 tierd-stage | cut -d" " -f1 | head -1; }
copier_of () { pgrep -P "$1" -x tierd-stagecp | head -1; }
test_expect_success 'a stager killed mid-copy is started again: the job reads the right bytes' '
    gfsemu_fault_clear "$GFS" && wait_for 10 gfsemu_unhung "$GFS" && gfsemu_fault "$GFS" "$SIREAD" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-in=$H/in/stuck.bin \
        -o $H/sk.out -e $H/sk.err --wrap "sha256sum < $H/in/stuck.bin") &&
    wait_for 60 gfsemu_hung "$GFS" && wait_for 10 stager_up n1 && spid=$(stager_of) &&
    kill -KILL $spid && gfsemu_fault_clear "$GFS" &&
    wait_for 60 job_done $id && cat $H/sk.err && test "$(job_state $id)" = COMPLETED &&
    grep -q "^$(sum_of $HB/in/stuck.bin) " $H/sk.out &&
    grep -q "tier: stage-in: its stager (pid $spid) ended before the stage-in did (killed?); it starts again" $H/sk.err &&
    grep "job $id: stage-in: its stager (pid $spid) ended unfinished; started again (1 of 2)" \
        $CLUSTER/log/tierd-n1.log &&
    wait_for 10 gfsemu_unhung "$GFS" && wait_for 10 streams_free n1
'
test_expect_success 'a copier killed mid-copy: its part starts again, the job reads the right bytes' '
    gfsemu_fault "$GFS" "$SIREAD" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-in=$H/in/stuck.bin \
        -o $H/ck.out -e $H/ck.err --wrap "sha256sum < $H/in/stuck.bin") &&
    wait_for 60 gfsemu_hung "$GFS" && wait_for 10 stager_up n1 && spid=$(stager_of) &&
    wait_for 10 copier_of $spid && cpid=$(copier_of $spid) &&
    kill -KILL $cpid && gfsemu_fault_clear "$GFS" &&
    wait_for 60 job_done $id && cat $H/ck.err && test "$(job_state $id)" = COMPLETED &&
    grep -q "^$(sum_of $HB/in/stuck.bin) " $H/ck.out &&
    grep "job $id: stage-in: its copier (pid $cpid) was killed by signal 9; the part is to start again" \
        $CLUSTER/log/tierd-n1.log &&
    grep "job $id: stage-in: its stager (pid $spid) ended unfinished; started again (1 of 2)" \
        $CLUSTER/log/tierd-n1.log &&
    wait_for 10 gfsemu_unhung "$GFS" && wait_for 10 streams_free n1
'
# every stager of the job killed as soon as it shows (the hang stays):
# two are started again, the third kill fails the job, saying why
test_expect_success 'a stager killed three times: the job fails saying so' '
    gfsemu_fault "$GFS" "$SIREAD" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-in=$H/in/stuck.bin \
        -o $H/k3.out -e $H/k3.err --wrap "echo ran") &&
    : >$TRASH/k3 && t=0 &&
    while ! job_done $id && [ $t -lt 600 ]; do
        p=$(stager_of) && [ -n "$p" ] && kill -KILL $p 2>/dev/null && echo $p >>$TRASH/k3
        sleep 0.1; t=$((t + 1))
    done &&
    echo "kills: $(sort -u $TRASH/k3 | wc -l)" && cat $H/k3.err &&
    test "$(job_state $id)" = FAILED && ! grep -q ran $H/k3.out &&
    test $(sort -u $TRASH/k3 | wc -l) = 3 &&
    grep -q "tier: stage-in failed: its stager (pid [0-9]*) ended before the stage-in did (killed?), and was not started again: it was started again 2 times already; resubmit the job" $H/k3.err &&
    gfsemu_fault_clear "$GFS" && wait_for 10 gfsemu_unhung "$GFS" && wait_for 10 streams_free n1
'
test_expect_success 'stage-in whose GFS open hangs: the job fails naming it; the agent answers throughout' '
    gfsemu_fault_clear "$GFS" && wait_for 10 gfsemu_unhung "$GFS" && gfsemu_fault "$GFS" "$SIOPEN" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-in=$H/in/stuck.bin \
        -o $H/si.out -e $H/si.err --wrap "echo ran") &&
    echo $id >$TRASH/si && wait_for 60 gfsemu_hung "$GFS" &&
    b=$(cd $BH && as_user bob sbatch --parsable -w n1 --tier-stage-in=$BH/in/b.bin \
        -o $BH/bsi.out --wrap "sha256sum < $BH/in/b.bin") &&
    p=$(cd $BH && as_user bob sbatch --parsable -w n1 -o $BH/plain.out --wrap "echo plain") &&
    echo $b >$TRASH/bsi && echo $p >$TRASH/plain &&
    ping_under n1 stage-in $id $b $p &&
    echo "job $id $(job_state $id), bob: $b $(job_state $b), $p $(job_state $p)" && cat $H/si.err &&
    test "$(job_state $id)" = FAILED && ! grep -q ran $H/si.out &&
    grep -q "tier: stage-in failed: $H/in/stuck.bin: no progress for 3 s (StallTimeout): .*abandoned" $H/si.err &&
    grep "job $id: stage-in failed: $H/in/stuck.bin: no progress" $CLUSTER/log/tierd-n1.log
'
[ -s "$TRASH/stage-in.sum" ] && say "$(cat "$TRASH/stage-in.sum")"
test_expect_success 'the copier was abandoned, not waited for: still stuck, its GFS stream revoked' '
    id=$(cat $TRASH/si) && gfsemu_hung "$GFS" && agent_children n1 tierd-stagecp && agent_stuck n1 tierd-stagecp &&
    grep "GFS stream revoked: stage-in of job $id" $CLUSTER/log/tierd-n1.log &&
    streams_free n1 && cat $TRASH/st.n1
'
test_expect_success 'meanwhile bob'"'"'s stage-in on the node took that stream and ran, so did his plain job; no node drained' '
    b=$(cat $TRASH/bsi) p=$(cat $TRASH/plain) &&
    test "$(job_state $b)" = COMPLETED && grep -q "^$BSUM " $BH/bsi.out &&
    test "$(job_state $p)" = COMPLETED && test "$(cat $BH/plain.out)" = plain && no_drain
'
test_expect_success 'the hang ends: the copier is reaped, no zombie, nothing left' '
    gfsemu_fault_clear "$GFS" && wait_for 30 no_procs n1 tierd-stagecp &&
    test -z "$(agent_zombies n1)" && test "$(gfsemu_value "$GFS" fault.hung)" = 0 &&
    streams_free n1 && no_procs n1 tierd-stage
'
test_expect_success 'cleared: the next job stages the input and reads its bytes' '
    id=$(sbatch_wait alice -w n1 --tier-stage-in=$H/in/stuck.bin -o $H/si2.out \
        --wrap "sha256sum < $H/in/stuck.bin") &&
    test "$(job_state $id)" = COMPLETED && grep -q "^$(sum_of $HB/in/stuck.bin) " $H/si2.out
'

# --------------------------------------------------- batch replica fetch
#
# The first READ of the source hangs: the fetcher's.  The task waits for
# the replica; once the fetch is abandoned it is told to read the GFS,
# through its own descriptor (the stuck fetcher holds it too, but reads
# with pread, which neither moves nor locks the offset, and was killed:
# it does nothing more with it), and reads the right bytes.
mkfile alice $HB/db/r.bin 8388608
RSUM=$(sum_of $HB/db/r.bin)
FHANG="home/alice/db/r.bin:read:hang:1"
BB=$CLUSTER/bb
uid_alice=$(id -u alice)
printf '#!/bin/bash\nset -o pipefail\ncat "$1" | sha256sum\n' >$H/bread.sh
chmod 755 $H/bread.sh; chown alice $H/bread.sh
test_expect_success 'replica fetch whose GFS read hangs: the task reads the right bytes from the GFS; the agent answers throughout' '
    gfsemu_fault "$GFS" "$FHANG" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-batch=$H/db -o $H/f.out -e $H/f.err \
        $H/bread.sh $H/db/r.bin) && echo $id >$TRASH/f &&
    wait_for 60 gfsemu_hung "$GFS" &&
    p=$(cd $BH && as_user bob sbatch --parsable -w n2 -o $BH/plain2.out --wrap "echo plain") &&
    ping_under n2 fetch $id $p &&
    cat $H/f.out $H/f.err && test "$(job_state $id)" = COMPLETED && grep -qx "$RSUM  -" $H/f.out &&
    test "$(job_state $p)" = COMPLETED &&
    grep "job $id: replica of $H/db/r.bin not made: no data from the GFS for 3 s (StallTimeout)" \
        $CLUSTER/log/tierd-n2.log && no_drain
'
[ -s "$TRASH/fetch.sum" ] && say "$(cat "$TRASH/fetch.sum")"
test_expect_success 'the fetcher was abandoned: still stuck, its stream back' '
    gfsemu_hung "$GFS" && agent_stuck n2 tierd-fetch &&
    grep "tierd-fetch [0-9]*: killed [0-9]* ms ago and still there" $CLUSTER/log/tierd-n2.log &&
    streams_free n2 && test -z "$(find $BB/replicas -name "*.part")"
'
test_expect_success 'the hang ends: the fetcher is reaped and logged, no zombie, nothing half made' '
    gfsemu_fault_clear "$GFS" && { wait_for 30 no_procs n2 tierd-fetch || { agent_children n2 tierd-fetch; exit 1; }; } &&
    wait_for 10 grep -q "tierd-fetch [0-9]*, abandoned [0-9]* s ago, ended at last" $CLUSTER/log/tierd-n2.log &&
    grep "ended at last" $CLUSTER/log/tierd-n2.log &&
    { test -z "$(agent_zombies n2)" || { echo zombies; agent_zombies n2; exit 1; }; } &&
    wait_for 10 gfsemu_unhung "$GFS" && streams_free n2 &&
    find $BB -path "*/.tmp/*" -type f >$TRASH/tmps && cat $TRASH/tmps && test ! -s $TRASH/tmps
'
test_expect_success 'the fetch is retried: the next job reads the right bytes from a complete replica' '
    id=$(sbatch_wait alice -w n2 --tier-batch=$H/db -o $H/f2.out $H/bread.sh $H/db/r.bin) &&
    test "$(job_state $id)" = COMPLETED && grep -qx "$RSUM  -" $H/f2.out &&
    (cd $H && as_user alice $TIERCTL -N n2 replicas $H/db) >$TRASH/reps && cat $TRASH/reps &&
    grep -q "$H/db/r.bin" $TRASH/reps &&
    for r in $(find $BB/replicas/u$uid_alice -type f ! -name "*.lock"); do
        test "$(sum_of $r)" = "$RSUM" || exit 1
    done
'

# ------------------------------------------------- queued fetches, capped
#
# Each queued fetch holds its source's descriptor.  bob asks for ten
# fetches at once on n3 (on ten connections, each closed after a second)
# while the first to run hangs in a GFS read and holds the node's only
# stream: FetchesPerUser (4) are queued, the rest are told at once to
# read the GFS, naming the limit.  (The client runs without the
# interposer, which would ask for the fetch itself at its open.)
RAWPY="python3 $TIER_SRCDIR/tests/lib/rawclient.py"
as_user bob mkdir -p "$BH/db"
for i in 0 1 2 3 4 5 6 7 8 9; do mkfile bob $BHB/db/f$i 65536; done
test_expect_success 'bob asks for more fetches than FetchesPerUser: the rest read the GFS at once' '
    gfsemu_fault "$GFS" "home/bob/db/f*:read:hang:1" &&
    (cd $BH && as_user bob srun -w n3 --tier-batch=$BH/db env -u LD_PRELOAD $RAWPY "$CLUSTER/run/tier/n3/tierd.sock" fetches \
        $BH/db/f0 $BH/db/f1 $BH/db/f2 $BH/db/f3 $BH/db/f4 $BH/db/f5 $BH/db/f6 $BH/db/f7 $BH/db/f8 $BH/db/f9) \
        >$TRASH/fq && cat $TRASH/fq &&
    test "$(grep -c ": deferred$" $TRASH/fq)" = 5 &&
    test "$(grep -c "fallthrough.*4 of uid $(id -u bob).s fetches are queued on node n3 (FetchesPerUser)" $TRASH/fq)" = 5 &&
    grep "not made now: .*(FetchesPerUser) (read from the GFS)" $CLUSTER/log/tierd-n3.log &&
    (cd $H && as_user alice $TIERCTL -N n3 ping) &&
    gfsemu_fault_clear "$GFS" && wait_for 10 gfsemu_unhung "$GFS" && wait_for 30 streams_free n3 &&
    wait_for 30 no_procs n3 tierd-fetch
'

# ------------------------------------------------ a mirror's walk, hung
#
# tierctl prefetch --bind asks the agent for a mirror of the directory,
# whose walk (as the user, by tier's walker alone) lists it on the GFS:
# here that listing never answers.  The walk runs off the agent's loop
# (the mirror's builder): pings with a 2 s AgentTimeout, once a second
# while it hangs, all answer; the request fails naming the walk; once
# the hang ends the walker is gone.
as_user bob mkdir -p "$BH/mdb" && mkfile bob $BHB/mdb/m1 4096
sed "/^AgentTimeout *=/d" $CLUSTER/etc/tier.conf >$TRASH/ping.conf && echo "AgentTimeout = 2s" >>$TRASH/ping.conf
chmod 644 $TRASH/ping.conf
test_expect_success 'a mirror whose walk hangs in the GFS: the agent answers throughout, the request fails naming the walk' '
    (cd $BH && as_user bob $TIERCTL set policy $BH/mdb batch) &&
    gfsemu_fault "$GFS" "home/bob/mdb:readdir:hang" &&
    { (cd $BH && as_user bob $RAWPY "$CLUSTER/run/tier/n3/tierd.sock" request \
        "{\"op\":\"replica.mirror\",\"path\":\"$BH/mdb\"}" >$TRASH/mir 2>&1) & } && mp=$! &&
    wait_for 30 gfsemu_hung "$GFS" && : >$TRASH/mping.us &&
    (for i in 1 2 3 4 5 6 7 8; do
        t0=$(date +%s%N) &&
        $CLUSTER/lib/tierctl -c $TRASH/ping.conf -N n3 ping >/dev/null || { echo "ping $i failed"; exit 1; }
        echo $(( ($(date +%s%N) - t0) / 1000 )) >>$TRASH/mping.us && sleep 1
    done) &&
    echo "pings during the hung walk (us): $(tr "\n" " " <$TRASH/mping.us)" &&
    { wait $mp || :; } && cat $TRASH/mir &&
    grep -q "the walk of $BH/mdb as uid $(id -u bob) did not finish within 5 s" $TRASH/mir &&
    gfsemu_fault_clear "$GFS" && wait_for 10 gfsemu_unhung "$GFS" &&
    wait_for 30 no_procs n3 tierd-walk && wait_for 30 no_procs n3 tierd-mirror
'


# A job start checks the job's mirrors: the checker (a root child) has
# the walker walk each source again as the user.  Here that walk hangs:
# the job's registration waits for it (what is left of the job start's
# 7 s) off the loop -- the
# agent answers pings with a 2 s AgentTimeout meanwhile -- and the job
# then runs without the mirror.
as_user bob mkdir -p "$BH/mdb2" && mkfile bob $BHB/mdb2/m2 4096
test_expect_success 'a job start whose mirror walk hangs: the agent answers meanwhile, the job runs unbound' '
    (cd $BH && as_user bob $TIERCTL set policy $BH/mdb2 batch) &&
    (cd $BH && as_user bob $TIERCTL -N n3 prefetch --bind $BH/mdb2) >$TRASH/mb2 && cat $TRASH/mb2 &&
    grep -q "$BH/mdb2: bound read-only into your jobs" $TRASH/mb2 &&
    gfsemu_fault "$GFS" "home/bob/mdb2:readdir:hang" &&
    id=$(cd $BH && as_user bob sbatch --parsable -w n3 --tier-cache=auto -o $BH/mb2.out \
        --wrap "grep -c \" $BH/mdb2 ro,\" /proc/self/mountinfo; true") &&
    wait_for 30 gfsemu_hung "$GFS" && : >$TRASH/bping.us &&
    (for i in 1 2 3 4; do
        t0=$(date +%s%N) &&
        $CLUSTER/lib/tierctl -c $TRASH/ping.conf -N n3 ping >/dev/null || { echo "ping $i failed"; exit 1; }
        echo $(( ($(date +%s%N) - t0) / 1000 )) >>$TRASH/bping.us && sleep 1
    done) &&
    echo "pings during the hung job-start walk (us): $(tr "\n" " " <$TRASH/bping.us)" &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    cat $BH/mb2.out && test "$(cat $BH/mb2.out)" = 0 &&
    grep "job $id: mirror $BH/mdb2 not bound: the walk of $BH/mdb2 as uid $(id -u bob) did not finish within the job start'"'"'s 7 s" \
        $CLUSTER/log/tierd-n3.log &&
    gfsemu_fault_clear "$GFS" && wait_for 10 gfsemu_unhung "$GFS" &&
    wait_for 30 no_procs n3 tierd-walk && wait_for 30 no_procs n3 tierd-binds
'

# The job start's two waits share one deadline, 7 s, below the default
# AgentTimeout (10 s): here bob's policies take 3 s to open (the GFS is
# slow) and then the walk of his mirror hangs.  The walk gets what is
# left; the step, with --tier-cache=required, is answered and runs.  The
# time from the registration to its answer is reported, not asserted.
test_expect_success 'a slow policy freeze, then a hung mirror walk: the walk gets what is left of the job start'"'"'s 7 s' '
    gfsemu_fault "$GFS" ".tier/users/bob/policies.json:open:delay3000" "home/bob/mdb2:readdir:hang" &&
    id=$(cd $BH && as_user bob sbatch --parsable -w n3 --tier-cache=required \
        -o $BH/mb3.out -e $BH/mb3.err \
        --wrap "grep -c \" $BH/mdb2 ro,\" /proc/self/mountinfo; true") &&
    wait_for 60 job_done $id && cat $BH/mb3.err && test "$(job_state $id)" = COMPLETED &&
    test "$(cat $BH/mb3.out)" = 0 && ! grep -q "^tier:" $BH/mb3.err &&
    test "$(gfsemu_fault_hits "$GFS" ".tier/users/bob/policies.json:open:delay3000")" -ge 1 &&
    grep "job $id: mirror $BH/mdb2 not bound: the walk of $BH/mdb2 as uid $(id -u bob) did not finish within the job start'"'"'s 7 s" \
        $CLUSTER/log/tierd-n3.log >$TRASH/mb3.log &&
    t0=$(grep -m1 "job $id (batch" $CLUSTER/log/tierd-n3.log | cut -c1-23) &&
    t1=$(head -1 $TRASH/mb3.log | cut -c1-23) &&
    echo "a job start with a slow freeze and a hung walk: registered $t0, mirror given up $t1" >$TRASH/reg.sum &&
    gfsemu_fault_clear "$GFS" && wait_for 10 gfsemu_unhung "$GFS" &&
    wait_for 30 no_procs n3 tierd-walk && wait_for 30 no_procs n3 tierd-binds
'
[ -s "$TRASH/reg.sum" ] && say "$(cat "$TRASH/reg.sum")"

# tierctl prefetch from outside a job follows the caller's own policies,
# which the policy freezer reads as the user from SharedStateDir on the
# GFS: here bob's never answer.  The read runs off the agent's loop:
# pings with a 2 s AgentTimeout all answer, alice's prefetch meanwhile is
# made, and bob's fails once the freezer's 5 s are up, saying why.  While
# four of his reads hang, a fifth is refused at once.
BPOL=.tier/users/bob/policies.json
as_user alice mkdir -p "$H/pdb" && mkfile alice $HB/pdb/p1 4096
bob_prefetch () { (cd $BH && as_user bob $TIERCTL -N n2 prefetch $BH/mdb/m1) >$TRASH/bp.$1 2>&1; }
four_hung () { test "$(gfsemu_value "$GFS" fault.hung)" -ge 4; }
test_expect_success 'a prefetch whose user policies hang: the agent answers, another user is served, it fails saying why' '
    (cd $H && as_user alice $TIERCTL set policy $H/pdb batch) &&
    gfsemu_fault "$GFS" "$BPOL:open:hang" &&
    { bob_prefetch 1 & } && bp=$! &&
    wait_for 30 gfsemu_hung "$GFS" && : >$TRASH/pping.us &&
    (for i in 1 2 3; do
        t0=$(date +%s%N) &&
        $CLUSTER/lib/tierctl -c $TRASH/ping.conf -N n2 ping >/dev/null || { echo "ping $i failed"; exit 1; }
        echo $(( ($(date +%s%N) - t0) / 1000 )) >>$TRASH/pping.us && sleep 1
    done) &&
    echo "pings during the hung policy read (us): $(tr "\n" " " <$TRASH/pping.us)" &&
    (cd $H && as_user alice $TIERCTL -c $TRASH/ping.conf -N n2 prefetch $H/pdb/p1) &&
    { wait $bp; rc=$?; } && cat $TRASH/bp.1 && test $rc != 0 &&
    grep -q "cannot read the policies of uid $(id -u bob): the shared state directory did not answer in time" $TRASH/bp.1
'
test_expect_success 'four of bob'"'"'s policy reads hang: a fifth is refused at once; all end when the hang does' '
    for i in 2 3 4 5; do { bob_prefetch $i & }; done &&
    wait_for 30 four_hung &&
    ! bob_prefetch 6 && cat $TRASH/bp.6 &&
    grep -q "4 requests of uid $(id -u bob) wait for its policies already" $TRASH/bp.6 &&
    wait && gfsemu_fault_clear "$GFS" && wait_for 10 gfsemu_unhung "$GFS" &&
    wait_for 30 no_procs n2 tierd-freeze &&
    (cd $BH && as_user bob $TIERCTL -N n2 prefetch $BH/mdb/m1)
'

# M6: a mirror of a source of 150,000 entries.  Its walk (as bob), the
# sort and the tree on the BB are the mirror child's: the loop only
# starts it and answers.  (The GFS emulator holds a descriptor per inode
# the kernel caches, more than its limit here: the kernel is made to
# forget the inodes it does not use every half second.)  Pings twice a second all answer with a 2 s
# AgentTimeout, alice's tiered job runs meanwhile, and the request ends
# within the mirror's 9 s, refused (none of the files is prefetched)
# naming a file that is not, or the walk that did not finish in 5 s.
# ping_while PID NAME: ping n3's agent (2 s AgentTimeout) twice a second
# while PID runs (at least 6 times): every ping answers; the latencies
# (never asserted on) are summed up in TRASH/NAME.sum
ping_while () {
    : >$TRASH/$2.us && _i=0 &&
    while kill -0 $1 2>/dev/null || [ $_i -lt 6 ]; do
        [ $_i -lt 120 ] || { echo "pid $1 still runs"; return 1; }
        _t0=$(date +%s%N) &&
        $CLUSTER/lib/tierctl -c $TRASH/ping.conf -N n3 ping >/dev/null || { echo "ping $_i failed"; return 1; }
        echo $(( ($(date +%s%N) - _t0) / 1000 )) >>$TRASH/$2.us && _i=$((_i + 1)) && sleep 0.5
    done &&
    sort -n $TRASH/$2.us | awk -v what="$2" "{ v[NR] = \$1 } END {
        printf \"tierctl ping during %s: %d pings, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n\",
            what, NR, v[int((NR + 1) * 0.5)] / 1000, v[int(NR * 0.99 + 0.999)] / 1000, v[NR] / 1000 }" \
        >$TRASH/$2.sum && cat $TRASH/$2.sum
}
test_at_exit "touch $TRASH/huge.done"
as_user bob mkdir -p "$BH/huge" &&
python3 -c '
import os, sys
root = sys.argv[1]
for d in range(150):
    p = os.path.join(root, "d%03d" % d)
    os.mkdir(p)
    for f in range(999):
        open(os.path.join(p, "f%03d" % f), "w").close()
' "$BHB/huge" && chown -R bob: "$BHB/huge"
test_expect_success 'a mirror of 150,000 entries: the agent answers throughout, alice'"'"'s job runs' '
    test "$(find $BHB/huge | wc -l)" -ge 150000 &&
    (cd $BH && as_user bob $TIERCTL set policy $BH/huge batch) &&
    { while [ ! -e $TRASH/huge.done ]; do echo 2 >/proc/sys/vm/drop_caches; sleep 0.5; done & } &&
    { (cd $BH && as_user bob $RAWPY "$CLUSTER/run/tier/n3/tierd.sock" request \
        "{\"op\":\"replica.mirror\",\"path\":\"$BH/huge\"}" >$TRASH/huge 2>&1) & } && hp=$! &&
    aid=$(cd $H && as_user alice sbatch --parsable -w n3 --tier-cache=auto -o $H/huge.out --wrap "echo ran") &&
    ping_while $hp huge && touch $TRASH/huge.done &&
    cat $TRASH/huge &&
    grep -qE "the walk of $BH/huge as uid $(id -u bob) did not finish within 5 s|d[0-9]*/f[0-9]* is not prefetched" $TRASH/huge &&
    wait_for 60 job_done $aid && test "$(job_state $aid)" = COMPLETED && test "$(cat $H/huge.out)" = ran &&
    wait_for 30 no_procs n3 tierd-walk && wait_for 30 no_procs n3 tierd-mirror
'

test_expect_success 'no node was drained' 'no_drain'
test_done
