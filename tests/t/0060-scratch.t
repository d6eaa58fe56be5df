#!/bin/bash
test_description='pipeline data on the NVDIMM scratch tier, GFS traffic counted by the emulator'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE || skip_all "needs root, Slurm and FUSE"
command -v busybox >/dev/null && test_set_prereq BUSYBOX
test_expect_success 'start the cluster, the GFS through the emulator' '
    cluster_start && test "$(cat $CLUSTER/run/gfs.mode)" = gfsemu
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
P=$H/pipe
OUT=$H/out
NV=$(cat "$CLUSTER/run/nvdimm.path")
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
as_alice () { (cd "$H" && as_user alice "$@"); }
# bytes the emulator saw written under a directory (relative to the GFS)
gfs_written_under () {
    gfsemu_stats "$GFS" | awk -v d="$1/" '$1 == "file.write_bytes" && index($3, d) == 1 { s += $2 } END { print s + 0 }'
}
tree_sum () { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum | sha256sum); }

test_expect_success 'a pipeline directory with a file from before' '
    as_user alice mkdir -p "$P/runs/keepme" "$OUT" &&
    as_user alice sh -c "echo gfs-data > $P/runs/input.txt; echo d > $P/runs/keepme/x" &&
    tree_sum "$P/runs" >$TRASH/sum.before
'
# step 1 writes three files and a subdirectory; step 2 (a second srun)
# verifies them and that no other task's are there
cat >"$P/pipe.sh" <<'EOF'
#!/bin/bash
R=$1; O=$2; t=$SLURM_ARRAY_TASK_ID
srun -n1 sh -c "mkdir -p $R/t$t/sub && for f in a b c; do echo \$f-$t > $R/t$t/\$f; done && echo s-$t > $R/t$t/sub/s && cat $R/input.txt > $R/t$t/copy"
srun -n1 sh -c "test \"\$(cat $R/t$t/a $R/t$t/b $R/t$t/c $R/t$t/sub/s)\" = \"\$(printf 'a-$t\nb-$t\nc-$t\ns-$t')\" && ls $R > $O/ls-$t && test \$(ls -d $R/t* | wc -l) = 1 && echo verified-$t" > $O/v-$t
EOF
chmod 755 "$P/pipe.sh"; chown alice "$P/pipe.sh"

# --exclusive: one task per node at a time, so the first three tasks take
# the three nodes and the fourth follows one of them on a cleaned tier
test_expect_success 'a 4-task array of two-step pipelines across the three nodes' '
    gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice --array=1-4 --exclusive --tier-scratch=$P/runs -o $OUT/p-%a.out \
        "$P/pipe.sh" "$P/runs" "$OUT") &&
    test "$(job_state $id)" = COMPLETED && cat $OUT/p-*.out &&
    for t in 1 2 3 4; do grep -qx verified-$t $OUT/v-$t || exit 1; done &&
    scontrol show job $id | grep -o "^ *NodeList=n[0-9]" | sed "s/^ *//" | sort -u >$TRASH/nodes;
    cat $TRASH/nodes && test "$(cat $TRASH/nodes | tr "\n" " ")" = "NodeList=n1 NodeList=n2 NodeList=n3 "
'
test_expect_success 'the GFS directory is unchanged and the emulator counted no write under it' '
    tree_sum "$P/runs" >$TRASH/sum.after && cmp $TRASH/sum.before $TRASH/sum.after &&
    w=$(gfs_written_under home/alice/pipe/runs) && echo "written: $w" && test "$w" = 0
'
test_expect_success 'the NVDIMM tiers and namespace directories are empty afterwards' '
    for n in n1 n2 n3; do
        test -z "$(ls -A $NV/$n 2>/dev/null | grep -v "^\.tier-pmem-probe$")" || { ls -la $NV/$n; exit 1; }
        test -z "$(ls -A $CLUSTER/run/ns/$n 2>/dev/null)" || exit 1
    done && ! grep -q " - overlay " /proc/self/mountinfo
'
test_expect_success 'the control run with tier off writes them to the GFS' '
    gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice --array=1-2 --tier-cache=off -o $OUT/c-%a.out \
        "$P/pipe.sh" "$P/runs" "$OUT") &&
    w=$(gfs_written_under home/alice/pipe/runs) && echo "written: $w" && test "$w" -gt 0 &&
    ls "$P/runs" | grep -q "^t1$" && rm -rf "$P/runs/t1" "$P/runs/t2"
'
test_expect_success 'the agent counted the scratch data (GFS writes avoided)' '
    id=$(sbatch_wait alice -w n1 --tier-scratch=$P/runs -o /dev/null \
        --wrap "head -c 1048576 /dev/zero > $P/runs/big; echo x > $P/runs/input.txt") &&
    sleep 3 && as_user alice $TIERCTL -N n1 counters --job $id --json >$TRASH/c.json &&
    python3 -c "
import json,sys
c=json.load(open(sys.argv[1]))[\"counters\"][\"pipeline\"]
print(c)
assert c[\"scratch_files\"]==2 and c[\"scratch_bytes\"]>=1048576 and c[\"copyups\"]==1, c
assert c[\"gfs_bytes_avoided\"]==c[\"scratch_bytes\"] and c[\"scratch_peak\"]>=1048576, c" $TRASH/c.json
'
test_expect_success BUSYBOX 'a static binary sees the intermediate files' '
    file -L $(command -v busybox) | grep -q "statically linked" &&
    as_alice srun -w n2 --tier-scratch=$P/runs sh -c "echo inter > $P/runs/i.txt && busybox cat $P/runs/i.txt && busybox ls $P/runs" >$TRASH/bb &&
    cat $TRASH/bb && grep -qx inter $TRASH/bb && grep -qx i.txt $TRASH/bb && test ! -e $P/runs/i.txt
'
test_expect_success 'a program that mmaps an intermediate file works' '
    as_alice srun -w n2 --tier-scratch=$P/runs sh -c "head -c 300000 /dev/urandom > $P/runs/m && $TIER_BUILDDIR/tests/gfsemu/gfsemu-mmap $P/runs/m | cmp - $P/runs/m && echo mmap-ok" >$TRASH/mm &&
    grep -qx mmap-ok $TRASH/mm
'
test_expect_success 'renaming a directory that came from the GFS works' '
    as_alice srun -w n3 --tier-scratch=$P/runs sh -c "mv $P/runs/keepme $P/runs/moved && cat $P/runs/moved/x && ls $P/runs" >$TRASH/mv 2>&1 &&
    cat $TRASH/mv && grep -qx d $TRASH/mv && grep -qx moved $TRASH/mv && test -d $P/runs/keepme
'
cat >"$P/fail.sh" <<'EOF'
#!/bin/bash
echo "intermediate of $SLURM_ARRAY_TASK_ID" > $1/inter-$SLURM_ARRAY_TASK_ID.txt
[ "$SLURM_ARRAY_TASK_ID" = 2 ] && exit 3
exit 0
EOF
chmod 755 "$P/fail.sh"; chown alice "$P/fail.sh"
test_expect_success 'keep=on-failure: a failing task'"'"'s data is kept, a succeeding task'"'"'s is not' '
    id=$(sbatch_wait alice --array=1-2 --tier-scratch=$P/runs --tier-keep=on-failure \
        -o $OUT/k-%a.out -e $OUT/k-%a.err "$P/fail.sh" "$P/runs") &&
    cat $OUT/k-2.err && find $P/runs/.tier-kept -type f | tee $TRASH/kept &&
    t1=$(squeue -h 2>/dev/null; scontrol show job ${id}_1 | sed -n "s/^JobId=\([0-9]*\).*/\1/p") &&
    t2=$(scontrol show job ${id}_2 | sed -n "s/^JobId=\([0-9]*\).*/\1/p") &&
    n2=$(scontrol show job $t2 | sed -n "s/^ *NodeList=\(n[0-9]\).*/\1/p" | head -n1) &&
    test -f "$P/runs/.tier-kept/$t2/$n2/inter-2.txt" &&
    test "$(cat $P/runs/.tier-kept/$t2/$n2/inter-2.txt)" = "intermediate of 2" &&
    test "$(stat -c %U $P/runs/.tier-kept/$t2/$n2/inter-2.txt)" = alice &&
    test ! -e "$P/runs/.tier-kept/$t1" && test ! -e "$P/runs/inter-2.txt" &&
    grep -q "tier: keep=on-failure: the pipeline data of $P/runs is kept in $P/runs/.tier-kept/$t2/NODE/" $OUT/k-2.err &&
    ! grep -q "tier-kept" $OUT/k-1.err
'
test_expect_success 'keep=always keeps a succeeding job'"'"'s data, never replacing GFS files' '
    as_user alice sh -c "echo keep-me > $P/runs/doomed.txt; mkdir -p $P/runs/doomed; echo f > $P/runs/doomed/f" &&
    id=$(sbatch_wait alice -w n1 --tier-scratch=$P/runs --tier-keep=always -o /dev/null \
        --wrap "rm $P/runs/doomed.txt && rm -r $P/runs/doomed && ls $P/runs >$OUT/deleted.ls && echo a > $P/runs/always.txt; echo changed > $P/runs/input.txt") &&
    ! grep -q doomed $OUT/deleted.ls &&
    find $P/runs/.tier-kept/$id -ls &&
    test "$(cat $P/runs/.tier-kept/$id/n1/always.txt)" = a &&
    test "$(cat $P/runs/.tier-kept/$id/n1/input.txt)" = changed &&
    test "$(cat $P/runs/input.txt)" = gfs-data &&
    test -z "$(find $P/runs/.tier-kept/$id ! -type f ! -type d)" &&
    test ! -e $P/runs/.tier-kept/$id/n1/doomed.txt && test ! -e $P/runs/.tier-kept/$id/n1/doomed &&
    test "$(cat $P/runs/doomed.txt)" = keep-me && test "$(cat $P/runs/doomed/f)" = f
'
test_expect_success 'a requeued job keeps its second run beside the first (JOBID.1)' '
    rm -f $OUT/kr-* &&
    id=$(as_alice sbatch --parsable -w n1 --requeue --open-mode=append --tier-scratch=$P/runs \
        --tier-keep=always -o $OUT/kr.out -e $OUT/kr.err \
        --wrap "echo run\$SLURM_RESTART_COUNT > $P/runs/run.txt; touch $OUT/kr-\$SLURM_RESTART_COUNT; sleep 4") &&
    wait_for 30 test -e $OUT/kr- &&
    scontrol requeue $id && sleep 1 && scontrol update jobid=$id starttime=now &&
    wait_for 120 test -e $OUT/kr-1 && wait_for 60 job_done $id &&
    cat $OUT/kr.err && find $P/runs/.tier-kept/$id* -type f &&
    test "$(cat $P/runs/.tier-kept/$id/n1/run.txt)" = run &&
    test "$(cat $P/runs/.tier-kept/$id.1/n1/run.txt)" = run1 &&
    grep -q "kept in $P/runs/.tier-kept/$id.1/NODE/" $OUT/kr.err &&
    test ! -e $P/runs/run.txt
'
test_expect_success 'an srun job is told where its data is kept, once' '
    as_alice srun -w n3 -n2 --tier-scratch=$P/runs --tier-keep=always \
        sh -c "echo \$SLURM_JOB_ID; echo s > $P/runs/srun.txt" >$TRASH/sj 2>$TRASH/sj.err &&
    cat $TRASH/sj $TRASH/sj.err && j=$(sort -u $TRASH/sj) && test -n "$j" &&
    grep -q "tier: keep=always: the pipeline data of $P/runs is kept in $P/runs/.tier-kept/$j/NODE/" $TRASH/sj.err &&
    test "$(grep -c "tier: keep=" $TRASH/sj.err)" = 1 &&
    wait_for 30 test -f $P/runs/.tier-kept/$j/n3/srun.txt &&
    as_alice srun -w n3 --tier-scratch=$P/runs --tier-keep=on-failure true 2>$TRASH/sj2.err &&
    cat $TRASH/sj2.err && ! grep -q "tier: keep=" $TRASH/sj2.err &&
    ! as_alice srun -w n3 --tier-scratch=$P/runs --tier-keep=on-failure false 2>$TRASH/sj3.err &&
    cat $TRASH/sj3.err && grep -q "tier: keep=on-failure: the pipeline data of $P/runs is kept" $TRASH/sj3.err
'
test_expect_success 'writing past the reservation gives ENOSPC in the scratch only' '
    id=$(sbatch_wait alice -w n2 --tier-scratch=$P/runs:4M -o $OUT/full.out -e $OUT/full.err \
        --wrap "head -c 8M /dev/zero > $P/runs/big 2>$OUT/dd.err; echo rc=\$?; cat $OUT/dd.err; echo ok > $OUT/outside-ok") &&
    cat $OUT/full.out && grep -q "rc=1" $OUT/full.out && grep -q "No space left" $OUT/full.out &&
    test "$(cat $OUT/outside-ok)" = ok && no_drain
'
test_expect_success 'the next job on that node gets a clean tier' '
    as_alice srun -w n2 --tier-scratch=$P/runs:4M sh -c "ls $P/runs; df -k $P/runs | tail -1" >$TRASH/next &&
    cat $TRASH/next && ! grep -qx big $TRASH/next
'
test_expect_success 'a reservation larger than the node'"'"'s tier: the job runs on the GFS, with a warning' '
    as_alice srun -w n3 --tier-scratch=$P/runs:64G sh -c "grep -c \" - overlay \" /proc/self/mountinfo || true" >$TRASH/big 2>$TRASH/big.err &&
    cat $TRASH/big.err && test "$(cat $TRASH/big)" = 0 &&
    grep -q "cannot reserve 65536 MiB" $TRASH/big.err
'
# Sizes that add up past 2^63 (and once wrapped to a tiny sum) saturate
# at 8 EiB: refused like any reservation too large for the node.
test_expect_success 'sizes whose sum overflows are refused, never wrapped to a small reservation' '
    as_alice mkdir -p $P/ov1 $P/ov2 &&
    as_alice srun -w n3 --tier-scratch=$P/ov1:4096P,$P/ov2:4096P sh -c "grep -c \" - overlay \" /proc/self/mountinfo || true" >$TRASH/ov 2>$TRASH/ov.err &&
    cat $TRASH/ov.err && test "$(cat $TRASH/ov)" = 0 &&
    grep -q "cannot reserve 8796093022207 MiB" $TRASH/ov.err &&
    ! as_alice srun -w n3 --tier-scratch=$P/ov1:8192P true 2>$TRASH/ov2.err &&
    cat $TRASH/ov2.err && grep -q "ov1:8192P.: the size is larger than 8 EiB" $TRASH/ov2.err
'
test_expect_success 'required turns a refused reservation into a clean failure' '
    ! as_alice srun -w n3 --tier-cache=required --tier-scratch=$P/runs:64G true 2>$TRASH/rq.err &&
    cat $TRASH/rq.err && grep -q "required: the NVDIMM tier of node n3 cannot reserve" $TRASH/rq.err && no_drain
'
# the test cluster: NvdimmCapacity = 1G, ScratchDefaultSize = 128M
test_expect_success 'a directory without a size reserves ScratchDefaultSize: past the capacity it falls back' '
    rm -f $OUT/hold-ready $OUT/hold-go &&
    a=$(as_alice sbatch --parsable -w n1 --tier-scratch=$P/runs:900M -o /dev/null \
        --wrap "touch $OUT/hold-ready; while [ ! -e $OUT/hold-go ]; do sleep 0.2; done") &&
    wait_for 60 test -e $OUT/hold-ready &&
    as_alice srun -w n1 --tier-scratch=$P/runs sh -c "grep -c \" - overlay \" /proc/self/mountinfo || true" >$TRASH/nosize 2>$TRASH/nosize.err;
    ! as_alice srun -w n1 --tier-cache=required --tier-scratch=$P/runs true 2>$TRASH/nosize-rq.err;
    rq=$?; touch $OUT/hold-go; wait_for 60 job_done $a;
    cat $TRASH/nosize $TRASH/nosize.err $TRASH/nosize-rq.err && test $rq = 0 &&
    test "$(cat $TRASH/nosize)" = 0 &&
    grep -q "cannot reserve 128 MiB (900 of 1024 MiB are reserved)" $TRASH/nosize.err &&
    grep -q "required: the NVDIMM tier of node n1 cannot reserve 128 MiB" $TRASH/nosize-rq.err &&
    as_alice srun -w n1 --tier-scratch=$P/runs sh -c "grep -c \" - overlay \" /proc/self/mountinfo; df -k $P/runs | tail -1" >$TRASH/alone &&
    cat $TRASH/alone && test "$(head -1 $TRASH/alone)" = 1 &&
    awk "NR == 2 { exit !(\$2 == 131072) }" $TRASH/alone
'
test_expect_success 'multi-node jobs with scratch are warned at submit' '
    id=$(cd $H && as_user alice sbatch --parsable -N2 --tier-scratch=$P/runs -o /dev/null --wrap true 2>$TRASH/w.err) &&
    cat $TRASH/w.err && grep -q "warning: tier: --tier-scratch gives each of the 2 nodes its own private view" $TRASH/w.err &&
    wait_for 60 job_done $id
'
test_expect_success 'tierctl status shows the NVDIMM tier, DRAM-emulated, with its capacity' '
    $TIERCTL -N n1 status | tee $TRASH/st && grep -q "not persistent memory, DRAM-emulated (tmpfs)" $TRASH/st &&
    grep -q "capacity 1.0 GiB" $TRASH/st &&
    $TIERCTL -N n1 status --json | python3 -c "import json,sys; t=json.load(sys.stdin)[\"tiers\"][\"nvdimm\"]; assert t[\"emulated\"] and not t[\"pmem\"] and t[\"capacity\"]==1<<30, t"
'
# the job's scratch is a tmpfs inside its namespace, which the host's
# statfs of NvdimmDir cannot see: the agent samples it (every 5 s)
nv_json () {
    $TIERCTL -N n1 status --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"tiers\"][\"nvdimm\"][sys.argv[1]])" "$1"
}
scratch_is () { test "$(nv_json scratch_used)" "$1" "$2"; }
test_expect_success 'tierctl status shows the scratch running jobs use' '
    rm -f $P/go && id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-scratch=$P/runs:64M -o /dev/null \
        --wrap "head -c 20M /dev/zero >$P/runs/big; while [ ! -e $P/go ]; do sleep 0.2; done") &&
    wait_for 60 scratch_is -ge 20971520 &&
    test "$(nv_json scratch_jobs)" = 1 &&
    $TIERCTL -N n1 status | tee $TRASH/st && grep -q "scratch in use 2[0-9.]* MiB by 1 running job(s)" $TRASH/st &&
    as_alice touch $P/go && wait_for 60 job_done $id &&
    wait_for 30 scratch_is -eq 0
'
test_expect_success 'on persistent memory (libpmem says so) tierctl status says it' '
    p=$(cat $CLUSTER/state/n1/tierd.pid) && kill $p && wait_for 20 sh -c "! kill -0 $p 2>/dev/null" &&
    env -i PMEM_IS_PMEM_FORCE=1 $CLUSTER/lib/tierd -c $CLUSTER/etc/tier.conf -N n1 &&
    wait_for 20 $TIERCTL -N n1 ping &&
    $TIERCTL -N n1 status | tee $TRASH/st && grep -q "persistent memory (libpmem), DRAM-emulated (tmpfs)" $TRASH/st &&
    test "$(nv_json pmem)" = True &&
    p=$(cat $CLUSTER/state/n1/tierd.pid) && kill $p && wait_for 20 sh -c "! kill -0 $p 2>/dev/null" &&
    id=$(sbatch_wait alice -w n1 --tier-scratch=$P/runs -o /dev/null --wrap true) &&
    test "$(nv_json pmem)" = False
'
test_expect_success 'no node was drained' 'no_drain'
test_done
