#!/bin/bash
# 0141-hostile-stop.t - a user who stops a helper running as them (kill
# -STOP from another job or a login shell) delays only their own work,
# and only for a bounded time.
#
# The epilog's keep copy (--tier-keep) runs as the job's user: stopped,
# it is killed at once and the job ends (before, the epilog waited for
# it for ever: the job stayed COMPLETING, and with PrologEpilogTimeout
# the node drained); slow, it is killed at KeepTimeout.  And a forged
# restart count in a step's environment changes nothing but a log line.
test_description='hostile users: a stopped or endless keep copy does not hold the job or the node'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster (GFS at 20 MiB/s)' '
    cluster_start --gfs-opts bandwidth=20M
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
CONF=$CLUSTER/etc/tier.conf
SLOG=$CLUSTER/log/slurmd-n1.log
as_user alice mkdir -p $H/kscr $H/kout

# the keep copy (cluster.sh keep_child), once the job is COMPLETING (its
# own processes are gone, the epilog runs)
copier_up () { test -n "$(bob_copier)"; }
completing () { test "$(job_state $1)" = COMPLETING; }
has_keep_child () { completing $1 && test -n "$(keep_child)"; }
keep_job () {
    (cd $H && as_user alice sbatch --parsable -w n1 --tier-scratch=$H/kscr \
        --tier-keep=always -o $H/kout/$1.out --wrap "head -c 100M /dev/urandom > $H/kscr/big")
}

test_expect_success 'alice stops her keep copy: it is killed, the job ends COMPLETED' '
    id=$(keep_job stop) && wait_for 60 has_keep_child $id && kp=$(keep_child) &&
    echo "keep copy $kp" && kill -STOP $kp &&
    wait_for 30 job_done $id && test "$(job_state $id)" = COMPLETED &&
    grep "epilog of job $id: keeping $H/kscr: the copy was stopped (signal 19, from outside) and is killed" $SLOG &&
    wait_for 10 test ! -d /proc/$kp
'
test_expect_success 'a keep copy past KeepTimeout is killed, and says so' '
    echo "KeepTimeout = 2s" >>$CONF &&
    id=$(keep_job slow) && wait_for 60 has_keep_child $id && kp=$(keep_child) &&
    wait_for 30 job_done $id && test "$(job_state $id)" = COMPLETED &&
    grep "epilog of job $id: keeping $H/kscr: the copy ran past KeepTimeout (2s) and is killed" $SLOG &&
    wait_for 10 test ! -d /proc/$kp
'
# M2: a step's SLURM_RESTART_COUNT is the user's to set.  Forged counts
# once made a running record (and a scratch reservation) each, of which
# job end closed only the newest: the rest stayed running for ever.
TIERCTL="$CLUSTER/lib/tierctl -c $CONF"
records_of () {
    $TIERCTL -N $1 jobs >$TRASH/jobs.$1 2>&1; cat $TRASH/jobs.$1
    awk -v j="$2" '$1 == j' $TRASH/jobs.$1 >$TRASH/rec.$2
}
test_expect_success 'forged restart counts make no second record, and the job end leaves none running' '
    as_user alice mkdir -p $H/fscr &&
    id=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-scratch=$H/fscr:64M -o $H/kout/forge.out \
        --wrap "for r in 7 8 9; do SLURM_RESTART_COUNT=\$r srun --tier-scratch=$H/fscr:64M true; done") &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED && cat $H/kout/forge.out &&
    grep "job $id: a step claimed restart 7; it is counted in the run on this node, 0" $CLUSTER/log/tierd-n2.log &&
    records_of n2 $id && test "$(wc -l <$TRASH/rec.$id)" = 1 &&
    grep -q " ended " $TRASH/rec.$id
'
# H3: a GFS stream is held by a worker that runs as its user.  bob
# stops his own migrator while it holds the node's only stream: it is
# killed at once (not after StallTimeout), the stream goes to alice's
# stage-out, and bob's migration starts again and publishes.
LOG2=$CLUSTER/log/tierd-n2.log
HB=$GFS/home/bob
as_user bob mkdir -p $HB/sout
bob_migrator () {
    ps -o pid=,user=,comm= --ppid "$(agent_pid n2)" | awk '$2 == "bob" && $3 == "tierd-mig" { print $1; exit }'
}
stream_held () { $TIERCTL -N n2 status | grep -q "GFS streams: 1 of 1 in use"; }
reloads () { grep -c "reloaded" $LOG2 || :; }
reloaded_since () { test "$(reloads)" -gt "$1"; }
test_expect_success 'bob stops his migrator holding the only GFS stream: killed at once, alice gets the stream' '
    n0=$(reloads) && echo "GfsStreams = 1" >>$CONF &&
    kill -HUP $(agent_pid n2) && wait_for 10 reloaded_since $n0 &&
    bid=$(cd $HB && as_user bob sbatch --parsable -w n2 --tier-stage-out=$HB/sout -o /dev/null \
        --wrap "head -c 80M /dev/urandom > $HB/sout/b.bin; sha256sum < $HB/sout/b.bin > $HB/b.sum") &&
    wait_for 60 stream_held && mp=$(bob_migrator) && test -n "$mp" && echo "bob'"'"'s migrator $mp" &&
    as_user bob kill -STOP $mp &&
    aid=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-stage-out=$H/kout -o /dev/null \
        --wrap "echo alice > $H/kout/a.txt") &&
    wait_for 60 job_done $aid && test "$(job_state $aid)" = COMPLETED && test "$(cat $H/kout/a.txt)" = alice &&
    grep "tierd-mig $mp was stopped (signal 19, from outside); killed" $LOG2 &&
    wait_for 120 job_done $bid && test "$(job_state $bid)" = COMPLETED &&
    test "$(sha256sum < $HB/sout/b.bin)" = "$(cat $HB/b.sum)"
'

# H3 for stage-in: the copier runs as bob and bob stops it mid-copy,
# holding the node's only GFS stream.  Its stager kills it within a
# second and ends for a fresh start, which the job's task asks the agent
# for; alice's stage-in meanwhile gets the stream, and both jobs read
# their inputs byte for byte.
bob_copier () {
    for sp in $(ps -o pid=,comm= --ppid "$(agent_pid n2)" | awk '$2 == "tierd-stage" { print $1 }'); do
        ps -o pid=,user=,comm= --ppid $sp | awk '$2 == "bob" && $3 == "tierd-stagecp" { print $1; exit }'
    done | head -1
}
test_expect_success 'bob stops his stage-in copier holding the only GFS stream: killed at once, the part starts again' '
    as_user bob sh -c "head -c 100M /dev/urandom > $HB/sin.bin" && as_user alice sh -c "echo alice-in > $H/ain.txt" &&
    bid=$(cd $HB && as_user bob sbatch --parsable -w n2 --tier-stage-in=$HB/sin.bin -o $HB/sin.out \
        --wrap "sha256sum < $HB/sin.bin") &&
    wait_for 60 stream_held && wait_for 30 copier_up && cp=$(bob_copier) && echo "bob'"'"'s copier $cp" &&
    as_user bob kill -STOP $cp &&
    aid=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-stage-in=$H/ain.txt -o $H/ain.out \
        --wrap "cat $H/ain.txt") &&
    wait_for 60 job_done $aid && test "$(job_state $aid)" = COMPLETED && test "$(cat $H/ain.out)" = alice-in &&
    grep "job $bid: stage-in: its copier (pid $cp) was stopped (signal 19, from outside); killed, the part is to start again" $LOG2 &&
    wait_for 120 job_done $bid && test "$(job_state $bid)" = COMPLETED &&
    grep "job $bid: stage-in: its stager (pid [0-9]*) ended unfinished; started again (1 of 2)" $LOG2 &&
    grep -q "^$(sha256sum < $HB/sin.bin | cut -d" " -f1) " $HB/sin.out &&
    grep -q "tier: stage-in: its stager (pid [0-9]*) ended before the stage-in did (killed?); it starts again" $HB/sin.out
'

# M5: write caches (stage-out outputs on the node's fast tier) hold
# what a user's jobs wrote until it is on the GFS -- for ever, if its
# migration keeps failing.  Each job's write cache on a node is a
# reservation, mounted with its size (a tmpfs of its own on this
# DRAM-emulated tier).  With WriteCacheUserMax 32 MiB, bob's running
# job's cache is 32 MiB: his 40 MiB output stops there (ENOSPC), and his
# next job on the node gets none -- its output directory is the plain
# GFS, and its stderr says why; alice's job still gets one.
as_user bob mkdir -p $HB/wc1 $HB/wc2 && as_user alice mkdir -p $H/wc3
NV=$(cat $CLUSTER/run/nvdimm.path)
test_expect_success 'WriteCacheUserMax: bob'"'"'s write cache stops at it, his next job gets none; alice'"'"'s does' '
    n0=$(reloads) && echo "WriteCacheUserMax = 32M" >>$CONF &&
    kill -HUP $(agent_pid n2) && wait_for 10 reloaded_since $n0 &&
    b1=$(cd $HB && as_user bob sbatch --parsable -w n2 --tier-stage-out=$HB/wc1 -o /dev/null \
        --wrap "head -c 40M /dev/urandom > $HB/wc1/x 2> $HB/wc1.head; echo \$? > $HB/wc1.rc; sleep 300") &&
    wait_for 60 test -s $HB/wc1.rc && cat $HB/wc1.head && test "$(cat $HB/wc1.rc)" != 0 &&
    grep -q "No space left on device" $HB/wc1.head &&
    $TIERCTL -N n2 flush --job $b1 && test "$(stat -c %s $HB/wc1/x)" -le 33554432 &&
    findmnt -n -o SOURCE,FSTYPE,SIZE $NV/n2/.outbox/$b1.0 &&
    b2=$(cd $HB && as_user bob sbatch --parsable -w n2 --tier-stage-out=$HB/wc2 -o /dev/null -e $HB/wc2.err \
        --wrap "echo direct > $HB/wc2/y; findmnt -n -o FSTYPE --target $HB/wc2 > $HB/wc2.fs") &&
    wait_for 60 job_done $b2 && test "$(job_state $b2)" = COMPLETED && cat $HB/wc2.err &&
    grep -q "tier: warning: --tier-stage-out: $HB/wc2: uid $(id -u bob)'"'"'s write caches on node n2 take 32.0 MiB already (WriteCacheUserMax 32.0 MiB): the job writes to the GFS directly" $HB/wc2.err &&
    test "$(cat $HB/wc2/y)" = direct && cat $HB/wc2.fs && test "$(cat $HB/wc2.fs)" != overlay &&
    a3=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-stage-out=$H/wc3 -o /dev/null -e $H/wc3.err \
        --wrap "echo cached > $H/wc3/z; findmnt -n -o FSTYPE --target $H/wc3 > $H/wc3.fs") &&
    wait_for 60 job_done $a3 && test "$(job_state $a3)" = COMPLETED &&
    ! grep -q WriteCacheUserMax $H/wc3.err && test "$(cat $H/wc3.fs)" = overlay && test "$(cat $H/wc3/z)" = cached &&
    scancel $b1 && wait_for 60 job_done $b1 &&
    n0=$(reloads) && sed -i "/^WriteCacheUserMax/d" $CONF &&
    kill -HUP $(agent_pid n2) && wait_for 10 reloaded_since $n0
'

# The write cache's size is reserved on the tier with the jobs' scratch:
# on a 64 MiB tier with WriteCacheSize 16 MiB, bob's running job that
# writes 40 MiB of outputs gets ENOSPC past 16 MiB (and its stderr says
# the cache is full), alice's 48 MiB scratch reservation is granted and
# filled, and one more MiB of scratch is refused.  When bob's outputs
# are on the GFS, his write cache is unmounted and gone.
as_user bob mkdir -p $HB/wc4 && as_user alice mkdir -p $H/sc5 $H/sc6
wc_gone () { test ! -e $NV/n2/.outbox/$1.0 && ! grep -q " $NV/n2/.outbox/$1.0 " /proc/self/mountinfo; }
test_expect_success 'WriteCacheSize: a running job'"'"'s outputs stop at its write cache, which the reservations count' '
    n0=$(reloads) &&
    sed -i "s/^NvdimmCapacity.*/NvdimmCapacity = 64M/" $CONF && echo "WriteCacheSize = 16M" >>$CONF &&
    kill -HUP $(agent_pid n2) && wait_for 10 reloaded_since $n0 &&
    b4=$(cd $HB && as_user bob sbatch --parsable -w n2 --tier-stage-out=$HB/wc4 -o /dev/null -e $HB/wc4.err \
        --wrap "head -c 40M /dev/urandom > $HB/wc4/x 2> $HB/wc4.head; echo \$? > $HB/wc4.rc; while [ ! -e $HB/wc4.go ]; do sleep 0.2; done") &&
    wait_for 60 test -s $HB/wc4.rc && cat $HB/wc4.head && grep -q "No space left on device" $HB/wc4.head &&
    $TIERCTL -N n2 flush --job $b4 && test "$(stat -c %s $HB/wc4/x)" -le 16777216 &&
    a5=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-scratch=$H/sc5:48M -o $H/sc5.out -e $H/sc5.err \
        --wrap "head -c 47M /dev/urandom > $H/sc5/y && echo filled") &&
    wait_for 60 job_done $a5 && cat $H/sc5.err && test "$(job_state $a5)" = COMPLETED &&
    grep -q "^filled$" $H/sc5.out && ! grep -q "tier: warning" $H/sc5.err &&
    a6=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-scratch=$H/sc6:49M -o /dev/null -e $H/sc6.err \
        --wrap true) &&
    wait_for 60 job_done $a6 && cat $H/sc6.err &&
    grep -q "the NVDIMM tier of node n2 cannot reserve 49 MiB (16 of 64 MiB are reserved)" $H/sc6.err &&
    as_user bob touch $HB/wc4.go && wait_for 60 job_done $b4 && cat $HB/wc4.err &&
    grep -q "tier: warning: the job'"'"'s write cache on node n2 (16.0 MiB: WriteCacheSize, or what the NVDIMM tier or WriteCacheUserMax left) is full" $HB/wc4.err &&
    wait_for 30 wc_gone $b4 &&
    n0=$(reloads) && sed -i -e "/^WriteCacheSize/d" -e "s/^NvdimmCapacity.*/NvdimmCapacity = 1G/" $CONF &&
    kill -HUP $(agent_pid n2) && wait_for 10 reloaded_since $n0
'

# M4: what one connection can make the agent hold.  bob pipelines 40
# syncs of his job's outputs (tierctl wait's request) on one connection
# while its 200 MiB output migrates (the GFS at 20 MiB/s): the agent
# holds 16 at a time and reads the rest as those are answered; all 40
# are answered once the output is on the GFS.
RAW="python3 $TIER_SRCDIR/tests/lib/rawclient.py"
as_user bob mkdir -p $HB/pout
bob_waiting () {
    (cd $HB && as_user bob $TIERCTL -N n2 --json status) |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["clients"]["yours_waiting"])'
}
held_16 () { test "$(bob_waiting | tee -a $TRASH/held)" = 16; }
test_expect_success 'bob pipelines 40 syncs on one connection: the agent holds 16 at a time, answers all 40' '
    bid=$(cd $HB && as_user bob sbatch --parsable -w n2 --tier-stage-out=$HB/pout -o /dev/null \
        --wrap "head -c 200M /dev/urandom > $HB/pout/p.bin; sleep 300") &&
    wait_for 60 stream_held &&
    { (cd $HB && as_user bob $RAW $CLUSTER/run/tier/n2/tierd.sock pipeline 40 \
        "{\"op\":\"job.stageout_sync\",\"job_id\":$bid}" >$TRASH/pipe 2>&1) & } && pp=$! &&
    : >$TRASH/held && wait_for 30 held_16 &&
    for i in 1 2 3 4 5; do bob_waiting >>$TRASH/held; done &&
    echo "bob'"'"'s held requests: $(sort -u $TRASH/held | tr "\n" " ")" &&
    test "$(sort -n $TRASH/held | tail -1)" -le 16 &&
    (cd $HB && as_user bob $TIERCTL -N n2 status) | grep "^clients: " &&
    { wait $pp; cat $TRASH/pipe; } && grep -q "^40 replies, 0 errors, 40 ids" $TRASH/pipe &&
    scancel $bid && wait_for 60 job_done $bid
'

# --tier-keep given to an srun step only (the batch script has none):
# the epilog sees only the batch script's options; the step notes its
# own, and the pipeline data is kept.
as_user alice mkdir -p $H/kk
cat >$H/kk.sh <<EOF2
#!/bin/bash
srun --tier-scratch=$H/kk --tier-keep=always sh -c 'echo kept > $H/kk/x'
EOF2
chmod 755 $H/kk.sh && chown alice $H/kk.sh
test_expect_success 'srun --tier-keep=always in a batch script without it: the data is kept' '
    id=$(sbatch_wait alice -w n1 -o /dev/null $H/kk.sh) && test "$(job_state $id)" = COMPLETED &&
    find $H/kk -print && test "$(cat $H/kk/.tier-kept/$id/n1/x)" = kept && test ! -e $H/kk/x
'

# M1: with the plugstack default off, a job whose batch script has no
# --tier option but whose srun steps do: the epilog (which sees only the
# batch script's options) did nothing -- namespace, scratch, reservation
# and record stayed.  It now goes by what the steps left on the node.
PLUG=$CLUSTER/etc/plugstack.conf
as_user alice mkdir -p $H/m1scr
cat >$H/m1.sh <<EOF2
#!/bin/bash
srun --tier-scratch=$H/m1scr:32M sh -c 'echo x > $H/m1scr/f; grep -c " - overlay " /proc/self/mountinfo'
EOF2
chmod 755 $H/m1.sh && chown alice $H/m1.sh
test_at_exit "cp $TRASH/plugstack.saved $PLUG && $TIER_CLUSTER_CMD restart-slurmd $CLUSTER n3"
test_expect_success 'default off, tier only in srun steps: the job end cleans up its namespace and record' '
    cp $PLUG $TRASH/plugstack.saved && sed -i "s/\$/ default=off/" $PLUG &&
    $TIER_CLUSTER_CMD restart-slurmd $CLUSTER n3 >/dev/null &&
    id=$(cd $H && as_user alice sbatch --parsable -w n3 -o $H/kout/m1.out $H/m1.sh) &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    cat $H/kout/m1.out && test "$(cat $H/kout/m1.out)" -ge 1 &&
    { wait_for 20 test ! -e $CLUSTER/run/ns/n3/$id || { ls -la $CLUSTER/run/ns/n3/$id; false; }; } &&
    records_of n3 $id && grep -q " ended " $TRASH/rec.$id &&
    ! grep -q " running " $TRASH/rec.$id &&
    cp $TRASH/plugstack.saved $PLUG && $TIER_CLUSTER_CMD restart-slurmd $CLUSTER n3 >/dev/null
'
test_expect_success 'no node was drained' 'no_drain'
test_done
