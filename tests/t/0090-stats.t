#!/bin/bash
test_description='per-batch statistics across nodes, node metrics'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM || skip_all "needs root and Slurm"
PY=/usr/bin/python3
$PY -c "import jsonschema, prometheus_client" 2>/dev/null && test_set_prereq PYLIBS
test_expect_success 'start the cluster' 'cluster_start'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
OUT=$H/out
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
stats_json () { (cd $H && as_user "$1" $TIERCTL stats --batch "$2" --json); }
field () { $PY -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
# one snapshot in which the batch has more scratch files than $2 and
# still has a job running: it grew before the end
grown_while_running () {
    stats_json alice "$1" | field "int(d[\"total\"][\"scratch_files\"] > $2 and d[\"running\"] > 0)" | grep -qx 1
}

as_user alice mkdir -p "$H/runs" "$OUT"
# task i writes i MiB of pipeline data, then lives 3*i seconds
cat >"$H/st.sh" <<EOF
#!/bin/bash
t=\$SLURM_ARRAY_TASK_ID
head -c \$((t * 1048576)) /dev/zero > $H/runs/data-\$t
sleep \$((t * 3))
EOF
chmod 755 "$H/st.sh"; chown alice "$H/st.sh"

. "$TIER_SRCDIR/tests/lib/gfsemu.sh"
test_expect_success 'a 12-task array, a shared 64 MiB input and per-task intermediates: the counters agree with the GFS emulator' '
    as_user alice mkdir -p $H/db $H/runs12 &&
    as_user alice sh -c "head -c 64M /dev/urandom > $H/db/shared" && gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice --array=1-12 --tier-batch=$H/db --tier-scratch=$H/runs12 -o /dev/null \
        --wrap "cat $H/db/shared > $H/runs12/copy-\$SLURM_ARRAY_TASK_ID; cmp $H/db/shared $H/runs12/copy-\$SLURM_ARRAY_TASK_ID") &&
    test "$(job_state $id)" = COMPLETED && sleep 4 &&
    stats_json alice $id >$TRASH/b12.json &&
    b=$(field "d[\"roles\"][\"batch\"]" <$TRASH/b12.json) && echo "batch role: $b" &&
    test "$(field "d[\"roles\"][\"batch\"][\"misses\"]" <$TRASH/b12.json)" = 1 &&
    test "$(field "d[\"roles\"][\"batch\"][\"hits\"]" <$TRASH/b12.json)" = 23 &&
    mine=$(field "d[\"roles\"][\"batch\"][\"gfs_bytes_read\"]" <$TRASH/b12.json) &&
    emu=$(gfsemu_stat "$GFS" home/alice/db/shared read_bytes) && echo "tier $mine, emulator $emu" &&
    $PY -c "import sys; a,b=int(sys.argv[1]),int(sys.argv[2]); assert abs(a-b) <= b/100, (a,b)" $mine $emu &&
    test "$(field "d[\"roles\"][\"pipeline\"][\"scratch_bytes\"]" <$TRASH/b12.json)" -gt 0 &&
    w=$(gfsemu_stats "$GFS" | awk "\$1 == \"file.write_bytes\" && \$3 ~ /runs12\// { s += \$2 } END { print s + 0 }") &&
    echo "GFS bytes written under runs12: $w" && test "$w" = 0
'
test_expect_success 'pipeline: copy-ups count as GFS reads, kept data as GFS writes' '
    as_user alice mkdir -p $H/cu && as_user alice sh -c "head -c 2M /dev/urandom > $H/cu/old.bin" &&
    id=$(sbatch_wait alice -w n2 --tier-scratch=$H/cu --tier-keep=always -o /dev/null \
        --wrap "head -c 1M /dev/zero >> $H/cu/old.bin; head -c 512K /dev/zero > $H/cu/new.bin") &&
    test "$(job_state $id)" = COMPLETED && sleep 4 &&
    (cd $H && as_user alice $TIERCTL stats --job $id --json) >$TRASH/cu.json &&
    r=$(field "d[\"roles\"][\"pipeline\"][\"gfs_bytes_read\"]" <$TRASH/cu.json) &&
    w=$(field "d[\"roles\"][\"pipeline\"][\"gfs_bytes_written\"]" <$TRASH/cu.json) &&
    echo "read $r, written $w" && test "$r" = $((2 * 1048576)) &&
    test "$w" = $((3 * 1048576 + 524288))
'
test_expect_success 'read twice while a 4-task batch runs: the counters grow' '
    id=$(cd $H && as_user alice sbatch --parsable --array=1-4 --tier-scratch=$H/runs -o /dev/null "$H/st.sh") &&
    echo batch $id &&
    wait_for 60 sh -c "$TIERCTL -N n1 jobs | grep -q \" $id .* ended \"" &&
    sleep 3 && s1=$(stats_json alice $id | field "d[\"total\"][\"scratch_files\"]") &&
    r1=$(stats_json alice $id | field "d[\"running\"]") &&
    echo "first read: $s1 files, $r1 running" &&
    wait_for 60 grown_while_running $id $s1 &&
    test "$r1" -gt 0 &&
    wait_for 90 job_done $id && sleep 4 &&
    stats_json alice $id >$TRASH/final.json && cat $TRASH/final.json | head -c 600 &&
    test "$(field "d[\"total\"][\"scratch_files\"]" <$TRASH/final.json)" = 4 &&
    test "$(field "d[\"total\"][\"scratch_bytes\"]" <$TRASH/final.json)" = $((10 * 1048576)) &&
    test "$(field "d[\"jobs\"]" <$TRASH/final.json)" = 4 &&
    test "$(field "d[\"running\"]" <$TRASH/final.json)" = 0
'
BATCH=$id
test_expect_success 'the table: totals, roles, and one row per node with --nodes' '
    (cd $H && as_user alice $TIERCTL stats --batch $BATCH --nodes) | tee $TRASH/table &&
    grep -q "^batch $BATCH (alice): 4 job(s) on" $TRASH/table &&
    grep -q "^pipeline " $TRASH/table && grep -q "^total " $TRASH/table &&
    grep -q "^scratch:   4 files, 10.0 MiB at job end" $TRASH/table &&
    n=$(field "len(d[\"nodes\"])" <$TRASH/final.json) &&
    test "$(grep -c "^n[123] " $TRASH/table)" = "$n"
'
test_expect_success 'per-node snapshots add up to the totals' '
    field "sum(v[\"scratch_bytes\"] for v in d[\"nodes\"].values()) == d[\"total\"][\"scratch_bytes\"]" <$TRASH/final.json | grep -qx True
'
test_expect_success PYLIBS '--json validates against the documented schema' '
    $PY -c "
import json,sys,jsonschema
s=json.load(open(sys.argv[1])); d=json.load(open(sys.argv[2]))
jsonschema.validate(d, s); print(\"valid\")" $TIER_SRCDIR/doc/stats.schema.json $TRASH/final.json
'
test_expect_success '--job gives one array task'"'"'s numbers' '
    j=$(scontrol show job ${BATCH}_3 | sed -n "s/^JobId=\([0-9]*\).*/\1/p") &&
    (cd $H && as_user alice $TIERCTL stats --job $j --json) >$TRASH/job.json &&
    test "$(field "d[\"total\"][\"scratch_bytes\"]" <$TRASH/job.json)" = $((3 * 1048576)) &&
    test "$(field "d[\"batch\"]" <$TRASH/job.json)" = $BATCH
'
test_expect_success PYLIBS '--job --json and every batch of --user --json validate too' '
    (cd $H && as_user alice $TIERCTL stats --user --json) >$TRASH/user.json &&
    $PY -c "
import json,sys,jsonschema
s=json.load(open(sys.argv[1])); j=json.load(open(sys.argv[2])); u=json.load(open(sys.argv[3]))
jsonschema.validate(j, s)
assert isinstance(u, list) and len(u) >= 1, u
for b in u: jsonschema.validate(b, s)
print(\"valid\", len(u))" $TIER_SRCDIR/doc/stats.schema.json $TRASH/job.json $TRASH/user.json
'
test_expect_success 'tierctl stats --user lists alice'"'"'s batches' '
    (cd $H && as_user alice $TIERCTL stats --user) | tee $TRASH/list && grep -q "^$BATCH " $TRASH/list
'
test_expect_success 'bob is refused alice'"'"'s batch' '
    ! (cd $GFS/home/bob && as_user bob $TIERCTL stats --batch $BATCH) 2>$TRASH/b1 &&
    cat $TRASH/b1 && grep -q "no statistics for bob" $TRASH/b1 &&
    ! (cd $GFS/home/bob && as_user bob $TIERCTL stats --batch $BATCH --user=alice) 2>$TRASH/b2 &&
    cat $TRASH/b2 && grep -q "permission denied" $TRASH/b2 &&
    ! as_user bob cat $GFS/.tier/users/alice/stats/$BATCH/n1.json 2>/dev/null
'
test_expect_success 'root may read any user'"'"'s batch' '
    $TIERCTL stats --batch $BATCH --user=alice | grep -q "^batch $BATCH (alice)"
'
test_expect_success 'an SVG of the batch over time: a line per node and series, each node named' '
    (cd $H && as_user alice $TIERCTL stats --batch $BATCH --svg $OUT/b.svg) >/dev/null &&
    n=$(field "len(d[\"nodes\"])" <$TRASH/final.json) &&
    $PY -c "
import xml.etree.ElementTree as E, sys
ns = \"{http://www.w3.org/2000/svg}\"
r = E.parse(sys.argv[1]).getroot(); assert r.tag == ns + \"svg\", r.tag
lines = r.findall(\".//\" + ns + \"polyline\")
text = \" \".join(t.text or \"\" for t in r.iter(ns + \"text\"))
nodes = int(sys.argv[2])
print(len(lines), \"lines;\", text[:200])
assert len(lines) >= nodes, (len(lines), nodes)
for l in lines:
    pts = l.get(\"points\").split()
    assert len(pts) >= 2, pts
for nd in sys.argv[3].split():
    assert nd in text, nd
" $OUT/b.svg $n "$(field "\" \".join(sorted(d[\"nodes\"])))" <$TRASH/final.json)"
'
test_expect_success 'the node textfile passes promtool check metrics (a strict parser)' '
    f=$CLUSTER/run/metrics-n1.prom && test -f $f &&
    promtool check metrics <$f
'
test_expect_success PYLIBS 'the node textfile parses as Prometheus text and has no user or job label' '
    f=$CLUSTER/run/metrics-n1.prom && test -f $f && head -5 $f &&
    $PY -c "
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
n=0
for fam in parse(open(sys.argv[1]).read()):
    for s in fam.samples:
        n+=1
        assert set(s.labels) <= {\"role\"}, s
        assert s.name.startswith(\"tier_\"), s
print(n, \"samples\")
" $f && ! grep -q "alice\|bob\|job_id\|user" $f && test "$(stat -c %a $f)" = 644
'
test_expect_success 'a corrupt snapshot is reported by file, never echoed' '
    d=$GFS/.tier/users/alice/stats/$BATCH && echo "SECRET{not json" >$d/zz.json && chown alice $d/zz.json &&
    (cd $H && as_user alice $TIERCTL stats --batch $BATCH) 2>$TRASH/bad >/dev/null;
    cat $TRASH/bad && grep -q "zz.json: not a snapshot" $TRASH/bad && ! grep -q SECRET $TRASH/bad; rm -f $d/zz.json
'
# alice's own stats directory is hers to fill: a FIFO named like a
# snapshot must not hang root's tierctl, a file name must not reach the
# terminal with its escape sequences
test_expect_success 'root reads alice'"'"'s batch past her FIFO and her escape-laden file names' '
    d=$GFS/.tier/users/alice/stats/$BATCH &&
    mkfifo $d/zfifo.json && echo x >"$d/z$(printf "\\033")[2J.json" &&
    chown alice $d/zfifo.json "$d/z$(printf "\\033")[2J.json" &&
    timeout 30 $TIERCTL stats --batch $BATCH --user=alice >$TRASH/esc.out 2>$TRASH/esc.err; rc=$?;
    rm -f $d/zfifo.json "$d/z$(printf "\033")[2J.json"; cat $TRASH/esc.err &&
    test $rc = 0 && grep -q "^batch $BATCH (alice)" $TRASH/esc.out &&
    grep -q "zfifo.json: not a snapshot (not a regular file)" $TRASH/esc.err &&
    grep -qF "z\\x1b[2J.json: not a snapshot" $TRASH/esc.err &&
    ! grep -q "$(printf "\033")" $TRASH/esc.out $TRASH/esc.err
'
test_have_prereq ROOT && command -v strace >/dev/null && test_set_prereq STRACE
job_running () { test "$(job_state "$1")" = RUNNING; }
# The GFS takes the stats snapshot of n1 and does not answer (its rename
# is held for 2 minutes by strace delay injection on n1'"'"'s agent and
# its children): the agent goes on serving.
test_expect_success STRACE 'a hung GFS does not stall the agent that publishes stats to it' '
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-scratch=$H/runs -o /dev/null \
        --wrap "while [ ! -e $H/hang.go ]; do sleep 0.2; done") &&
    wait_for 30 job_running $id && pid=$(cat $CLUSTER/state/n1/tierd.pid) &&
    { strace -f -qq -o /dev/null -p $pid -e trace=rename,renameat,renameat2 \
        -e inject=rename,renameat,renameat2:delay_enter=120000000 -P n1.json & } && st=$! &&
    wait_for 10 grep -q "^TracerPid:[[:space:]]*$st\$" /proc/$pid/status &&
    { wait_for 30 grep -q "stats for alice not published: the previous publisher" \
          $CLUSTER/log/tierd-n1.log && $TIERCTL -N n1 ping; rc=$?; touch $H/hang.go; kill $st; wait $st
      test $rc = 0; } &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED
'
test_expect_success 'past StatsRetention the batch leaves the registry and the snapshots' '
    sed -i "s/^StatsInterval = .*/&\nStatsRetention = 1s/" $CLUSTER/etc/tier.conf &&
    for n in n1 n2 n3; do p=$(cat $CLUSTER/state/$n/tierd.pid 2>/dev/null) && kill -HUP $p; done;
    wait_for 30 test ! -d $GFS/.tier/users/alice/stats/$BATCH &&
    ! $TIERCTL -N n1 jobs | grep -q " $BATCH "
'
test_done
