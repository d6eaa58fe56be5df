#!/bin/bash
test_description='stage-out: outputs through a write cache, on the GFS before the job completes'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
# the GFS is capped so that migrations take seconds
test_expect_success 'start the cluster (GFS capped at 50 MiB/s)' '
    cluster_start --gfs-opts bandwidth=50M &&
    echo "StageOutTimeout = 20s" >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
OUT=$H/results
SUMS=$H/sums
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
NV=$(cat $CLUSTER/run/nvdimm.path)
job_running () { test "$(job_state "$1")" = RUNNING; }
outbox_empty () { test -z "$(ls -A "$NV/$1/.outbox" 2>/dev/null)"; }
as_user alice mkdir -p "$H/in" "$OUT" "$SUMS"
for i in 1 2 3 4 5 6; do as_user alice sh -c "head -c 100000 /dev/urandom > $H/in/q$i.txt"; done

# Each task reads its own input (staged in), writes 16 MiB of results
# (on a second node too, for the last tasks), and records the checksums
# outside tier.
cat >"$H/task.sh" <<EOF2
#!/bin/bash
i=\$SLURM_ARRAY_TASK_ID
sha256sum < $H/in/q\$i.txt | cut -d" " -f1 > $OUT/in-\$i.sum
head -c 16M /dev/urandom > $OUT/big-\$i.bin
mkdir -p $OUT/t\$i && echo "task \$i" > $OUT/t\$i/note.txt
if [ \$SLURM_NNODES -gt 1 ]; then
    srun -N1 -n1 -r1 sh -c "head -c 1M /dev/urandom > $OUT/remote-\$i.bin; echo \\\$SLURMD_NODENAME > $OUT/remote-\$i.node"
fi
(cd $OUT && sha256sum big-\$i.bin t\$i/note.txt in-\$i.sum \$(ls remote-\$i.* 2>/dev/null)) > $SUMS/\$i
EOF2
chmod 755 "$H/task.sh"; chown alice "$H/task.sh"
cat >"$H/verify.sh" <<EOF2
#!/bin/bash
# the dependent job: every output complete, against the producers' sums
# and against the manifests
cd $OUT && cat $SUMS/* | sha256sum -c --quiet && echo SUMS-OK
python3 - "\$1" <<'PY'
import glob, json, os, sys, hashlib
job = sys.argv[1]
seen = {}
for f in glob.glob("$GFS/.tier/users/alice/jobs/*/outputs-*.json"):
    m = json.load(open(f))
    for o in m["outputs"]:
        if o["state"] == "done":
            seen[o["path"]] = o["sha256"]
bad = [p for p, s in seen.items()
       if os.path.exists(p) and hashlib.sha256(open(p, "rb").read()).hexdigest() != s]
print("MANIFEST", len(seen), "entries,", len(bad), "bad")
# one manifest per node of each task, each complete: the epilogs wrote
# them before the job completed
ms = [json.load(open(f)) for f in
      glob.glob("$GFS/.tier/users/alice/jobs/*/outputs-*.json")]
print("MANIFESTS", len(ms), "files,", sum(m["pending"] + m["failed"] for m in ms),
      "left")
PY
EOF2
chmod 755 "$H/verify.sh"; chown alice "$H/verify.sh"

test_expect_success 'a 6-task array (2 nodes each) with per-task inputs and a shared output directory' '
    gfsemu_reset "$GFS" &&
    id=$(cd $H && as_user alice sbatch --parsable --array=1-6 -N2 \
        --tier-stage-in=$H/in/q%a.txt --tier-stage-out=$OUT -o $H/t-%a.out -e $H/t-%a.err \
        "$H/task.sh") &&
    dep=$(cd $H && as_user alice sbatch --parsable --dependency=afterok:$id -o $H/verify.out \
        "$H/verify.sh" "$id") &&
    wait_for 180 job_done $id && test "$(job_state $id)" = COMPLETED &&
    wait_for 60 job_done $dep && echo $id >$TRASH/id &&
    cat $H/verify.out && test "$(job_state $dep)" = COMPLETED
'
test_expect_success 'the dependent job found every output complete, as the producers and the manifests say' '
    grep -qx SUMS-OK $H/verify.out &&
    grep -q "^MANIFEST [1-9][0-9]* entries, 0 bad" $H/verify.out &&
    n=$(grep -o "^MANIFEST [0-9]*" $H/verify.out | cut -d" " -f2) && echo "$n manifest entries" &&
    test "$n" -ge 30 &&
    grep -qx "MANIFESTS 12 files, 0 left" $H/verify.out
'
test_have_prereq ROOT && command -v strace >/dev/null && test_set_prereq STRACE
# Writing the manifest takes as long as the GFS wants: here its rename is
# held for 4 s (strace delay injection on n1'"'"'s agent and its children)
# and a dependent that does not use tier (on another node) must still
# find it.
test_expect_success STRACE 'afterok: a dependent finds the manifest however slow the GFS is to take it' '
    pid=$(cat $CLUSTER/state/n1/tierd.pid) &&
    { strace -f -qq -o /dev/null -p $pid -e trace=rename,renameat,renameat2 \
        -e inject=rename,renameat,renameat2:delay_enter=4000000 \
        -P outputs-n1.json & } && st=$! &&
    wait_for 10 grep -q "^TracerPid:[[:space:]]*$st\$" /proc/$pid/status &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-out=$OUT -o /dev/null \
        --wrap "echo m > $OUT/m.txt") &&
    dep=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-cache=off --dependency=afterok:$id \
        -o $H/m.out --wrap "cat $GFS/.tier/users/alice/jobs/$id.0/outputs-n1.json") &&
    { wait_for 60 job_done $dep; rc=$?; kill $st; wait $st; test $rc = 0; } &&
    cat $H/m.out && test "$(job_state $dep)" = COMPLETED && grep -q "m.txt" $H/m.out
'
test_expect_success 'outputs written on the second node of a task reached the GFS too' '
    for i in 1 2 3 4 5 6; do
        test -s $OUT/remote-$i.bin && test -s $OUT/remote-$i.node || exit 1
    done
'
test_expect_success 'each task read its own input, staged in once per node of the task' '
    for i in 1 2 3 4 5 6; do
        test "$(cat $OUT/in-$i.sum)" = "$(sha256sum <$GFS-backing/home/alice/in/q$i.txt | cut -d" " -f1)" &&
        b=$(gfsemu_stat "$GFS" home/alice/in/q$i.txt read_bytes) && echo "q$i: $b" &&
        { test "$b" = 100000 || test "$b" = 200000; } || exit 1
    done
'
test_expect_success 'the write caches are gone once everything arrived; no temporary is left' '
    for n in n1 n2 n3; do test -z "$(ls -A $NV/$n/.outbox 2>/dev/null)" || exit 1; done &&
    test -z "$(find $OUT -name ".*.part")"
'
test_expect_success 'stage-out counters: files and bytes per batch' '
    sleep 3 && id=$(cat $TRASH/id) &&
    (cd $H && as_user alice $TIERCTL stats --batch $id --json) | python3 -c "
import json,sys
e=json.load(sys.stdin)[\"roles\"][\"endpoint\"]
print(e[\"stage_out_files\"], e[\"stage_out_bytes\"], e[\"stage_out_ms\"])
assert e[\"stage_out_files\"] == 6 * 5 and e[\"stage_out_bytes\"] >= 6 * (16 << 20), e
assert e[\"stage_out_ms\"] > 0, e
assert e[\"gfs_meta_ops\"] >= 2 * e[\"stage_out_files\"], e"
'

test_expect_success 'migration starts at close: a file closed early is on the GFS while the job still runs' '
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-out=$OUT -o /dev/null \
        --wrap "echo early > $OUT/early.txt; while [ ! -e $H/go ]; do sleep 0.2; done") &&
    wait_for 30 test -s $OUT/early.txt && test "$(job_state $id)" = RUNNING &&
    test "$(cat $OUT/early.txt)" = early && touch $H/go && wait_for 60 job_done $id
'
test_expect_success 'tierctl wait --job returns once what the job wrote is on the GFS' '
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-out=$OUT -o /dev/null \
        --wrap "head -c 8M /dev/urandom > $OUT/w.bin; sha256sum < $OUT/w.bin > $H/w.sum; while [ ! -e $H/w.go ]; do sleep 0.2; done") &&
    wait_for 30 test -s $H/w.sum &&
    (cd $H && as_user alice $TIERCTL -N n1 wait --job $id) >$TRASH/w && cat $TRASH/w &&
    grep -q "^job $id on node n1: every output is on the GFS$" $TRASH/w &&
    test "$(sha256sum < $OUT/w.bin)" = "$(cat $H/w.sum)" && test "$(job_state $id)" = RUNNING &&
    touch $H/w.go && wait_for 60 job_done $id
'
test_expect_success 'write then rename: only the final name reaches the GFS' '
    id=$(sbatch_wait alice -w n2 --tier-stage-out=$OUT -o /dev/null \
        --wrap "echo draft > $OUT/r.tmp; sleep 2; mv $OUT/r.tmp $OUT/r.txt; sleep 1") &&
    test "$(cat $OUT/r.txt)" = draft && test ! -e $OUT/r.tmp
'
test_expect_success 'reopened after close: the GFS gets the whole file' '
    id=$(sbatch_wait alice -w n3 --tier-stage-out=$OUT -o /dev/null \
        --wrap "echo one > $OUT/re.txt; sleep 2; echo two >> $OUT/re.txt") &&
    test "$(cat $OUT/re.txt)" = "$(printf "one\ntwo")" && echo $id >$TRASH/re
'
# the job'"'"'s snapshot once its end was published
job_stats_final () {
    (cd $H && as_user alice $TIERCTL stats --job $1 --json) >$TRASH/js.json 2>/dev/null &&
    python3 -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"running\"] != 0)" $TRASH/js.json
}
endpoint_ctr () {
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"roles\"][\"endpoint\"][sys.argv[2]])" $TRASH/js.json $1
}
test_expect_success 'a file migrated again after it was reopened counts as one file' '
    id=$(cat $TRASH/re) && wait_for 30 job_stats_final $id &&
    f=$(endpoint_ctr stage_out_files) && b=$(endpoint_ctr stage_out_bytes) &&
    echo "$f files, $b bytes" && test "$f" = 1 && test "$b" -ge 8
'
test_expect_success 'files on the GFS before the job are never deleted by it' '
    as_user alice sh -c "echo keep > $OUT/old.txt" &&
    id=$(sbatch_wait alice -w n1 --tier-stage-out=$OUT -o /dev/null --wrap "rm $OUT/old.txt; ls $OUT") &&
    test "$(cat $OUT/old.txt)" = keep
'
test_expect_success 'two jobs appending to one file: the second is a conflict, kept beside it, never merged' '
    as_user alice sh -c "echo base > $OUT/shared.log" &&
    a=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-out=$OUT -o /dev/null \
        --wrap "exec 3>>$OUT/shared.log; echo from-a >&3; sleep 6; exec 3>&-") &&
    sleep 2 &&
    b=$(sbatch_wait alice -w n2 --tier-stage-out=$OUT -o /dev/null --wrap "echo from-b >> $OUT/shared.log") &&
    wait_for 60 job_done $a && cat $OUT/shared.log &&
    test "$(cat $OUT/shared.log)" = "$(printf "base\nfrom-b")" &&
    test "$(cat $OUT/.tier-conflicts/$a/n1/shared.log)" = "$(printf "base\nfrom-a")" &&
    (cd $H && as_user alice $TIERCTL -N n1 outputs --job $a) >$TRASH/c && cat $TRASH/c &&
    grep -q "^conflict .*shared.log.*changed during the job" $TRASH/c &&
    sleep 3 && (cd $H && as_user alice $TIERCTL stats --job $a --json) | grep -q "\"conflicts\": 1"
'

test_expect_success 'an unwritable GFS directory: the outputs are kept, not on the GFS' '
    as_user alice mkdir -p $H/ro && 
    id=$(cd $H && as_user alice sbatch --parsable -w n3 --tier-stage-out=$H/ro -o $H/ro.out -e $H/ro.err \
        --wrap "touch $H/ro.started; while [ ! -e $H/ro.go ]; do sleep 0.2; done; head -c 2M /dev/urandom > $H/ro/data.bin; sha256sum $H/ro/data.bin > $H/ro.sum; sleep 1") &&
    wait_for 30 test -e $H/ro.started && chmod 555 $GFS-backing/home/alice/ro && touch $H/ro.go &&
    wait_for 90 job_done $id && test "$(job_state $id)" = COMPLETED && echo $id >$TRASH/ro.id &&
    test ! -e $H/ro/data.bin
'
test_expect_success 'the job'"'"'s stderr and its record name the file and the reason' '
    id=$(cat $TRASH/ro.id) && cat $H/ro.err &&
    grep -q "^tier: warning: 1 output file(s) could not be written to the GFS yet .*: $H/ro/data.bin: .*Permission denied" $H/ro.err &&
    scontrol show job $id | grep AdminComment= &&
    scontrol show job $id | grep -q "AdminComment=tier: on node n3, 1 output file(s) not on the GFS (1 failed, 0 in conflict): $H/ro/data.bin: .*Permission denied.*; kept and retried" &&
    (cd $H && as_user alice $TIERCTL -N n3 outputs --job $id) >$TRASH/ro && cat $TRASH/ro &&
    grep -q "^failed .*data.bin .*Permission denied" $TRASH/ro &&
    grep -q "ro/data.bin did not reach the GFS: .*Permission denied" $CLUSTER/log/tierd-n3.log
'
# the epilog waited StageOutTimeout for it: late, wherever one looks
test_expect_success 'past StageOutTimeout the outputs are late: the log, tierctl outputs and the manifest say so' '
    id=$(cat $TRASH/ro.id) &&
    grep -q "job $id: ended before its outputs were all on the GFS (its epilog.s StageOutTimeout passed)" $CLUSTER/log/tierd-n3.log &&
    grep -q "^late: the job ended before these were all on the GFS" $TRASH/ro &&
    (cd $H && as_user alice $TIERCTL -N n3 outputs --job $id --json) | python3 -c "
import json,sys; o=json.load(sys.stdin); assert o[\"late\"] is True, o"
'
test_expect_success 'tierctl status shows the agent and the failed migration, with file and reason' '
    id=$(cat $TRASH/ro.id) && v=$($CLUSTER/lib/tierd --version | cut -d" " -f2) &&
    (cd $H && as_user alice $TIERCTL -N n3 status) >$TRASH/rost && cat $TRASH/rost &&
    grep -q "^node n3: tierd $v, pid [1-9][0-9]*, up [0-9]*s, tier enabled$" $TRASH/rost &&
    grep -q "^migrations: [0-9]* pending, [1-9][0-9]* failed, [0-9]* in conflict; [0-9]* migrator(s) stalled (StallTimeout)$" $TRASH/rost &&
    grep -q "^  job $id (ended): 0 pending, 1 failed, 0 in conflict$" $TRASH/rost &&
    grep -q "^    failed: $H/ro/data.bin: .*Permission denied" $TRASH/rost &&
    (cd $H && as_user alice $TIERCTL -N n3 status --json) | python3 -c "
import json,sys; m=json.load(sys.stdin)[\"migrations\"]; assert m[\"failed\"] >= 1, m"
'
test_expect_success 'bob sees the node'"'"'s counts of migrations, not alice'"'"'s job or her file names' '
    id=$(cat $TRASH/ro.id) &&
    (cd $GFS/home/bob && as_user bob $TIERCTL -N n3 status) >$TRASH/bst && cat $TRASH/bst &&
    grep -q "^migrations: 0 pending, 1 failed" $TRASH/bst &&
    ! grep -q "job $id" $TRASH/bst && ! grep -q "data.bin" $TRASH/bst
'
test_expect_success 'tierctl wait --timeout gives up on what cannot reach the GFS, and says so' '
    id=$(cat $TRASH/ro.id) &&
    ! (cd $H && as_user alice $TIERCTL -N n3 wait --job $id --timeout 1) >$TRASH/row &&
    cat $TRASH/row && grep -q "^job $id on node n3: 1 output file(s) not on the GFS yet (1 failed" $TRASH/row
'
ro_done () { job_stats_final $1 && test "$(endpoint_ctr stage_out_files)" = 1; }
test_expect_success 'once writable, flush completes them; a failed migration counts once however often retried' '
    id=$(cat $TRASH/ro.id) &&
    chmod 755 $GFS-backing/home/alice/ro &&
    (cd $H && as_user alice $TIERCTL -N n3 flush --job $id) &&
    test "$(sha256sum < $H/ro/data.bin | cut -d" " -f1)" = "$(cut -d" " -f1 $H/ro.sum)" &&
    wait_for 20 outbox_empty n3 && no_drain &&
    python3 -c "
import json,sys; m=json.load(open(sys.argv[1])); assert m[\"late\"] is True and m[\"done\"] == 1, m" \
        $GFS/.tier/users/alice/jobs/$id.0/outputs-n3.json &&
    grep -c "ro/data.bin did not reach the GFS" $CLUSTER/log/tierd-n3.log >$TRASH/nf && cat $TRASH/nf &&
    test "$(cat $TRASH/nf)" -ge 2 &&
    wait_for 30 ro_done $id ||
    { cat $TRASH/js.json; false; } &&
    f=$(endpoint_ctr failures) && echo "failures: $f" && test "$f" = 1
'
# the node of the task whose job id is the array's: it is registered there
test_expect_success 'bob cannot read, flush or wait for alice'"'"'s outputs' '
    id=$(cat $TRASH/id) &&
    nl=$(scontrol -o show job $id | awk -v j="JobId=$id" "\$1 == j" |
         sed -n "s/.* NodeList=\([^ ]*\).*/\1/p") &&
    node=$(scontrol show hostnames "$nl" | head -n 1) && echo "job $id ran on $nl" &&
    ! (cd $GFS/home/bob && as_user bob $TIERCTL -N $node outputs --job $id) 2>$TRASH/b1 &&
    grep -q "belongs to another user" $TRASH/b1
'
# The agent is stopped first: the migrator goes on copying, and asks it
# to record a file before its rename -- and waits, as the agent is gone
# (kill -9).  The restarted agent finds the temporaries of the dead
# migrator and publishes every output once.  (The exact windows are in
# t/0086-stage-out-crash.t.)
test_expect_success 'kill -9 of the agent with migrations pending: after restart every output arrives, once' '
    gfsemu_reset "$GFS" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-stage-out=$OUT -o /dev/null \
        --wrap "for f in 1 2 3 4; do head -c 32M /dev/urandom > $OUT/k\$f.bin; done; sha256sum $OUT/k?.bin > $H/k.sum") &&
    wait_for 60 test -s $H/k.sum &&
    pid=$(cat $CLUSTER/state/n2/tierd.pid) && kill -STOP $pid &&
    n0=$(ls $OUT | grep -c "^k[1-4]\.bin$"; true) && echo "$n0 published before the stop" && test "$n0" -lt 4 &&
    sleep 2 && kill -9 $pid &&
    wait_for 120 job_done $id && test "$(job_state $id)" = COMPLETED &&
    wait_for 60 outbox_empty n2 &&
    (cd / && sha256sum -c --quiet $H/k.sum) &&
    grep -q "job $id: resuming its outputs" $CLUSTER/log/tierd-n2.log &&
    test "$(ls $OUT | grep -c "^k[1-4].bin$")" = 4 &&
    find $OUT -name ".*.part" >$TRASH/parts && cat $TRASH/parts && test ! -s $TRASH/parts &&
    { find $OUT/.tier-conflicts/$id 2>/dev/null; true; } >$TRASH/kc && cat $TRASH/kc && test ! -s $TRASH/kc &&
    ! grep "job $id: conflict" $CLUSTER/log/tierd-n2.log &&
    w=$(gfsemu_stats "$GFS" | awk "\$1 == \"file.write_bytes\" && \$3 ~ /results\/(\.tier-conflicts\/.*\/)?\.?k[1-4]\.bin/ { s += \$2 } END { print s + 0 }") &&
    echo "written to the GFS for k1..k4: $w" &&
    test "$w" -ge $((4 * 32 << 20)) && test "$w" -le $((5 * 32 << 20))
'
# A file rewritten while it is being migrated, then deleted: the copy of
# a version newer than the one hashed is never published, so nothing of
# it stays on the GFS, and nothing is taken for a conflict.
test_expect_success 'a file rewritten during its migrations, then deleted, leaves nothing' '
    as_user alice mkdir -p $H/rw && rm -f $TRASH/rw.ids &&
    (for k in 1 2 3; do
        id=$(sbatch_wait alice -w n1 --tier-stage-out=$H/rw -o /dev/null --wrap \
            "for i in \$(seq 12); do dd if=/dev/urandom of=$H/rw/f$k bs=1M count=12 status=none; sleep 0.45; done; rm $H/rw/f$k") &&
        test "$(job_state $id)" = COMPLETED || exit 1
    done) &&
    ls -la $H/rw && test -z "$(ls -A $H/rw)"
'
test_expect_success 'no node was drained' 'no_drain'
test_done
