#!/bin/bash
# 0087-fairness.t - the node's GFS streams: at most GfsStreams at once,
# fair between users, and a bandwidth share per user (UserBandwidth), for
# stage-in copies, stage-out migrations and replica fetches alike.
#
# Judged by what does not depend on the test's clock: a second GFS
# emulator that only stage-in reads (its gauge of open read handles and
# the peak), the order of the agent's grants in its log, and the copy
# engine's own accounting of each user's bucket (tierctl status).
test_description='fairness: GFS streams per node, a bandwidth share per user'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE || skip_all "needs root, Slurm and FUSE"
# six one-CPU jobs at once on one node
test_expect_success 'start a cluster with 8 CPUs a node' '
    cluster_start --cpus 8
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
MIB=1048576
H=$GFS/home/alice
HB=$GFS/home/bob
OUT=$H/out
G2=$CLUSTER/gfs2                # a second GFS: only the copiers read it
G2B=$CLUSTER/gfs2-backing
CONF=$CLUSTER/etc/tier.conf
TIERCTL="$CLUSTER/lib/tierctl -c $CONF"
LOG=$CLUSTER/log/tierd-n1.log
agent_pid () { cat "$CLUSTER/state/n1/tierd.pid" 2>/dev/null; }

# KEY = VALUE in tier.conf; a running agent on n1 rereads it (SIGHUP)
conf_set () {
    sed -i "/^$1 *=/d" "$CONF" && echo "$1 = $2" >>"$CONF" || return 1
    _p=$(agent_pid)
    if [ -n "$_p" ] && kill -0 "$_p" 2>/dev/null; then
        _n=$(grep -c "reloaded $CONF" "$LOG")
        kill -HUP "$_p" && wait_for 10 reloaded_since "$_n"
    fi
}
reloaded_since () {
    test "$(grep -c "reloaded $CONF" "$LOG")" -gt "$1"
}
# lines of the agent's log after line $1 that match $2
log_count () {
    tail -n +$(($1 + 1)) "$LOG" | grep -c "$2"
}
log_at_least () {
    test "$(log_count "$1" "$2")" -ge "$3"
}

# submit as USER on n1 a job staging in FILE, writing its checksum
stage_job () {
    (cd "$GFS/home/$1" && as_user "$1" sbatch --parsable -w n1 \
        --tier-stage-in="$2" -o "$GFS/home/$1/out/$3.out" \
        -e "$GFS/home/$1/out/$3.err" \
        --wrap "sha256sum $2 | cut -d\" \" -f1 > $GFS/home/$1/out/$3.sum")
}
# every job of the list done and COMPLETED
all_completed () {
    for _j in "$@"; do
        wait_for 180 job_done "$_j" || return 1
        test "$(job_state "$_j")" = COMPLETED || {
            echo "job $_j: $(job_state "$_j")"; return 1; }
    done
}
# the checksum the job of NAME recorded is that of FILE (in the backing)
sum_ok () {
    test "$(cat "$GFS/home/$1/out/$2.sum")" = \
        "$(sha256sum <"$3" | cut -d" " -f1)"
}
# a user's bucket on n1 from tierctl status: KEY of "bandwidth"
bucket () {
    $TIERCTL -N n1 status --json | python3 -c '
import json, sys
s = json.load(sys.stdin)["streams"]
u = [x for x in s["users"] if x["user"] == sys.argv[1]]
print(u[0]["bandwidth"][sys.argv[2]] if u else 0)' "$1" "$2"
}

test_expect_success 'a second GFS (an emulator) for the inputs, in AllowedRoots' '
    mkdir -p "$G2B/alice" "$G2B/bob" "$G2" &&
    chmod 755 "$G2B" "$G2" &&
    chown alice:alice "$G2B/alice" && chown bob:bob "$G2B/bob" &&
    chmod 700 "$G2B/alice" "$G2B/bob" &&
    gfsemu_start "$G2B" "$G2" &&
    sed -i "s|^AllowedRoots = .*|AllowedRoots = $GFS,$G2|" "$CONF" &&
    conf_set GfsStreams 2 && conf_set UserBandwidth 4M &&
    as_user alice mkdir -p "$OUT" && as_user bob mkdir -p "$HB/out"
'
test_at_exit "gfsemu_stop '$G2'"
# inputs: written to the backing directly (no emulator traffic)
mk () {
    head -c "$3" /dev/urandom >"$G2B/$1/$2" && chown "$1:$1" "$G2B/$1/$2"
}

test_expect_success 'GfsStreams = 2: six jobs staging at once never read more than two GFS files at once' '
    for i in 1 2 3 4 5 6; do mk alice a$i $((8 * MIB)) || exit 1; done &&
    gfsemu_reset "$G2" &&
    ids="" &&
    for i in 1 2 3 4 5 6; do
        id=$(stage_job alice "$G2/alice/a$i" a$i) || exit 1
        ids="$ids $id"
    done &&
    all_completed $ids &&
    for i in 1 2 3 4 5 6; do sum_ok alice a$i "$G2B/alice/a$i" || exit 1; done &&
    peak=$(gfsemu_value "$G2" open.readers_peak) &&
    read=$(gfsemu_value "$G2" total.read_bytes) &&
    echo "peak $peak, read $read" &&
    test "$peak" -ge 1 && test "$peak" -le 2 &&
    test "$read" = $((6 * 8 * MIB)) &&
    for id in $ids; do
        grep -q "GFS stream granted: stage-in of job $id " "$LOG" || exit 1
    done &&
    grep -q "GFS stream queued: stage-in of job" "$LOG"
'

test_expect_success 'control: with GfsStreams = 8 the same six jobs read more than two at once' '
    conf_set GfsStreams 8 &&
    for i in 1 2 3 4 5 6; do mk alice c$i $((8 * MIB)) || exit 1; done &&
    gfsemu_reset "$G2" &&
    ids="" &&
    for i in 1 2 3 4 5 6; do
        id=$(stage_job alice "$G2/alice/c$i" c$i) || exit 1
        ids="$ids $id"
    done &&
    all_completed $ids &&
    peak=$(gfsemu_value "$G2" open.readers_peak) && echo "peak $peak" &&
    test "$peak" -gt 2 &&
    conf_set GfsStreams 2
'

# alice queues five, then bob one.  When a stream ends it goes to the
# waiting user who holds the fewest: bob (none) before alice (one).  So
# the first grant after bob was queued is bob's, however many of alice's
# wait; first come, first served would give all of hers first.
test_expect_success 'fair between users: bob, queued behind alice'"'"'s five, gets the next stream' '
    for i in 1 2 3 4 5; do mk alice f$i $((24 * MIB)) || exit 1; done &&
    mk bob b1 $((24 * MIB)) &&
    start=$(wc -l <"$LOG") &&
    aids="" &&
    for i in 1 2 3 4 5; do
        id=$(stage_job alice "$G2/alice/f$i" f$i) || exit 1
        aids="$aids $id"
    done &&
    wait_for 60 log_at_least $start "GFS stream queued: stage-in of job .* (user alice)" 3 &&
    bid=$(stage_job bob "$G2/bob/b1" b1) &&
    all_completed $aids $bid &&
    sum_ok bob b1 "$G2B/bob/b1" &&
    tail -n +$((start + 1)) "$LOG" | grep -E "GFS stream (queued|granted): stage-in of job" >$TRASH/events &&
    cat $TRASH/events | sed "s/^/# /" &&
    python3 - "$TRASH/events" "$bid" $aids <<-\EOF
	import re, sys
	ev = []
	for line in open(sys.argv[1]):
	    m = re.search(r"GFS stream (queued|granted): stage-in of job (\d+) ", line)
	    if m:
	        ev.append((m.group(1), m.group(2)))
	bob, alice = sys.argv[2], set(sys.argv[3:])
	q = [i for i, e in enumerate(ev) if e == ("queued", bob)]
	assert q, "bob was not queued: alice held every stream, so he must be"
	at = q[0]
	waiting = {j for k, j in ev[:at] if k == "queued" and j in alice} \
	    - {j for k, j in ev[:at] if k == "granted" and j in alice}
	print("alice waiting when bob queued:", sorted(waiting))
	assert waiting, "no job of alice was waiting: nothing to overtake"
	nxt = [j for k, j in ev[at + 1:] if k == "granted"]
	assert nxt and nxt[0] == bob, "the next grant went to %s" % nxt[:1]
	EOF
'

test_expect_success 'a job that waits for a stream says so on its stderr' '
    cat $OUT/f*.err &&
    grep -q "tier: staging in: queued for a GFS stream" $OUT/f*.err
'

# bob's one job moved 24 MiB through his bucket at 4 MiB/s (burst 0.4
# MiB): at least (24 - 0.4) / 4 s of stall by the bucket's own account
# (less only by the time spent moving data when no one waited), at most
# what the delayed bytes allow.
test_expect_success 'UserBandwidth: bob'"'"'s copy was held back to 4 MiB/s (the copy engine'"'"'s accounting)' '
    r=$(bucket bob rate) && c=$(bucket bob burst) && x=$(bucket bob bytes) &&
    db=$(bucket bob delayed_bytes) && do=$(bucket bob delayed_ops) &&
    w=$(bucket bob wait_ns) && s=$(bucket bob stall_ns) &&
    lo=$(( (x - c) * 1000000000 / r * 75 / 100 )) &&
    hi=$(( db * 1000000000 / r + do + 1 )) &&
    echo "rate $r burst $c bytes $x delayed $db/$do wait $w stall $s [$lo, $hi]" &&
    test "$r" = $((4 * MIB)) && test "$x" = $((24 * MIB)) &&
    test "$db" -gt 0 && test "$s" -ge "$lo" && test "$s" -le "$hi" &&
    test "$w" -ge "$s"
'

# alice ran up to six streams at once, in three rounds (a refilled burst
# each): together they stalled as one stream of all her bytes would.
test_expect_success 'alice'"'"'s streams share one bucket: all of them together at 4 MiB/s' '
    r=$(bucket alice rate) && c=$(bucket alice burst) &&
    x=$(bucket alice bytes) && s=$(bucket alice stall_ns) &&
    db=$(bucket alice delayed_bytes) && do=$(bucket alice delayed_ops) &&
    lo=$(( (x - 3 * c) * 1000000000 / r * 75 / 100 )) &&
    hi=$(( db * 1000000000 / r + do + 1 )) &&
    echo "bytes $x stall $s [$lo, $hi]" &&
    test "$x" = $(( (6 * 8 + 6 * 8 + 5 * 24) * MIB )) &&
    test "$s" -ge "$lo" && test "$s" -le "$hi"
'

test_expect_success 'stage-out migrations take a stream and the user'"'"'s bandwidth' '
    x0=$(bucket bob bytes) &&
    as_user bob mkdir -p "$HB/results" &&
    id=$(sbatch_wait bob -w n1 --tier-stage-out=$HB/results -o /dev/null \
        --wrap "head -c 3000000 /dev/zero > $HB/results/r.bin") &&
    test "$(job_state $id)" = COMPLETED &&
    test "$(stat -c %s $HB/results/r.bin)" = 3000000 &&
    grep -q "GFS stream granted: stage-out of job $id " "$LOG" &&
    x1=$(bucket bob bytes) && echo "bytes $x0 -> $x1" &&
    test "$x1" = $((x0 + 3000000))
'

test_expect_success 'replica fetches (tierctl prefetch) take a stream and the user'"'"'s bandwidth' '
    x0=$(bucket bob bytes) &&
    as_user bob mkdir -p "$HB/db" &&
    as_user bob sh -c "head -c 2000000 /dev/urandom > $HB/db/ref" &&
    (cd $HB && as_user bob $TIERCTL -N n1 set policy $HB/db batch) &&
    (cd $HB && as_user bob $TIERCTL -N n1 prefetch $HB/db/ref) &&
    grep -q "GFS stream granted: replica of $HB/db/ref " "$LOG" &&
    test "$(bucket bob bytes)" = $((x0 + 2000000))
'

test_expect_success 'tierctl status shows the streams and a user only her own' '
    $TIERCTL -N n1 status >$TRASH/st && cat $TRASH/st &&
    grep -q "^GFS streams: 0 of 2 in use, 0 waiting; UserBandwidth 4.0 MiB/s" $TRASH/st &&
    (cd $H && as_user alice $TIERCTL -N n1 status --json) >$TRASH/st.json &&
    python3 -c "
import json, sys
u = json.load(open(sys.argv[1]))[\"streams\"][\"users\"]
assert [x[\"user\"] for x in u] == [\"alice\"], u" $TRASH/st.json
'

test_expect_success 'no node was drained' 'no_drain'
test_done
