#!/bin/bash
test_description='the node agent: lifecycle, registry, task environment, hostile clients'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM || skip_all "needs root and Slurm"
RAW="python3 $TIER_SRCDIR/tests/lib/rawclient.py"

test_expect_success 'start the cluster' 'cluster_start'
[ -n "${CLUSTER:-}" ] && [ -f "$SLURM_CONF" ] || bail_out "no cluster"
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
sock () { echo "$CLUSTER/run/tier/$1/tierd.sock"; }
agent_pid () { cat "$CLUSTER/state/$1/tierd.pid" 2>/dev/null; }
agent_alive () { p=$(agent_pid "$1") && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
# jobs_has USER NODE JOBID STATE: the node's agent lists the job so
jobs_has () {
    as_user "$1" $TIERCTL -N "$2" jobs | grep -q "^$3 .* $4 "
}

# tasks print their view: rank node job batch socket
view='echo "V ${SLURM_PROCID:-0} $SLURMD_NODENAME $SLURM_JOB_ID ${SLURM_ARRAY_JOB_ID:-none} ${SLURM_ARRAY_TASK_ID:-none} TIER ${TIER_JOB_ID:-unset} ${TIER_BATCH_ID:-unset} ${TIER_SOCKET:-unset}"'

test_expect_success 'no agent runs before a tier job' '
    ! agent_alive n1 && ! agent_alive n2 && ! agent_alive n3
'
# tasks that print their view, then wait until the test creates a file
hold_view () { echo "$view; while ! test -e $1; do sleep 0.2; done"; }
# views FILE N: FILE holds N task views
views () { test "$(grep -c "^V " "$1" 2>/dev/null)" = "$2"; }
test_expect_success 'a 4-task array as alice: every task sees its tier environment' '
    cd "$GFS/home/alice" &&
    id=$(as_user alice sbatch --parsable --array=1-4 --tier-cache=auto \
         -o "env-%a.out" --wrap "$(hold_view "$TRASH/go-array")") &&
    (for i in 1 2 3 4; do
        wait_for 120 views "env-$i.out" 1 || exit 1
    done) &&
    (for i in 1 2 3 4; do
        f="$GFS/home/alice/env-$i.out"; cat "$f"
        read -r _ _ node jid ajid atid _ tjob tbatch tsock <"$f" &&
        test "$ajid" = "$id" && test "$atid" = "$i" &&
        test "$tjob" = "$jid" && test "$tbatch" = "$id" &&
        test "$tsock" = "$(sock $node)" &&
        echo "$node $jid" >>"$TRASH/array-tasks" || exit 1
    done)
'
ARRAY=$id
test_expect_success 'while they run, each node'"'"'s agent lists its array tasks as running' '
    cat "$TRASH/array-tasks" &&
    (while read -r node jid; do
        wait_for 20 jobs_has alice $node $jid running || exit 1
    done <"$TRASH/array-tasks")
'
test_expect_success 'the array completes; its tasks are listed as ended' '
    touch "$TRASH/go-array" &&
    wait_for 120 job_done $ARRAY &&
    test "$(job_state $ARRAY)" = COMPLETED &&
    (while read -r node jid; do
        wait_for 20 jobs_has alice $node $jid ended || exit 1
    done <"$TRASH/array-tasks")
'
touch "$TRASH/go-array"
test_expect_success 'the agents that jobs started are still running (linuxproc)' '
    agent_alive n1 && ps -o pid,ppid,sid,cmd -p $(agent_pid n1) &&
    test "$(ps -o ppid= -p $(agent_pid n1) | tr -d " ")" = 1
'
test_expect_success 'the socket is 0666 in a root-owned 0755 directory' '
    stat -c "%F %a %U" "$(sock n1)" "$CLUSTER/run/tier/n1" | tee "$TRASH/modes" &&
    test "$(sed -n 1p "$TRASH/modes")" = "socket 666 root" &&
    test "$(sed -n 2p "$TRASH/modes")" = "directory 755 root"
'
test_expect_success 'the agent runs in the host mount namespace, with a clean environment' '
    p=$(agent_pid n1) &&
    test "$(readlink /proc/$p/ns/mnt)" = "$(readlink /proc/$$/ns/mnt)" &&
    tr "\0" "\n" </proc/$p/environ >"$TRASH/env" && cat "$TRASH/env" &&
    ! grep -q "^SLURM" "$TRASH/env" && ! grep -q "^TIER" "$TRASH/env" &&
    ls -l /proc/$p/fd | sed 1d >"$TRASH/fds" && cat "$TRASH/fds" &&
    test "$(wc -l <"$TRASH/fds")" -lt 32 &&
    ! grep -q "slurm\|spool\|/gfs/home" "$TRASH/fds"
'
test_expect_success 'an srun -N3 -n6 step: each task has its own node socket' '
    (cd "$GFS/home/alice" && run_timeout 120 runuser -u alice -- \
        env SLURM_CONF="$SLURM_CONF" srun -N3 -n6 --tier-cache=auto \
        sh -c "$(hold_view "$TRASH/go-srun")" >"$TRASH/srun.out" \
        2>"$TRASH/srun.err"; echo $? >"$TRASH/srun.rc") &
    wait_for 120 views "$TRASH/srun.out" 6 && cat "$TRASH/srun.out" &&
    while read -r _ rank node jid _ _ _ tjob tbatch tsock; do
        test "$tjob" = "$jid" && test "$tbatch" = "$jid" &&
        test "$tsock" = "$(sock $node)" || exit 1
    done <"$TRASH/srun.out" &&
    test "$(awk "{print \$3}" "$TRASH/srun.out" | sort -u | wc -l)" = 3
'
SRUNJOB=$(awk '/^V /{print $4; exit}' "$TRASH/srun.out" 2>/dev/null)
test_expect_success 'while the step runs, it is listed as running on its three nodes' '
    test -n "$SRUNJOB" &&
    (for node in n1 n2 n3; do
        wait_for 20 jobs_has alice $node $SRUNJOB running || exit 1
    done)
'
test_expect_success 'the step ends; its job is listed as ended on its three nodes' '
    touch "$TRASH/go-srun" &&
    wait_for 120 test -s "$TRASH/srun.rc" && cat "$TRASH/srun.err" &&
    test "$(cat "$TRASH/srun.rc")" = 0 &&
    wait_for 60 job_done $SRUNJOB &&
    (for node in n1 n2 n3; do
        wait_for 20 jobs_has alice $node $SRUNJOB ended || exit 1
    done)
'
touch "$TRASH/go-srun"
test_expect_success 'with --tier-batch the interposer is preloaded into the tasks, else not' '
    (cd "$GFS/home/alice" && as_user alice srun -w n1 --tier-batch=$GFS/home/alice sh -c "echo \$LD_PRELOAD") >"$TRASH/pre1" &&
    (cd "$GFS/home/alice" && as_user alice srun -w n1 --tier-cache=auto sh -c "echo P\$LD_PRELOAD") >"$TRASH/pre2" &&
    cat "$TRASH/pre1" "$TRASH/pre2" &&
    grep -qx "$CLUSTER/lib/libtier_preload.so" "$TRASH/pre1" && grep -qx P "$TRASH/pre2"
'
test_expect_success 'an inner srun gets its own node values, not the batch host''s' '
    id=$(sbatch_wait alice -N2 --tier-cache=auto -o inner.out \
         --wrap "srun -N2 sh -c '\''$view'\''") &&
    cat "$GFS/home/alice/inner.out" &&
    test "$(grep -c "^V " "$GFS/home/alice/inner.out")" = 2 &&
    test "$(awk "/^V /{print \$3}" "$GFS/home/alice/inner.out" | sort -u | wc -l)" = 2 &&
    awk "/^V / && \$NF !~ (\"/\" \$3 \"/tierd.sock\$\") {bad=1} END {exit bad}" \
        "$GFS/home/alice/inner.out"
'
test_expect_success 'tierctl jobs lists a running job, then completed' '
    cd "$GFS/home/alice" &&
    id=$(as_user alice sbatch --parsable -w n2 --tier-cache=auto \
         -o /dev/null --wrap "sleep 4") &&
    wait_for 20 jobs_has alice n2 $id running &&
    as_user alice $TIERCTL -N n2 jobs &&
    wait_for 30 job_done $id &&
    wait_for 10 jobs_has alice n2 $id ended &&
    as_user alice $TIERCTL -N n2 jobs --json >"$TRASH/jobs.json" &&
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); j=[x for x in d[\"jobs\"] if x[\"job_id\"]==$id][0]; assert j[\"user\"]==\"alice\" and j[\"state\"]==\"ended\" and j[\"options\"][\"cache\"]==\"auto\", j" "$TRASH/jobs.json"
'
# A requeued job may not start again on the node that revoked its
# credential until that expires (120 s): send it to n1 at once instead.
test_expect_success 'a requeued job is registered again, with restart 1' '
    cd "$GFS/home/alice" &&
    id=$(as_user alice sbatch --parsable -w n2 --tier-cache=auto \
         -o requeue.out --open-mode=append \
         --wrap "echo run \${SLURM_RESTART_COUNT:-0}; test -n \"\$SLURM_RESTART_COUNT\" || sleep 120; srun true") &&
    wait_for 20 jobs_has alice n2 $id running &&
    scontrol requeue $id &&
    wait_for 30 sh -c "scontrol show job $id | grep -q JobState=PENDING" &&
    scontrol update jobid=$id nodelist=n1 starttime=now &&
    wait_for 60 grep -q "run 1" requeue.out &&
    wait_for 60 job_done $id && cat requeue.out &&
    wait_for 10 jobs_has alice n1 $id ended &&
    as_user alice $TIERCTL -N n1 jobs --json >"$TRASH/rq1.json" &&
    as_user alice $TIERCTL -N n2 jobs --json >"$TRASH/rq2.json" &&
    python3 - "$TRASH/rq1.json" "$TRASH/rq2.json" $id <<-PYEOF
	import json, sys
	id = int(sys.argv[3])
	r = sorted((d["node"], j["restart"], j["state"], j["steps"])
	           for d in (json.load(open(f)) for f in sys.argv[1:3])
	           for j in d["jobs"] if j["job_id"] == id)
	print(r)
	# the batch step and its srun step share one record per run
	assert r == [("n1", 1, "ended", 2), ("n2", 0, "ended", 1)], r
	PYEOF
'
test_expect_success 'array tasks are registered with the array job id as batch' '
    $TIERCTL -N n1 jobs --json | python3 -c "
import json,sys
d=json.load(sys.stdin)
b=[j for j in d[\"jobs\"] if j[\"batch_id\"]==$ARRAY]
assert b and all(j[\"array_task_id\"] is not None for j in b), d
print(len(b), \"tasks of batch $ARRAY on n1\")"
'
test_expect_success 'bob sees none of alice'"'"'s jobs, and is refused her job and batch' '
    as_user bob $TIERCTL -N n1 jobs --json >"$TRASH/bob.json" &&
    ! grep -q "\"user\": \"alice\"" "$TRASH/bob.json" &&
    aj=$($TIERCTL -N n1 jobs --json | python3 -c "import json,sys; print([j[\"job_id\"] for j in json.load(sys.stdin)[\"jobs\"] if j[\"user\"]==\"alice\"][0])") &&
    ! as_user bob $TIERCTL -N n1 counters --job $aj 2>"$TRASH/err1" &&
    grep "belongs to another user" "$TRASH/err1" &&
    ! as_user bob $TIERCTL -N n1 counters --batch $ARRAY 2>"$TRASH/err2" &&
    grep "belongs to another user" "$TRASH/err2" &&
    as_user alice $TIERCTL -N n1 counters --batch $ARRAY
'
test_expect_success 'bob cannot register, end or claim alice'"'"'s job' '
    s=$(sock n1) &&
    aj=$($TIERCTL -N n1 jobs --json | python3 -c "import json,sys; print([j[\"job_id\"] for j in json.load(sys.stdin)[\"jobs\"] if j[\"user\"]==\"alice\"][0])") &&
    as_user bob $RAW "$s" request "{\"op\":\"job.end\",\"job_id\":$aj}" | tee "$TRASH/r1" &&
    grep -q "root and SlurmUser only" "$TRASH/r1" &&
    as_user bob $RAW "$s" request "{\"op\":\"job.register\",\"job_id\":$aj,\"uid\":0,\"gid\":0,\"user\":\"bob\"}" | tee "$TRASH/r2" &&
    grep -q "root and SlurmUser only" "$TRASH/r2" &&
    as_user bob $RAW "$s" request "{\"op\":\"job.show\",\"job_id\":$aj}" | tee "$TRASH/r3" &&
    grep -q "belongs to another user" "$TRASH/r3"
'
test_expect_success 'a claimed job id is ignored: the agent derives the job from the process' '
    cd "$GFS/home/bob" &&
    as_user bob srun -w n1 --tier-cache=auto python3 $TIER_SRCDIR/tests/lib/rawclient.py \
        "$(sock n1)" request "{\"op\":\"replica.report\",\"job_id\":$ARRAY,\"cached\":5,\"cached_bytes\":5}" \
        >"$TRASH/r4" && cat "$TRASH/r4" &&
    bj=$(sed -n "s/.*\"job_id\":\([0-9]*\).*/\1/p" "$TRASH/r4") &&
    test -n "$bj" && test "$bj" != "$ARRAY" &&
    sleep 3 &&
    as_user bob $TIERCTL -N n1 counters --job $bj --json | grep -A3 "\"batch\"" &&
    $TIERCTL -N n1 counters --batch $ARRAY --json >"$TRASH/c.json" &&
    python3 -c "import json,sys; c=json.load(open(sys.argv[1]))[\"counters\"]; assert c[\"batch\"][\"hits\"]==0, c" "$TRASH/c.json"
'
# report_as_bob JSON OUT: bob's job on n1 sends JSON; its job id is printed
report_as_bob () {
    (cd "$GFS/home/bob" &&
     as_user bob srun -w n1 --tier-cache=auto python3 \
         $TIER_SRCDIR/tests/lib/rawclient.py "$(sock n1)" request "$1" >"$2") &&
    cat "$2" >&2 &&
    sed -n "s/.*\"job_id\":\([0-9]*\).*/\1/p" "$2"
}
# batch_ctr FILE KEY: the batch role's counter KEY in a counters --json
batch_ctr () {
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"counters\"][\"batch\"][sys.argv[2]])" "$1" "$2"
}
test_expect_success 'what a client reports counts for its own job only: the node counters are what the agent saw' '
    $TIERCTL -N n1 counters --json >"$TRASH/n0.json" &&
    bj=$(report_as_bob "{\"op\":\"replica.report\",\"cached\":1099511627776,\"cached_bytes\":1125899906842624}" "$TRASH/r7") &&
    test -n "$bj" &&
    bj2=$(report_as_bob "{\"op\":\"replica.report\",\"cached\":1,\"cached_bytes\":1125899906842624}" "$TRASH/r8") &&
    test -n "$bj2" &&
    sleep 3 &&
    $TIERCTL -N n1 counters --json >"$TRASH/n1.json" &&
    h0=$(batch_ctr "$TRASH/n0.json" hits) && h1=$(batch_ctr "$TRASH/n1.json" hits) &&
    b0=$(batch_ctr "$TRASH/n0.json" bytes_bb) && b1=$(batch_ctr "$TRASH/n1.json" bytes_bb) &&
    echo "node hits $h0 -> $h1, bytes_bb $b0 -> $b1" &&
    test $((h1 - h0)) -lt 1000 && test $((b1 - b0)) -lt 1000000000 &&
    as_user bob $TIERCTL -N n1 counters --job "$bj" --json >"$TRASH/j7.json" &&
    test "$(batch_ctr "$TRASH/j7.json" hits)" = 1099511627776 &&
    as_user bob $TIERCTL -N n1 counters --job "$bj2" --json >"$TRASH/j8.json" &&
    test "$(batch_ctr "$TRASH/j8.json" hits)" = 1 &&
    bb=$(batch_ctr "$TRASH/j8.json" bytes_bb) &&
    echo "one open claimed 1 PiB, counted $bb" &&
    grep -qx "BBCapacity = 2G" "$CLUSTER/etc/tier.conf" &&
    test "$bb" = $((2 << 30))
'
test_expect_success 'a process outside any job is refused replica.report' '
    as_user bob $RAW "$(sock n1)" request "{\"op\":\"replica.report\",\"cached\":1}" | tee "$TRASH/r5" &&
    grep -q "not inside a Slurm job step" "$TRASH/r5"
'
test_expect_success 'a client in a job not registered on this node is refused' '
    cd "$GFS/home/bob" &&
    as_user bob srun -w n1 --tier-cache=off python3 \
        $TIER_SRCDIR/tests/lib/rawclient.py "$(sock n1)" request \
        "{\"op\":\"replica.report\",\"cached\":1}" \
        >"$TRASH/r6" && cat "$TRASH/r6" &&
    grep -q "job [0-9]* is not registered on node n1" "$TRASH/r6"
'
test_expect_success 'counter.add is gone: a client cannot add to a counter by name' '
    bj=$(report_as_bob "{\"op\":\"counter.add\",\"role\":\"batch\",\"counter\":\"hits\",\"value\":5}" "$TRASH/r9") ||
        : &&
    grep -q "unknown request .counter.add." "$TRASH/r9"
'
test_expect_success 'garbage bytes get an error reply or a close' '
    $RAW "$(sock n1)" garbage | tee "$TRASH/g" &&
    grep -E -q "errno|closed" "$TRASH/g" && $TIERCTL -N n1 ping
'
test_expect_success 'a 100 MB message is refused from its header' '
    $RAW "$(sock n1)" oversize 104857600 | tee "$TRASH/o" &&
    grep -q "errno" "$TRASH/o" && $TIERCTL -N n1 ping
'
test_expect_success 'another protocol version gets a clear error' '
    $RAW "$(sock n1)" version 9 "{\"op\":\"ping\"}" | tee "$TRASH/v" &&
    grep -q "protocol version 9 is not supported" "$TRASH/v"
'
test_expect_success 'unknown and malformed requests get errors' '
    $RAW "$(sock n1)" request "{\"op\":\"frobnicate\"}" | grep -q "unknown request" &&
    $RAW "$(sock n1)" request "[1,2]" | grep -q "not a JSON object" &&
    $RAW "$(sock n1)" request "{\"op\":\"job.show\",\"job_id\":\"x\"}" | grep -q "must be an integer"
'
test_expect_success 'half a message then silence times out; others are served meanwhile' '
    ($RAW "$(sock n1)" half >"$TRASH/half" 2>&1 &) &&
    sleep 0.5 &&
    for i in 1 2 3 4 5; do
        run_timeout 2 $TIERCTL -N n1 ping >/dev/null || exit 1
    done &&
    wait_for 15 grep -q . "$TRASH/half" && cat "$TRASH/half" &&
    grep -E -q "did not arrive whole|closed" "$TRASH/half"
'
test_expect_success 'a client that never reads its replies is not read from; others are served' '
    rm -f "$TRASH/go" &&
    ($RAW "$(sock n1)" flood 100000 "$TRASH/go" >"$TRASH/flood" 2>&1 &) &&
    wait_for 60 grep -q . "$TRASH/flood" && cat "$TRASH/flood" &&
    grep -q "^stalled after" "$TRASH/flood" &&
    (for i in 1 2 3 4 5; do
        run_timeout 5 $TIERCTL -N n1 ping >/dev/null || exit 1
    done) &&
    touch "$TRASH/go" &&
    wait_for 120 sh -c "test \$(wc -l <\"$TRASH/flood\") -ge 2" &&
    cat "$TRASH/flood" && grep -q "^100000 replies in order" "$TRASH/flood"
'
# A user holding connections open must not lock others out (n3's agent):
# hold_start USER N keeps N silent connections open, reopening those the
# agent closes; hold_stop stops reopening and waits until the agent has
# closed the rest.
hold_start () {
    rm -f "$TRASH/go" "$TRASH/hold.out"
    (as_user "$1" $RAW "$(sock n3)" hold "$2" "$TRASH/go" \
        >"$TRASH/hold.out" 2>&1 &)
    wait_for 60 grep -q "^holding" "$TRASH/hold.out"
}
hold_stop () {
    touch "$TRASH/go"
    wait_for 60 grep -q "^all closed by the agent" "$TRASH/hold.out"
    _rc=$?
    cat "$TRASH/hold.out"
    return $_rc
}
# refused USER TEXT: a ping of USER to n3's agent is refused with TEXT
refused () {
    ! as_user "$1" $TIERCTL -N n3 ping 2>"$TRASH/refused" &&
    grep -q "$2" "$TRASH/refused"
}
n3_reloads () { grep -c "notice: reloaded" "$CLUSTER/log/tierd-n3.log" || :; }
n3_reloaded_past () { test "$(n3_reloads)" -gt "$1"; }
test_expect_success 'bob holding 600 silent connections: alice'"'"'s job still runs tiered' '
    $TIERCTL -N n3 ping >/dev/null 2>&1 ||
        sbatch_wait alice -w n3 --tier-cache=auto -o /dev/null --wrap true >/dev/null;
    $TIERCTL -N n3 ping &&
    hold_start bob 600 &&
    id=$(sbatch_wait alice -w n3 --tier-cache=auto -o dos.out -e dos.err \
         --wrap "$view") &&
    cat "$GFS/home/alice/dos.out" "$GFS/home/alice/dos.err" &&
    grep -q "TIER $id $id $(sock n3)" "$GFS/home/alice/dos.out" &&
    ! grep -q untiered "$GFS/home/alice/dos.err" &&
    as_user alice $TIERCTL -N n3 ping &&
    wait_for 30 refused bob "uid [0-9]* has 64 connections to tierd on node n3 already (ClientsPerUser)" &&
    cat "$TRASH/refused"
'
test_expect_success 'the agent closes bob'"'"'s silent connections itself' '
    hold_stop &&
    grep -q "^reason per-user-cap: [1-9]" "$TRASH/hold.out" &&
    grep -q "^reason first-request-timeout: [1-9]" "$TRASH/hold.out" &&
    ! grep -q "^reason other" "$TRASH/hold.out" &&
    $TIERCTL -N n3 ping
'
alice_pings () {
    for _i in $(seq $1); do as_user alice $TIERCTL -N n3 ping >/dev/null || return 1; done
}
# With ClientsPerUser above the pool bob can fill every user slot: a
# user who comes then still gets one, from bob's idlest connection (he
# holds the most), and alice's job runs tiered on root's reserved slots.
test_expect_success 'bob fills the whole user pool: alice still connects, one of bob'"'"'s makes room' '
    cp "$CLUSTER/etc/tier.conf" "$TRASH/tier.conf.n3" &&
    echo "ClientsPerUser = 1024" >>"$CLUSTER/etc/tier.conf" &&
    n=$(n3_reloads) && kill -HUP $(agent_pid n3) &&
    wait_for 10 n3_reloaded_past $n &&
    hold_start bob 600 &&
    wait_for 30 grep -q "refused: tierd on node n3 serves 448 user connections already" \
        "$CLUSTER/log/tierd-n3.log" &&
    alice_pings 5 &&
    id=$(sbatch_wait alice -w n3 --tier-cache=auto -o dos2.out -e dos2.err \
         --wrap "$view") &&
    cat "$GFS/home/alice/dos2.out" "$GFS/home/alice/dos2.err" &&
    grep -q "TIER $id $id $(sock n3)" "$GFS/home/alice/dos2.out" &&
    as_user alice $TIERCTL -N n3 ping &&
    grep "to make room for uid $(id -u alice)" "$CLUSTER/log/tierd-n3.log" | tail -1 &&
    hold_stop &&
    grep -q "^reason user-pool: [1-9]" "$TRASH/hold.out" &&
    grep -q "^reason room-for-others: [1-9]" "$TRASH/hold.out" &&
    cp "$TRASH/tier.conf.n3" "$CLUSTER/etc/tier.conf" &&
    n=$(n3_reloads) && kill -HUP $(agent_pid n3) &&
    wait_for 10 n3_reloaded_past $n
'
touch "$TRASH/go"
cp "$TRASH/tier.conf.n3" "$CLUSTER/etc/tier.conf" 2>/dev/null
test_expect_success 'a second tierd on the node refuses to start; the first serves on' '
    p=$(agent_pid n1) && ino=$(stat -c %i "$(sock n1)") &&
    run_timeout 20 "$CLUSTER/lib/tierd" -F -N n1 -c "$CLUSTER/etc/tier.conf" &&
    grep -q "tierd\[[0-9]*\]: info: another tierd already serves node n1" \
        "$CLUSTER/log/tierd-n1.log" &&
    test "$(agent_pid n1)" = "$p" && kill -0 $p &&
    test "$(stat -c %i "$(sock n1)")" = "$ino" &&
    $TIERCTL -N n1 ping | grep "pid $p,"
'
# n1's agent again with tier.conf FILE (the cluster's by default)
agent_restart_with () {
    _p=$(agent_pid n1) && kill $_p && wait_for 20 sh -c "! kill -0 $_p 2>/dev/null" &&
    env -i PMEM_IS_PMEM_FORCE=1 $CLUSTER/lib/tierd -c "${1:-$CLUSTER/etc/tier.conf}" -N n1 &&
    wait_for 20 $TIERCTL -N n1 ping
}
test_expect_success 'a BBDir in a directory bob may change: the replica cache stays off and says why' '
    mkdir -p $TRASH/bobbb && chown bob $TRASH/bobbb && chmod 755 $TRASH/bobbb &&
    sed "s|^BBDir = .*|BBDir = $TRASH/bobbb/bb|" $CLUSTER/etc/tier.conf >$TRASH/bb.conf &&
    grep -q "^BBDir = $TRASH/bobbb/bb\$" $TRASH/bb.conf &&
    agent_restart_with $TRASH/bb.conf &&
    wait_for 20 grep -q "replica cache disabled: $TRASH/bobbb/bb: a directory above it is not root.s" $CLUSTER/log/tierd-n1.log &&
    grep "replica cache disabled" $CLUSTER/log/tierd-n1.log | tail -n 1 &&
    test ! -e $TRASH/bobbb/bb &&
    agent_restart_with &&
    $TIERCTL -N n1 status --json >"$TRASH/st.json" &&
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[\"replicas\"]; assert r[\"enabled\"], r" "$TRASH/st.json"
'
test_expect_success 'kill -9 of the agent: the next job brings it back, the registry survives' '
    before=$($TIERCTL -N n1 jobs --json | python3 -c "import json,sys; print(\" \".join(str(j[\"job_id\"]) for j in json.load(sys.stdin)[\"jobs\"]))") &&
    test -n "$before" &&
    old=$(agent_pid n1) && kill -9 $old &&
    wait_for 10 sh -c "! kill -0 $old 2>/dev/null" &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o after.out --wrap "$view") &&
    cat "$GFS/home/alice/after.out" &&
    grep -q "TIER $id $id " "$GFS/home/alice/after.out" &&
    agent_alive n1 && test "$(agent_pid n1)" != "$old" &&
    for j in $before; do
        $TIERCTL -N n1 jobs | grep -q "^$j " || exit 1
    done
'
test_expect_success 'a job whose epilog ran while the agent was dead is reconciled' '
    cd "$GFS/home/alice" &&
    id=$(as_user alice sbatch --parsable -w n3 --tier-cache=auto -o /dev/null --wrap "sleep 3") &&
    wait_for 20 jobs_has root n3 $id running &&
    mv "$CLUSTER/lib/tierd" "$CLUSTER/lib/tierd.away" &&
    kill -9 $(agent_pid n3) &&
    wait_for 30 job_done $id &&
    mv "$CLUSTER/lib/tierd.away" "$CLUSTER/lib/tierd" &&
    id2=$(sbatch_wait alice -w n3 --tier-cache=auto -o /dev/null --wrap true) &&
    wait_for 20 jobs_has root n3 $id reconciled &&
    $TIERCTL -N n3 jobs
'
test_expect_success 'with the agent binary missing, auto runs untiered with one warning' '
    mv "$CLUSTER/lib/tierd" "$CLUSTER/lib/tierd.away" &&
    kill -9 $(agent_pid n2) 2>/dev/null;
    wait_for 10 sh -c "! kill -0 $(agent_pid n2) 2>/dev/null" &&
    id=$(sbatch_wait alice -w n2 --tier-cache=auto -o untiered.out -e untiered.err \
         --wrap "$view") &&
    test "$(job_state $id)" = COMPLETED &&
    cat "$GFS/home/alice/untiered.out" "$GFS/home/alice/untiered.err" &&
    grep -q "TIER unset unset unset" "$GFS/home/alice/untiered.out" &&
    test "$(grep -c "tier: warning: running untiered on node n2" "$GFS/home/alice/untiered.err")" = 1 &&
    no_drain
'
test_expect_success 'with the agent unavailable, required fails the job cleanly with the reason' '
    id=$(sbatch_wait alice -w n2 --tier-cache=required -o req.out -e req.err \
         --wrap "echo ran") &&
    test "$(job_state $id)" = FAILED &&
    cat "$GFS/home/alice/req.err" &&
    grep -q "tier: --tier-cache=required, but tier is not available on node n2" \
        "$GFS/home/alice/req.err" &&
    ! grep -q ran "$GFS/home/alice/req.out" &&
    no_drain
'
mv "$CLUSTER/lib/tierd.away" "$CLUSTER/lib/tierd" 2>/dev/null
test_expect_success 'tierctl disable: jobs run untiered with a warning, the node stays up' '
    $TIERCTL -N n2 ping >/dev/null 2>&1 || sbatch_wait alice -w n2 --tier-cache=auto -o /dev/null --wrap true >/dev/null;
    $TIERCTL -N n2 disable &&
    ! as_user alice $TIERCTL -N n2 enable 2>"$TRASH/en" && cat "$TRASH/en" &&
    id=$(sbatch_wait alice -w n2 --tier-cache=auto -o dis.out -e dis.err --wrap "$view") &&
    test "$(job_state $id)" = COMPLETED &&
    grep -q "disabled on node n2" "$GFS/home/alice/dis.err" &&
    $TIERCTL -N n2 enable && no_drain
'
test_expect_success 'a bad option injected through the environment fails the job on the node' '
    cd "$GFS/home/alice" &&
    id=$(as_user alice env _SLURM_SPANK_OPTION_tier_tier_scratch=relative \
         sbatch --parsable -w n1 --tier-cache=auto -o inj.out -e inj.err --wrap "echo ran") &&
    wait_for 60 job_done $id && cat inj.err; test "$(job_state $id)" = FAILED &&
    grep -q "tier: --tier-scratch: .relative. is not an absolute path" inj.err &&
    no_drain
'
test_expect_success 'the shared state directory has alice'"'"'s own 0700 directory' '
    stat -c "%U %a" "$GFS/.tier/users/alice" | tee "$TRASH/st" &&
    test "$(cat "$TRASH/st")" = "alice 700" &&
    test "$(stat -c "%U %a" "$GFS/.tier/users")" = "root 755" &&
    ! as_user bob ls "$GFS/.tier/users/alice"
'
test_expect_success 'SIGHUP rereads tier.conf; a bad file is refused and the old kept' '
    p=$(agent_pid n1) &&
    sed -i "s/^LogLevel = debug/LogLevel = info/" "$CLUSTER/etc/tier.conf" &&
    kill -HUP $p && wait_for 10 grep -q "reloaded" "$CLUSTER/log/tierd-n1.log" &&
    echo "Bogus = 1" >>"$CLUSTER/etc/tier.conf" && kill -HUP $p &&
    wait_for 10 grep -q "unknown key .Bogus.; keeping the old configuration" \
        "$CLUSTER/log/tierd-n1.log" &&
    sed -i "/^Bogus/d" "$CLUSTER/etc/tier.conf" && $TIERCTL -N n1 ping &&
    test "$(agent_pid n1)" = "$p"
'
# reloads N: wait until the n1 agent's log has more than N "reloaded" lines
reloaded_past () { test "$(reloads)" -gt "$1"; }
reloads () { grep -c "notice: reloaded" "$CLUSTER/log/tierd-n1.log"; }
test_expect_success 'SIGHUP applies a new SlurmUser: bob may read alice'"'"'s counters' '
    p=$(agent_pid n1) &&
    ! as_user bob $TIERCTL -N n1 counters --batch $ARRAY 2>"$TRASH/su0" &&
    grep "belongs to another user" "$TRASH/su0" &&
    cp "$CLUSTER/etc/tier.conf" "$TRASH/tier.conf.saved" &&
    echo "SlurmUser = bob" >>"$CLUSTER/etc/tier.conf" &&
    n=$(reloads) && kill -HUP $p && wait_for 10 reloaded_past $n &&
    as_user bob $TIERCTL -N n1 counters --batch $ARRAY &&
    as_user bob $TIERCTL -N n1 jobs --json | grep -q "\"user\": \"alice\"" &&
    cp "$TRASH/tier.conf.saved" "$CLUSTER/etc/tier.conf" &&
    n=$(reloads) && kill -HUP $p && wait_for 10 reloaded_past $n &&
    ! as_user bob $TIERCTL -N n1 counters --batch $ARRAY 2>"$TRASH/su1" &&
    grep "belongs to another user" "$TRASH/su1"
'
cp "$TRASH/tier.conf.saved" "$CLUSTER/etc/tier.conf" 2>/dev/null
test_expect_success 'SIGTERM stops the agent cleanly and removes its socket' '
    p=$(agent_pid n1) && kill -TERM $p &&
    wait_for 10 sh -c "! kill -0 $p 2>/dev/null" &&
    ! test -e "$(sock n1)" &&
    grep -q "tierd stopped" "$CLUSTER/log/tierd-n1.log"
'
test_expect_success 'no node was drained by any of this' 'no_drain'
test_expect_success 'tier-cluster stop leaves no process of the cluster' '
    cd "$GFS/home/alice" &&
    id=$(as_user alice sbatch --parsable -w n2 --tier-cache=auto \
         -o /dev/null --wrap "sleep 300") &&
    wait_for 30 jobs_has alice n2 $id running && cd / &&
    cluster_procs >"$TRASH/procs" && cat "$TRASH/procs" &&
    grep -q " slurmstepd" "$TRASH/procs" && grep -q "^[0-9]* tierd -c" "$TRASH/procs" &&
    grep -q "slurmctld " "$TRASH/procs" && grep -q " sleep 300" "$TRASH/procs" &&
    cluster_stop &&
    cluster_procs >"$TRASH/left" && cat "$TRASH/left" && ! test -s "$TRASH/left"
'
test_done
