#!/bin/bash
test_description='the job mount namespace: isolation, propagation, mount safety, teardown'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM || skip_all "needs root and Slurm"
test_expect_success 'start the cluster' 'cluster_start'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
OUT=$H/out
NV=$(cat "$CLUSTER/run/nvdimm.path")
JOBNS="$TIER_BUILDDIR/tests/unit/jobns_tool"
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
as_alice () { (cd "$H" && as_user alice "$@"); }
# overlays_under DIR: overlay mounts on DIR in this (the host's) table
host_overlay () { grep " $1 " /proc/self/mountinfo | grep -q " - overlay "; }

test_expect_success 'alice has a run directory with a file in it' '
    as_user alice mkdir -p "$H/runs" "$OUT" &&
    as_user alice sh -c "echo before > $H/runs/old.txt"
'

# Job A: batch step on n1, two concurrent sruns on n1 and n2.  Job B: the
# same directory, the same user, n1, at the same time.  Each writes its
# markers, then lists what it sees.
cat >"$H/jobA.sh" <<EOF
#!/bin/bash
R=$H/runs; O=$OUT
echo A > \$R/A-batch
srun --overlap -N2 -n2 sh -c 'echo x > \$0/A-s1-\$SLURMD_NODENAME; touch $OUT/A-s1-ready-\$SLURMD_NODENAME; sleep 6; ls \$0 > $OUT/A-s1-\$SLURMD_NODENAME.ls' \$R &
srun --overlap -N2 -n2 sh -c 'sleep 3; ls \$0 > $OUT/A-s2-\$SLURMD_NODENAME.ls' \$R &
wait
ls \$R > \$O/A-batch.ls
EOF
cat >"$H/jobB.sh" <<EOF
#!/bin/bash
echo B > $H/runs/B-batch; touch $OUT/B-ready; sleep 6; ls $H/runs > $OUT/B-batch.ls
EOF
chmod 755 "$H/jobA.sh" "$H/jobB.sh"; chown alice "$H/jobA.sh" "$H/jobB.sh"

test_expect_success 'two concurrent jobs over one directory, steps on two nodes' '
    a=$(as_alice sbatch --parsable -N2 -n2 -w n1,n2 --tier-scratch=$H/runs \
        -o $OUT/A.out "$H/jobA.sh") &&
    b=$(as_alice sbatch --parsable -N1 -n1 -w n1 --tier-scratch=$H/runs \
        -o $OUT/B.out "$H/jobB.sh") &&
    wait_for 60 test -e $OUT/A-s1-ready-n2 && wait_for 60 test -e $OUT/B-ready &&
    echo "host view during the run:" && ls "$H/runs" | tee $TRASH/host.ls &&
    test "$(cat $TRASH/host.ls)" = old.txt &&
    ! host_overlay "$H/runs" &&
    as_alice srun -w n3 ls "$H/runs" >$TRASH/n3.ls && test "$(cat $TRASH/n3.ls)" = old.txt &&
    wait_for 90 job_done $a && wait_for 90 job_done $b &&
    test "$(job_state $a)" = COMPLETED && test "$(job_state $b)" = COMPLETED &&
    cat $OUT/A.out $OUT/B.out && head $OUT/*.ls
'
test_expect_success 'each step on n1 sees job A'"'"'s n1 view: its batch step, its n1 tasks, never B' '
    for f in A-batch A-s1-n1 A-s2-n1; do
        grep -qx A-batch $OUT/$f.ls && grep -qx A-s1-n1 $OUT/$f.ls &&
        ! grep -q "^A-s1-n2$" $OUT/$f.ls && ! grep -q "^B" $OUT/$f.ls &&
        grep -qx old.txt $OUT/$f.ls || { echo "bad $f"; exit 1; }
    done
'
test_expect_success 'on n2 job A sees only its n2 view' '
    for f in A-s1-n2 A-s2-n2; do
        grep -qx A-s1-n2 $OUT/$f.ls && ! grep -qx A-batch $OUT/$f.ls &&
        ! grep -qx A-s1-n1 $OUT/$f.ls && ! grep -q "^B" $OUT/$f.ls || exit 1
    done
'
test_expect_success 'job B saw its own view only' '
    grep -qx B-batch $OUT/B-batch.ls && ! grep -q "^A" $OUT/B-batch.ls
'
test_expect_success 'afterwards: the GFS is unchanged, nothing is mounted, the tier is empty' '
    test "$(ls $H/runs)" = old.txt && test "$(cat $H/runs/old.txt)" = before &&
    ! grep -q " - overlay " /proc/self/mountinfo &&
    test -z "$(ls -A $NV/n1 $NV/n2 2>/dev/null | grep -v :)" &&
    test -z "$(ls -A $CLUSTER/run/ns/n1 $CLUSTER/run/ns/n2 2>/dev/null | grep -v :)"
'
test_expect_success 'files from the GFS are readable; changing one changes the job'"'"'s copy only' '
    as_alice srun -w n2 --tier-scratch=$H/runs sh -c "cat $H/runs/old.txt && echo changed > $H/runs/old.txt && cat $H/runs/old.txt" >$TRASH/o &&
    test "$(cat $TRASH/o)" = "before
changed" && test "$(cat $H/runs/old.txt)" = before
'
test_expect_success 'a host mount made after the job started is visible inside (MS_SLAVE)' '
    rm -f $OUT/go && mkdir -p "$H/later" && chown alice "$H/later" &&
    id=$(as_alice sbatch --parsable -w n1 --tier-scratch=$H/runs -o $OUT/prop.out \
        --wrap "touch $OUT/prop-ready; while [ ! -e $OUT/go ]; do sleep 0.2; done; cat $H/later/hello") &&
    wait_for 30 test -e $OUT/prop-ready &&
    mount -t tmpfs -o size=1m tmpfs "$H/later" && echo hello-from-host >"$H/later/hello" &&
    touch $OUT/go && wait_for 30 job_done $id; umount "$H/later";
    cat $OUT/prop.out && grep -q hello-from-host $OUT/prop.out
'
# refused SCRATCH MESSAGE: the job runs (auto) with a warning; nothing mounted
refused () {
    as_alice srun -w n1 --tier-scratch="$1" sh -c \
        "grep -c \" - overlay \" /proc/self/mountinfo || true" >$TRASH/cnt 2>$TRASH/err;
    cat $TRASH/err
    grep -q -- "$2" $TRASH/err && test "$(cat $TRASH/cnt)" = 0
}
test_expect_success '--tier-scratch=/etc is refused: outside AllowedRoots' '
    refused /etc "outside the directories tier may act on"
'
test_expect_success 'a symlink into /etc is refused' '
    as_user alice ln -sfn /etc "$H/etclink" &&
    refused "$H/etclink" "leads out of"
'
test_expect_success 'a directory outside AllowedRoots is refused' '
    mkdir -p /tmp/tier-outside-$$ && chown alice /tmp/tier-outside-$$ &&
    (refused /tmp/tier-outside-$$ "outside the directories"; rc=$?; rmdir /tmp/tier-outside-$$; exit $rc)
'
test_expect_success 'a directory alice cannot write is refused' '
    refused "$GFS/home/bob" "you cannot write this directory"
'
test_expect_success 'required turns a refusal into a clean job failure' '
    id=$(sbatch_wait alice -w n1 --tier-cache=required --tier-scratch=/etc -o $OUT/rq.out -e $OUT/rq.err --wrap "echo ran") &&
    test "$(job_state $id)" = FAILED && ! grep -q ran $OUT/rq.out &&
    grep -q "required: --tier-scratch: /etc is outside" $OUT/rq.err && no_drain
'
test_expect_success 'a name with :/root works as scratch; /root is untouched' '
    as_user alice mkdir -p "$H/y:/root" && as_user alice sh -c "echo mine > \"$H/y:/root/file\"" &&
    as_alice srun -w n1 --tier-scratch="$H/y:/root" sh -c "ls \"$H/y:/root\"; echo new > \"$H/y:/root/new\"; ls /root >/dev/null 2>&1 && echo ROOT-READABLE; grep \" - overlay \" /proc/self/mountinfo" >$TRASH/y 2>&1;
    cat $TRASH/y && grep -qx file $TRASH/y && ! grep -q ROOT-READABLE $TRASH/y &&
    grep -q "lowerdir+=$H/y:/root" $TRASH/y && test ! -e /root/new && test ! -e "$H/y:/root/new"
'
X="$H/x,upperdir=/etc"
test_expect_success 'a name with ,upperdir= works as scratch (escaped as \,); /etc is untouched' '
    as_user alice mkdir -p "$X" && as_user alice sh -c "echo mine > \"$X/file\"" &&
    as_alice srun -w n1 --tier-scratch="$H/x\\,upperdir=/etc" sh -c "cat \"$X/file\"; echo new > \"$X/new\"; ls \"$X\"; grep -c \" - overlay \" /proc/self/mountinfo" >$TRASH/x 2>&1;
    cat $TRASH/x && grep -qx mine $TRASH/x && grep -qx new $TRASH/x && test "$(tail -n 1 $TRASH/x)" = 1 &&
    test ! -e "$X/new" && test ! -e /etc/new && test ! -e /etc/file
'
test_expect_success 'so does a pipeline policy of that name' '
    as_user alice $TIERCTL -N n1 set policy "$X" pipeline &&
    as_alice srun -w n1 --tier-cache=auto sh -c "echo p > \"$X/pol\"; cat \"$X/file\"; grep -c \" - overlay \" /proc/self/mountinfo" >$TRASH/xp 2>$TRASH/xp.err;
    as_user alice $TIERCTL -N n1 unset policy "$X" && cat $TRASH/xp $TRASH/xp.err &&
    test "$(cat $TRASH/xp)" = "mine
1" && test ! -e "$X/pol" && test ! -e /etc/pol
'
test_expect_success 'a setuid binary in the scratch gains nothing (nosuid)' '
    cp /usr/bin/id "$H/runs/suid-id" && chown root:root "$H/runs/suid-id" && chmod 4755 "$H/runs/suid-id" &&
    as_alice srun -w n1 --tier-scratch=$H/runs sh -c "$H/runs/suid-id -u; grep \" - overlay \" /proc/self/mountinfo" >$TRASH/s &&
    (cat $TRASH/s && test "$(head -1 $TRASH/s)" = "$(id -u alice)" &&
     grep -q "nosuid,nodev" $TRASH/s; rc=$?; rm -f "$H/runs/suid-id"; exit $rc)
'
test_expect_success 'the upper root mirrors the GFS directory: owner, group, mode, setgid' '
    as_user alice mkdir -p "$H/sg" && chgrp users "$H/sg" && chmod 2770 "$H/sg" &&
    stat -c "%U %G %a" "$H/sg" >$TRASH/sg.host &&
    as_alice srun -w n1 --tier-scratch=$H/sg sh -c "stat -c \"%U %G %a\" $H/sg; touch $H/sg/new; stat -c %G $H/sg/new; grep -c \" - overlay \" /proc/self/mountinfo" >$TRASH/sg.job &&
    cat $TRASH/sg.host $TRASH/sg.job &&
    test "$(cat $TRASH/sg.host)" = "alice users 2770" &&
    test "$(sed -n 1p $TRASH/sg.job)" = "alice users 2770" &&
    test "$(sed -n 2p $TRASH/sg.job)" = users && test "$(sed -n 3p $TRASH/sg.job)" = 1 &&
    test ! -e "$H/sg/new"
'
# scratch_count NODE: overlays the job sees, its stderr in $TRASH/err
scratch_count () {
    as_alice srun -w $1 --tier-scratch=$H/runs sh -c \
        "grep -c \" - overlay \" /proc/self/mountinfo || true" 2>$TRASH/err
    _rc=$?; cat $TRASH/err >&2; return $_rc
}
test_expect_success 'an NVDIMM tier root made by alice is refused; the job runs on the GFS' '
    rm -rf $NV/n3.away && { ! test -e $NV/n3 || mv $NV/n3 $NV/n3.away; } &&
    mkdir -m 700 $NV/n3 && chown alice $NV/n3 &&
    scratch_count n3 >$TRASH/cnt; rc=$?; cat $TRASH/cnt $TRASH/err;
    rmdir $NV/n3; ! test -e $NV/n3.away || mv $NV/n3.away $NV/n3;
    test $rc = 0 && test "$(cat $TRASH/cnt)" = 0 &&
    grep -q "tier root $NV/n3 must be a root-owned directory with mode 0700 (refused)" $TRASH/err &&
    test "$(scratch_count n3)" = 1
'
test_expect_success 'so is a tier root whose parent alice owns' '
    chown alice $NV &&
    scratch_count n3 >$TRASH/cnt; rc=$?; cat $TRASH/cnt $TRASH/err;
    chown root $NV;
    test $rc = 0 && test "$(cat $TRASH/cnt)" = 0 &&
    grep -q "tier root $NV/n3: a parent directory is not root.s" $TRASH/err &&
    test "$(scratch_count n3)" = 1
'
test_expect_success '-o into the tiered directory lands on the GFS' '
    id=$(sbatch_wait alice -w n2 --tier-scratch=$H/runs -o $H/runs/job-%j.out --wrap "echo to-the-gfs; echo scratch > $H/runs/tmp") &&
    cat $H/runs/job-$id.out && grep -q to-the-gfs $H/runs/job-$id.out &&
    test ! -e $H/runs/tmp
'
test_expect_success '-e into the tiered directory lands on the GFS too' '
    id=$(sbatch_wait alice -w n2 --tier-scratch=$H/runs -o /dev/null -e $H/runs/job-%j.err \
        --wrap "echo to-the-gfs-err >&2; echo scratch > $H/runs/tmp") &&
    cat $H/runs/job-$id.err && grep -q to-the-gfs-err $H/runs/job-$id.err &&
    test ! -e $H/runs/tmp
'
test_expect_success 'a working directory inside it is the private view, and the job is told once' '
    as_user alice mkdir -p $H/runs/wd &&
    id=$(sbatch_wait alice -w n2 --tier-scratch=$H/runs -D $H/runs/wd -o $OUT/cwd.out -e $OUT/cwd.err \
        --wrap "pwd; echo rel > relative.txt; cat relative.txt; srun true") &&
    cat $OUT/cwd.out $OUT/cwd.err &&
    test "$(cat $OUT/cwd.out)" = "$(printf "$H/runs/wd\nrel")" &&
    test ! -e $H/runs/wd/relative.txt &&
    test "$(grep -c "tier: warning: the working directory $H/runs/wd lies in the pipeline directory $H/runs: it is this job.s private view" $OUT/cwd.err)" = 1 &&
    as_user alice sh -c "cd $H/runs/wd && srun -w n1 --tier-scratch=$H/runs true" 2>$TRASH/cwd.err &&
    cat $TRASH/cwd.err && grep -q "the working directory $H/runs/wd lies in the pipeline directory $H/runs" $TRASH/cwd.err &&
    id=$(sbatch_wait alice -w n2 --tier-scratch=$H/runs -o /dev/null -e $OUT/nocwd.err --wrap true) &&
    ! grep -q "working directory" $OUT/nocwd.err
'
test_expect_success 'a process left running (setsid) is killed at job end, nothing is left' '
    id=$(sbatch_wait alice -w n3 --tier-scratch=$H/runs -o $OUT/left.out --wrap "cd $H/runs; setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo \$!") &&
    p=$(cat $OUT/left.out) && test -n "$p" && echo "left: $p" &&
    wait_for 10 sh -c "! kill -0 $p 2>/dev/null" &&
    ! grep -q " - overlay " /proc/self/mountinfo &&
    test ! -e $CLUSTER/run/ns/n3/$id && test ! -e $NV/n3/$id
'
# L3: a process of the job in a mount namespace of its own (with a user
# namespace: no privilege needed) is not in the job's namespace, but holds
# a copy of its mounts: found by the job's mark, killed at job end too
cat >"$H/nest.sh" <<'EOF2'
#!/bin/bash
cd "$1"
setsid unshare -Urm sh -c 'echo $$ >'"$2"'; echo nested >mounted; exec sleep 1001' </dev/null >/dev/null 2>&1 &
while [ ! -s "$2" ]; do sleep 0.1; done
EOF2
chmod 755 "$H/nest.sh"; chown alice "$H/nest.sh"
test_expect_success 'a process in a namespace it made inside the job (unshare -Urm) is killed at job end' '
    rm -f $OUT/nested.pid &&
    id=$(sbatch_wait alice -w n3 --tier-scratch=$H/runs -o /dev/null --wrap "$H/nest.sh $H/runs $OUT/nested.pid") &&
    p=$(cat $OUT/nested.pid) && test -n "$p" && echo "nested: $p" &&
    wait_for 10 sh -c "! kill -0 $p 2>/dev/null" &&
    test ! -e $CLUSTER/run/ns/n3/$id && test ! -e $NV/n3/$id
'
test_expect_success 'the agent reclaims a namespace an epilog could not tear down' '
    id=$(sbatch_wait alice -w n3 --tier-cache=auto -o /dev/null --wrap true) &&
    $JOBNS create $CLUSTER/run/ns/n3 $id $(id -u alice) &&
    touch $CLUSTER/run/ns/n3/$id/ended &&
    mkdir -p $NV/n3/$id/0/upper && echo data >$NV/n3/$id/0/upper/f &&
    ($JOBNS run $CLUSTER/run/ns/n3 $id sleep 1000 &) &&
    wait_for 10 sh -c "$JOBNS pids $CLUSTER/run/ns/n3 $id | grep -q ." &&
    wait_for 30 test ! -e $CLUSTER/run/ns/n3/$id &&
    test ! -e $NV/n3/$id &&
    grep -q "job $id: namespace and tier data reclaimed" $CLUSTER/log/tierd-n3.log
'
# a requeued job's prolog makes its namespace before its first step
# registers the new run: the agent must not take it for the old run's
test_expect_success 'a namespace made after its job id ended is a new run: left alone' '
    id=$(sbatch_wait alice -w n3 --tier-cache=auto -o /dev/null --wrap true) &&
    sleep 1 && $JOBNS create $CLUSTER/run/ns/n3 $id $(id -u alice) &&
    n=$(grep -c "reclaimed" $CLUSTER/log/tierd-n3.log || true) &&
    sleep 12 && test -e $CLUSTER/run/ns/n3/$id &&
    test "$(grep -c "reclaimed" $CLUSTER/log/tierd-n3.log)" = "$n" &&
    touch $CLUSTER/run/ns/n3/$id/ended &&
    wait_for 30 test ! -e $CLUSTER/run/ns/n3/$id
'
# the agent dead while jobs end and leave namespaces with a setsid'ed
# process inside: a job it registered (its epilog marked it ended), and
# one it never knew (an id slurmctld does not know either); restarted, it
# reclaims both
agent_pid () { cat "$CLUSTER/state/$1/tierd.pid" 2>/dev/null; }
# the agent gone between the batch step and an srun step (its binary too,
# so that the plugin cannot start it again): the srun step still joins
# the job's namespace and sees what the batch step wrote there
test_expect_success 'a later step joins the namespace when the agent does not answer' '
    rm -f $OUT/na-ready $OUT/na-go &&
    id=$(as_alice sbatch --parsable -w n2 --tier-scratch=$H/runs -o $OUT/na.out -e $OUT/na.err \
        --wrap "echo mine > $H/runs/na.txt; touch $OUT/na-ready; while [ ! -e $OUT/na-go ]; do sleep 0.2; done; srun cat $H/runs/na.txt; srun grep -c \" - overlay \" /proc/self/mountinfo") &&
    wait_for 30 test -e $OUT/na-ready &&
    mv $CLUSTER/lib/tierd $CLUSTER/lib/tierd.away &&
    p=$(agent_pid n2) && test -n "$p" && kill -9 $p &&
    wait_for 10 sh -c "! kill -0 $p 2>/dev/null" &&
    touch $OUT/na-go && wait_for 60 job_done $id;
    mv $CLUSTER/lib/tierd.away $CLUSTER/lib/tierd;
    cat $OUT/na.out $OUT/na.err &&
    test "$(cat $OUT/na.out)" = "$(printf "mine\n1")" &&
    grep -q "tier: warning: on node n2 this step sees the job.s scratch and output directories as its earlier steps did" $OUT/na.err &&
    test ! -e $H/runs/na.txt
'
test_expect_success 'after a restart the agent reclaims what ended while it was down' '
    rm -f $TRASH/left &&
    id=$(as_alice sbatch --parsable -w n3 --tier-cache=auto -o /dev/null --wrap "sleep 3") &&
    wait_for 30 sh -c "$TIERCTL -N n3 jobs | grep -q \"^$id \"" &&
    mv $CLUSTER/lib/tierd $CLUSTER/lib/tierd.away &&
    p=$(agent_pid n3) && kill -9 $p && wait_for 10 sh -c "! kill -0 $p 2>/dev/null" &&
    wait_for 60 job_done $id && other=4000000 &&
    for j in $id $other; do
        $JOBNS create $CLUSTER/run/ns/n3 $j $(id -u alice) &&
        { test $j = $other || touch $CLUSTER/run/ns/n3/$j/ended; } &&
        mkdir -p $NV/n3/$j/0/upper && echo data >$NV/n3/$j/0/upper/f &&
        (setsid $JOBNS run $CLUSTER/run/ns/n3 $j sleep 1000 </dev/null >/dev/null 2>&1 &) &&
        wait_for 10 sh -c "$JOBNS pids $CLUSTER/run/ns/n3 $j | grep -q ." &&
        $JOBNS pids $CLUSTER/run/ns/n3 $j >>$TRASH/left || exit 1
    done && cat $TRASH/left &&
    mv $CLUSTER/lib/tierd.away $CLUSTER/lib/tierd &&
    $CLUSTER/lib/tierd -c $CLUSTER/etc/tier.conf -N n3 &&
    wait_for 60 sh -c "test ! -e $CLUSTER/run/ns/n3/$id && test ! -e $CLUSTER/run/ns/n3/$other" &&
    test ! -e $NV/n3/$id && test ! -e $NV/n3/$other &&
    for q in $(cat $TRASH/left); do
        wait_for 10 sh -c "! test -e /proc/$q || grep -q \"^State:.*Z\" /proc/$q/status" || exit 1
    done &&
    grep "reclaimed" $CLUSTER/log/tierd-n3.log &&
    grep -q "job $id: namespace and tier data reclaimed$" $CLUSTER/log/tierd-n3.log &&
    grep -q "job $other: namespace and tier data reclaimed (a job the registry does not know; it ended)" $CLUSTER/log/tierd-n3.log
'
test_expect_success 'a requeued job (same id) gets a fresh namespace' '
    id=$(as_alice sbatch --parsable -w n2 --requeue --open-mode=append --tier-scratch=$H/runs -o $OUT/rq.out \
        --wrap "if [ -e $H/runs/marker ]; then echo SEEN; else echo FRESH; fi; touch $H/runs/marker; touch $OUT/rq-\$SLURM_RESTART_COUNT; sleep 4") &&
    wait_for 30 test -e $OUT/rq- &&
    scontrol requeue $id && sleep 1 && scontrol update jobid=$id starttime=now &&
    wait_for 120 test -e $OUT/rq-1 && wait_for 60 job_done $id &&
    cat $OUT/rq.out && test "$(grep -c FRESH $OUT/rq.out)" = 2 && ! grep -q SEEN $OUT/rq.out &&
    test ! -e $H/runs/marker
'
test_expect_success 'no node was drained' 'no_drain'
test_done
