#!/bin/bash
# 0144-hostile-array.t - alice's array through bob's attacks, one after
# another (issue 17's acceptance run)
#
# alice's 4-task array on n1 uses every role: a batch input (a replica),
# a scratch directory (the NVDIMM tier), a staged input and a stage-out
# directory.  It runs once on a quiet node (the baseline), then once
# during each of bob's attacks on the same node:
#
#   fuse     a descriptor of his FUSE file whose flush never answers,
#            passed to the agent four ways (t/0140 has the details)
#   pool     every user connection of the agent (ClientsPerUser above
#            the pool: one user holds it all, as seven would)
#   stop-mig his migrator stopped (SIGSTOP) while it holds a GFS stream
#   stop-cp  his stage-in copier stopped the same way
#   bb-fill  more batch input than the BB budget, read on the node
#   forged   steps with forged restart counts, and reservations that
#            would wrap
#   opens    10,000 replica.open requests from his job, each with a
#            descriptor, waiting for one slow fetch
#
# Each time: the array completes, every output is right, no step says
# the agent did not answer (no "tier:" line in its logs); a ping once a
# second answers before its own timeout.  The array's time against the
# baseline and the pings' p50/p99 are reported, never asserted.  At the
# end no node is drained or left COMPLETING.  What each attack does to
# the agent is checked in its own test (t/0030, t/0132, t/0140-0142);
# this one checks the victim.
test_description='hostile users: alice'"'"'s array completes through each of bob'"'"'s attacks'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster (BBCapacity 64 MiB)' '
    cluster_start &&
    sed -i "s/^BBCapacity *=.*/BBCapacity = 64M/" $CLUSTER/etc/tier.conf &&
    grep -x "BBCapacity = 64M" $CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
test_at_exit "gfsemu_fault_clear '$GFS' 2>/dev/null"
H=$GFS/home/alice
HB=$GFS-backing/home/alice
BH=$GFS/home/bob
BHB=$GFS-backing/home/bob
CONF=$CLUSTER/etc/tier.conf
LOG=$CLUSTER/log/tierd-n1.log
TIERCTL="$CLUSTER/lib/tierctl -c $CONF"
RAW="python3 $TIER_SRCDIR/tests/lib/rawclient.py"
SOCK=$CLUSTER/run/tier/n1/tierd.sock
HANGFS=$TIER_BUILDDIR/tests/gfsemu/hangfs
mkfile () { head -c $3 /dev/urandom >$2 && chown $1: $2; }
md5 () { md5sum <$1 | cut -c1-32; }

as_user alice mkdir -p $H/vdb $H/vin $H/vlog $H/v $H/vscr
as_user bob mkdir -p $BH/bo $BH/bin $BH/bdb $BH/s $BH/slow
mkfile alice $HB/vdb/in 1048576
mkfile alice $HB/vin/in.bin 2097152
mkfile bob $BHB/bin/b.bin 4194304
for i in 1 2 3 4 5 6; do mkfile bob $BHB/bdb/f$i 16777216; done
mkfile bob $BHB/slow/f 8388608
VSUMS="$(md5 $HB/vdb/in) $(md5 $HB/vin/in.bin)"
cat >$H/victim.sh <<'EOF'
#!/bin/bash
# one task of alice's array: scratch, the batch input, the staged input,
# an output in the stage-out directory $1; 2 s of work besides, so that
# the array's four tasks start and end while the attack runs
set -e
t=$SLURM_ARRAY_TASK_ID
head -c 8M /dev/urandom >"$SCR/s_$t"
sleep 2
cmp "$SCR/s_$t" "$SCR/s_$t"
echo "$(md5sum <"$DB/in" | cut -c1-32) $(md5sum <"$IN/in.bin" | cut -c1-32)" >"$1/o_$t"
EOF
chmod 755 $H/victim.sh && chown alice $H/victim.sh

# victim_start NAME: alice's array on n1, outputs in $H/v/NAME
victim_start () {
    as_user alice mkdir -p $H/v/$1 &&
    date +%s%N >$TRASH/v-$1.t0 &&
    (cd $H && as_user alice env SCR=$H/vscr DB=$H/vdb IN=$H/vin sbatch --parsable \
        --array=1-4 -w n1 --tier-batch=$H/vdb --tier-scratch=$H/vscr:32M \
        --tier-stage-in=$H/vin/in.bin --tier-stage-out=$H/v/$1 \
        -o $H/vlog/$1-%a.log $H/victim.sh $H/v/$1) >$TRASH/v-$1.id
}
# victim_check NAME: it completed with every output, no step said the
# agent did not answer; its time (and against the baseline's) is said
victim_check () {
    _id=$(cat $TRASH/v-$1.id) &&
    wait_for 240 job_done $_id && _t1=$(date +%s%N) &&
    echo "array $_id: $(job_state $_id)" && test "$(job_state $_id)" = COMPLETED &&
    for _t in 1 2 3 4; do
        test "$(cat $H/v/$1/o_$_t)" = "$VSUMS" || { echo "task $_t: $(cat $H/v/$1/o_$_t)"; return 1; }
    done &&
    { ! grep -h "tier:" $H/vlog/$1-*.log || return 1; } &&
    echo $(( (_t1 - $(cat $TRASH/v-$1.t0)) / 1000000 )) >$TRASH/v-$1.ms
}
# pinger_start NAME / pinger_stop NAME: a ping of n1 once a second
# meanwhile; every one answered before its own timeout (AgentTimeout);
# p50 and p99 said (5 pings at least).  The pinger also ends with this script, and after
# 10 minutes.
pinger_start () {
    rm -f $TRASH/stop-$1 && : >$TRASH/ping-$1
    _me=$$
    (_i=0
    while [ ! -e $TRASH/stop-$1 ] && kill -0 $_me 2>/dev/null && [ $_i -lt 600 ]; do
        _i=$((_i + 1))
        _t0=$(date +%s%N)
        if (cd $H && as_user alice $TIERCTL -N n1 ping) >/dev/null 2>&1; then
            echo $(( ($(date +%s%N) - _t0) / 1000 ))
        else
            echo fail
        fi
        sleep 1
    done >>$TRASH/ping-$1 2>/dev/null </dev/null &)
}
pinger_stop () {
    wait_for 30 sh -c "test \$(wc -l <$TRASH/ping-$1) -ge 5" &&
    touch $TRASH/stop-$1 && sleep 2 &&
    { ! grep -q fail $TRASH/ping-$1 || { echo "a ping failed"; return 1; }; } &&
    sort -n $TRASH/ping-$1 | awk '{ v[NR] = $1 } END {
        printf "%d pings, p50 %.1f ms, p99 %.1f ms", NR, v[int((NR + 1) * 0.5)] / 1000,
            v[int(NR * 0.99 + 0.999)] / 1000 }' >$TRASH/ping-$1.sum
}
# report NAME: one line of the summary
report () {
    _ms=$(cat $TRASH/v-$1.ms) _base=$(cat $TRASH/v-base.ms) &&
    awk -v n=$1 -v ms=$_ms -v base=$_base -v p="$(cat $TRASH/ping-$1.sum)" 'BEGIN {
        printf "%-9s array %6.1f s (%.2fx the baseline), ping %s\n", n, ms / 1000, ms / base, p }' |
        tee -a $TRASH/summary
}
# under NAME: alice's array and the pings while an attack runs
under () { pinger_start $1 && victim_start $1 && victim_check $1 && pinger_stop $1 && report $1; }

test_expect_success 'the baseline: alice'"'"'s array on a quiet node' '
    # the agent is up and has alice'"'"'s replica before the clock starts
    sbatch_wait alice -w n1 --tier-batch=$H/vdb -o /dev/null --wrap "cat $H/vdb/in >/dev/null" &&
    under base
'

# ------------------------------------------------------------------ fuse
D=$(mktemp -d /tmp/tier-0144.XXXXXX)
FUSE_MODE=$(stat -c %a /dev/fuse)
chmod 755 $D && chown bob $D
test_at_exit "chmod $FUSE_MODE /dev/fuse; touch $D/go; kill -9 \$(cat $D/pid 2>/dev/null) 2>/dev/null; sleep 1; umount -l $D/mnt 2>/dev/null; rm -rf $D"
mounted () { awk -v m="$D/mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
test_expect_success 'fuse: while a close of bob'"'"'s descriptor hangs in the agent' '
    chmod 0666 /dev/fuse && as_user bob mkdir $D/mnt &&
    { as_user bob sh -c "echo \$\$ > $D/pid; exec $HANGFS $D/mnt" >$D/hangfs.log 2>&1 & } &&
    wait_for 10 mounted && sleep 1 &&
    { as_user bob $RAW $SOCK hostile $D/mnt/f $D/go >$D/attack.out 2>&1 & } &&
    wait_for 30 grep -q "^done" $D/attack.out &&
    $TIERCTL -N n1 status | grep "^closing: [1-9]" &&
    under fuse &&
    $TIERCTL -N n1 status | grep "^closing: [1-9]"
'
test_expect_success 'fuse: bob'"'"'s daemon ends, the close returns' '
    kill -9 $(cat $D/pid) && wait_for 10 sh -c "! $TIERCTL -N n1 status | grep -q ^closing:" &&
    umount -l $D/mnt; touch $D/go; chmod $FUSE_MODE /dev/fuse &&
    test "$(stat -c %a /dev/fuse)" = "$FUSE_MODE"
'

# ------------------------------------------------------------------ pool
reloads () { grep -c "notice: reloaded" $LOG || :; }
reload () { _n=$(reloads) && kill -HUP $(agent_pid n1) && wait_for 10 sh -c "test \$(grep -c \"notice: reloaded\" $LOG) -gt $_n"; }
test_expect_success 'pool: while bob holds every user connection of the agent' '
    cp $CONF $TRASH/tier.conf.orig && echo "ClientsPerUser = 1024" >>$CONF && reload &&
    rm -f $TRASH/go && { as_user bob $RAW $SOCK hold 600 $TRASH/go >$TRASH/hold.out 2>&1 & } &&
    wait_for 60 grep -q "^holding" $TRASH/hold.out &&
    wait_for 30 grep -q "serves 448 user connections already" $LOG &&
    under pool &&
    touch $TRASH/go && wait_for 60 grep -q "^all closed by the agent" $TRASH/hold.out &&
    cp $TRASH/tier.conf.orig $CONF && reload
'

# -------------------------------------------------------------- stop-mig
# bob_mig: bob's migrator under n1's agent; job_copier JOB: the copier
# of JOB's stager there
bob_mig () {
    for _p in $(ps -o pid=,comm= --ppid "$(agent_pid n1)" | awk '$2 == "tierd-mig" { print $1 }'); do
        [ "$(stat -c %u /proc/$_p 2>/dev/null)" = "$(id -u bob)" ] && echo $_p && return 0
    done
    return 1
}
job_copier () {
    _s=$(ps -o pid=,comm=,args= --ppid "$(agent_pid n1)" |
        awk -v j="job $1 " '$2 == "tierd-stage" && index($0, j) { print $1; exit }') &&
    [ -n "$_s" ] && ps -o pid=,comm= --ppid $_s | awk '$2 == "tierd-stagecp" { print $1; exit }' | grep .
}
test_expect_success 'stop-mig: while bob'"'"'s migrator is stopped holding a GFS stream' '
    gfsemu_fault "$GFS" "home/bob/bo/*:create:delay3000" &&
    bid=$(cd $BH && as_user bob sbatch --parsable -w n1 --tier-stage-out=$BH/bo -o /dev/null \
        --wrap "head -c 8M /dev/urandom > $BH/bo/b.bin; sleep 2") &&
    wait_for 30 bob_mig && m=$(bob_mig) && kill -STOP $m && echo "stopped migrator $m" &&
    under stop-mig &&
    grep "tierd-mig $m was stopped (signal 19, from outside); killed" $LOG &&
    gfsemu_fault_clear "$GFS" && wait_for 60 job_done $bid &&
    test "$(job_state $bid)" = COMPLETED && wait_for 30 test -s $BH/bo/b.bin
'

# --------------------------------------------------------------- stop-cp
test_expect_success 'stop-cp: while bob'"'"'s stage-in copier is stopped' '
    gfsemu_fault "$GFS" "home/bob/bin/b.bin:open:delay3000" &&
    bid=$(cd $BH && as_user bob sbatch --parsable -w n1 --tier-stage-in=$BH/bin/b.bin -o /dev/null \
        --wrap "md5sum < $BH/bin/b.bin") &&
    wait_for 30 job_copier $bid && cp=$(job_copier $bid) && kill -STOP $cp &&
    echo "stopped copier $cp" &&
    under stop-cp &&
    grep "job $bid: stage-in: its copier (pid $cp) was stopped" $LOG &&
    gfsemu_fault_clear "$GFS" && wait_for 90 job_done $bid &&
    test "$(job_state $bid)" = COMPLETED
'

# --------------------------------------------------------------- bb-fill
test_expect_success 'bb-fill: while bob reads more batch input than the BB budget' '
    bid=$(cd $BH && as_user bob sbatch --parsable -w n1 --tier-batch=$BH/bdb -o $BH/bdb.out \
        --wrap "for i in 1 2 3 4 5 6; do md5sum < $BH/bdb/f\$i; done") &&
    under bb-fill &&
    wait_for 120 job_done $bid && test "$(job_state $bid)" = COMPLETED &&
    test "$(wc -l <$BH/bdb.out)" = 6 &&
    { ! grep "replica of $H/vdb/in .*evicted" $LOG || exit 1; } &&
    grep -c "replica of $BH/bdb/.* evicted" $LOG
'

# ---------------------------------------------------------------- forged
test_expect_success 'forged: while bob'"'"'s steps forge restart counts and his reservations would wrap' '
    wid=$(cd $BH && as_user bob sbatch --parsable -w n1 --tier-scratch=$BH/s:4096P,$BH/t:4096P \
        -o $BH/wrap.out -e $BH/wrap.err --wrap true) &&
    bid=$(cd $BH && as_user bob sbatch --parsable -w n1 --tier-cache=auto -o $BH/forged.out \
        --wrap "for r in \$(seq 1 12); do SLURM_RESTART_COUNT=\$r srun --tier-cache=auto true; done") &&
    under forged &&
    wait_for 120 job_done $wid && wait_for 120 job_done $bid &&
    cat $BH/wrap.err && grep -q "cannot reserve 8796093022207 MiB" $BH/wrap.err &&
    test "$(job_state $bid)" = COMPLETED
'

# ----------------------------------------------------------------- opens
# The agent holds a waiting open per connection, and bob gets at most
# ClientsPerUser (64) of them: the rest are refused at once.
agent_rss () { awk '/^VmRSS/ { print $2 }' /proc/$(agent_pid n1)/status; }
test_expect_success 'opens: while bob sends 10,000 replica.open requests that wait for one fetch' '
    gfsemu_fault "$GFS" "home/bob/slow/f:read:delay2000" && rss0=$(agent_rss) &&
    rm -f $TRASH/go-opens && chmod 755 $TRASH &&
    bid=$(cd $BH && as_user bob sbatch --parsable -w n1 --tier-batch=$BH/slow -o $BH/opens.out \
        --wrap "env -u LD_PRELOAD $RAW $SOCK opens 10000 $BH/slow/f $TRASH/go-opens") &&
    { wait_for 120 grep -q "^sent" $BH/opens.out || { cat $BH/opens.out; scontrol show job $bid; false; }; } &&
    cat $BH/opens.out &&
    under opens &&
    w=$(sed -n "s/^sent 10000, \([0-9]*\) waiting.*/\1/p" $BH/opens.out) && echo "waiting: $w" &&
    test "$w" -ge 1 && test "$w" -le 64 && grep -q "per-user-cap" $BH/opens.out &&
    rss1=$(agent_rss) && echo "the agent RSS: $rss0 KiB before, $rss1 KiB during" &&
    echo "opens: $(grep "^sent" $BH/opens.out); the agent RSS $rss0 KiB before, $rss1 KiB during" >>$TRASH/summary &&
    test $((rss1 - rss0)) -lt 65536 &&
    touch $TRASH/go-opens && gfsemu_fault_clear "$GFS" && wait_for 60 job_done $bid &&
    cat $BH/opens.out && test "$(job_state $bid)" = COMPLETED
'

test_expect_success 'no node is drained or left COMPLETING' '
    no_drain && test -z "$(squeue -h -t CG -o %i)"
'
test_expect_success 'the summary' 'cat $TRASH/summary'
say "$(cat $TRASH/summary 2>/dev/null | tr "\n" ";")"
test_done
