#!/bin/bash
test_description='stage-in: endpoint inputs on the fast tier before the tasks start'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE || skip_all "needs root, Slurm and FUSE"
# the GFS is capped so that a large input takes seconds to stage
test_expect_success 'start the cluster (GFS capped at 40 MiB/s)' '
    cluster_start --gfs-opts bandwidth=40M
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
OUT=$H/out
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
as_user alice mkdir -p "$H/in/tree/sub" "$OUT"
for i in 1 2 3 4 5 6; do as_user alice sh -c "head -c 100000 /dev/urandom > $H/in/q$i.txt"; done
as_user alice sh -c "echo leaf > $H/in/tree/sub/leaf; echo top > $H/in/tree/top"
(cd $H/in && sha256sum q*.txt) >$TRASH/inputs.sum

cat >"$H/task.sh" <<'EOF2'
#!/bin/bash
# record what this task read, change the GFS copy behind its back, read again
i=$SLURM_ARRAY_TASK_ID; H=$1
sha256sum $H/in/q$i.txt | cut -d" " -f1 > $H/out/read-$i
cat $H/in/tree/sub/leaf > $H/out/tree-$i
grep -c " $H/in" /proc/self/mountinfo > $H/out/binds-$i
touch $H/out/ready-$i
while [ ! -e $H/out/changed ]; do sleep 0.2; done
sha256sum $H/in/q$i.txt | cut -d" " -f1 > $H/out/reread-$i
EOF2
chmod 755 "$H/task.sh"; chown alice "$H/task.sh"

test_expect_success 'a 6-task array with per-task inputs (q%a) and a tree' '
    gfsemu_reset "$GFS" &&
    id=$(cd $H && as_user alice sbatch --parsable --array=1-6 \
        --tier-stage-in=$H/in/q%a.txt,$H/in/tree -o $OUT/t-%a.out -e $OUT/t-%a.err \
        "$H/task.sh" "$H") &&
    for i in 1 2 3 4 5 6; do wait_for 60 test -e $OUT/ready-$i || exit 1; done &&
    for i in 1 2 3 4 5 6; do as_user alice sh -c "echo changed > $H/in/q$i.txt"; done &&
    touch $OUT/changed && wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    echo $id >$TRASH/id
'
test_expect_success 'each task read its own input, from the tier, bound at its GFS path' '
    for i in 1 2 3 4 5 6; do
        test "$(cat $OUT/read-$i)" = "$(sed -n "s/  q$i.txt$//p" $TRASH/inputs.sum)" || exit 1
        test "$(cat $OUT/tree-$i)" = leaf && test "$(cat $OUT/binds-$i)" = 2 || exit 1
    done
'
test_expect_success 'a snapshot: the change made on the GFS after stage-in is not seen' '
    for i in 1 2 3 4 5 6; do test "$(cat $OUT/reread-$i)" = "$(cat $OUT/read-$i)" || exit 1; done
'
test_expect_success 'the emulator counted one read of each input' '
    for i in 1 2 3 4 5 6; do
        b=$(gfsemu_stat "$GFS" home/alice/in/q$i.txt read_bytes) &&
        echo "q$i: $b" && test "$b" = 100000 || exit 1
    done
'
test_expect_success 'stage-in counters: files, bytes, time, GFS metadata operations' '
    sleep 3 && id=$(cat $TRASH/id) && ls -la $GFS/.tier/users/alice/stats/$id/ &&
    (cd $H && as_user alice $TIERCTL stats --batch $id --json) >$TRASH/s.json &&
    python3 -c "
import json,sys
t=json.load(open(sys.argv[1]))[\"roles\"][\"endpoint\"]
print(t[\"stage_in_files\"], t[\"stage_in_bytes\"], t[\"stage_in_ms\"])
assert t[\"stage_in_files\"]==6*3 and t[\"stage_in_bytes\"]==6*(100000+9), t
assert t[\"stage_in_ms\"] > 0, t
print(\"meta\", t[\"gfs_meta_ops\"])
assert t[\"gfs_meta_ops\"] >= t[\"stage_in_files\"], t" $TRASH/s.json
'
test_expect_success 'an input shared by a batch is copied once per node' '
    as_user alice sh -c "head -c 5000000 /dev/urandom > $H/in/shared" && gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice --array=1-6 --tier-stage-in=$H/in/shared -o /dev/null \
        --wrap "sha256sum $H/in/shared > $OUT/sh-\$SLURM_ARRAY_TASK_ID") &&
    test "$(job_state $id)" = COMPLETED &&
    test "$(cat $OUT/sh-* | sort -u | wc -l)" = 1 &&
    n=$(for t in 1 2 3 4 5 6; do scontrol show job ${id}_$t | sed -n "s/^ *NodeList=\(n[0-9]\).*/\1/p" | head -1; done | sort -u | wc -l) &&
    b=$(gfsemu_stat "$GFS" home/alice/in/shared read_bytes) &&
    echo "$n nodes, read $b bytes" && test "$b" -ge 5000000 && test "$b" -le $((n * 5000000)) &&
    for nd in n1 n2 n3; do test -z "$(ls -A $(cat $CLUSTER/run/nvdimm.path)/$nd/.stagecache 2>/dev/null)" || exit 1; done
'
test_expect_success 'the staged inputs are read-only in the job' '
    (cd $H && as_user alice srun -w n1 --tier-stage-in=$H/in/q1.txt sh -c "echo x > $H/in/q1.txt") 2>$TRASH/ro;
    cat $TRASH/ro && grep -q "Read-only file system" $TRASH/ro
'
test_expect_success 'a missing input fails the job cleanly, naming the path' '
    id=$(sbatch_wait alice -w n2 --tier-stage-in=$H/in/nope.txt -o $OUT/m.out -e $OUT/m.err --wrap "echo ran") &&
    test "$(job_state $id)" = FAILED && cat $OUT/m.err &&
    grep -q "tier: stage-in failed: $H/in/nope.txt: No such file or directory" $OUT/m.err &&
    ! grep -q ran $OUT/m.out && no_drain &&
    test "$(scontrol show job $id | grep -o "Restarts=[0-9]*")" = Restarts=0
'
test_expect_success 'an input outside AllowedRoots fails the job' '
    id=$(sbatch_wait alice -w n2 --tier-stage-in=/etc/hostname -o /dev/null -e $OUT/a.err --wrap true) &&
    test "$(job_state $id)" = FAILED && grep -q "outside the directories tier may act on" $OUT/a.err
'
test_expect_success 'an input that is a symlink out of AllowedRoots is refused' '
    as_user alice ln -sfn /etc/passwd $H/in/pw &&
    id=$(sbatch_wait alice -w n2 --tier-stage-in=$H/in/pw -o /dev/null -e $OUT/l.err --wrap "cat $H/in/pw") &&
    test "$(job_state $id)" = FAILED && cat $OUT/l.err &&
    grep -q "$H/in/pw: a symlink or .\.\.. leads out of its root" $OUT/l.err
'
test_expect_success 'bob cannot stage alice'"'"'s private input' '
    as_user alice mkdir -m 700 $H/private && as_user alice sh -c "echo s > $H/private/s" &&
    id=$(sbatch_wait bob -w n2 --tier-stage-in=$H/private/s -o /dev/null -e $GFS/home/bob/b.err --wrap true) &&
    test "$(job_state $id)" = FAILED && cat $GFS/home/bob/b.err && grep -q "Permission denied" $GFS/home/bob/b.err
'
test_expect_success 'a long stage-in shows progress on stderr' '
    as_user alice sh -c "head -c 480M /dev/zero > $H/in/big" &&
    id=$(sbatch_wait alice -w n3 --tier-stage-in=$H/in/big -o /dev/null -e $OUT/p.err --wrap "wc -c < $H/in/big") &&
    cat $OUT/p.err && grep -q "tier: staging in: .* of 480.0 MiB" $OUT/p.err
'
# its 20th read of the GFS never answers: the stage-in is still copying
# when the job is cancelled, however fast the node copies
HANG_READ="home/alice/in/big:read:hang:20"
test_expect_success 'scancel during stage-in stops the copy' '
    gfsemu_reset "$GFS" && gfsemu_fault "$GFS" "$HANG_READ" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-in=$H/in/big -o /dev/null --wrap true) &&
    wait_for 30 gfsemu_hung "$GFS" &&
    wait_for 30 test -e $CLUSTER/run/ns/n1/$id/stage.pid &&
    read -r p _ <$CLUSTER/run/ns/n1/$id/stage.pid && kill -0 $p &&
    scancel $id && wait_for 30 job_done $id &&
    wait_for 10 sh -c "! kill -0 $p 2>/dev/null" &&
    grep -q "job $id ended during stage-in: copies stopped" $CLUSTER/log/tierd-n1.log &&
    gfsemu_fault_clear "$GFS" &&
    b=$(gfsemu_stat "$GFS" home/alice/in/big read_bytes) && echo "read $b of 503316480" &&
    test "$b" -lt 503316480 && test ! -e $(cat $CLUSTER/run/nvdimm.path)/n1/$id
'
# bob_leader: a process of bob that leads its own process group (as a
# process the kernel gave a dead stager's pid would); its pid
bob_leader () {
    as_user bob setsid sleep 300 </dev/null >/dev/null 2>&1 &
    wait_for 10 pgrep -u bob -x sleep >/dev/null && pgrep -u bob -x -n sleep
}
# The pid file then names bob's process with the stager's start time, as
# after the stager died and the kernel gave its pid to bob.  Either the
# task waiting for the stage-in finds the stager gone first (it looks
# every 3 s) and has the part started again, whose stager job end stops;
# or job end comes first and signals no one: bob's process group lives.
test_expect_success 'a stager pid that now names another process is never signalled' '
    gfsemu_reset "$GFS" && gfsemu_fault "$GFS" "$HANG_READ" &&
    bp=$(bob_leader) && test -n "$bp" &&
    test "$(ps -o pgid= -p $bp | tr -d " ")" = "$bp" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-in=$H/in/big -o /dev/null --wrap true) &&
    wait_for 30 gfsemu_hung "$GFS" &&
    wait_for 30 test -e $CLUSTER/run/ns/n1/$id/stage.pid &&
    read -r sp start <$CLUSTER/run/ns/n1/$id/stage.pid && kill -0 $sp &&
    echo "stager $sp started at $start; the pid file now says $bp" &&
    printf "%s %s\n" "$bp" "$start" >$CLUSTER/run/ns/n1/$id/stage.pid &&
    sleep 4 && scancel $id && wait_for 30 job_done $id &&
    sleep 1 && kill -0 $bp &&
    grep "job $id" $CLUSTER/log/tierd-n1.log &&
    grep -E "job $id: stage-in: its stager \(pid $bp\) ended unfinished; started again|job $id: stage-in part 0: pid $bp is no more its stager: not signalled" \
        $CLUSTER/log/tierd-n1.log &&
    gfsemu_fault_clear "$GFS" &&
    wait_for 30 sh -c "! kill -0 $sp 2>/dev/null" &&
    kill $bp && no_drain
'
test_expect_success 'without PrologFlags=Alloc, a node stages when the job reaches it' '
    gfsemu_fault_clear "$GFS" &&
    id=$(cd $H && as_user alice sbatch --parsable -N2 -w n1,n2 --tier-stage-in=$H/in/q1.txt -o $OUT/na.out \
        --wrap "sleep 4; srun -N2 cat $H/in/q1.txt >/dev/null; echo done") &&
    wait_for 30 test -e $CLUSTER/run/ns/n1/$id/stage.status && sleep 1 &&
    test ! -e $CLUSTER/run/ns/n2/$id/stage.status &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED && grep -q done $OUT/na.out
'
# An endpoint policy with stage = in makes its directory an input of every
# job that follows it: the tree is staged in (from the first step on: the
# prolog does not know the policies yet, so here, with an option's input
# the prolog started, it is a second part) and shown read-only at its GFS
# path, a snapshot.
cat >"$H/pol.sh" <<'EOF2'
#!/bin/bash
H=$1; O=$H/out
cat $H/pin/a $H/pin/sub/b > $O/pin-read
sha256sum < $H/in/q1.txt | cut -d" " -f1 > $O/pin-q1
{ echo x > $H/pin/a; } 2> $O/pin-w1
{ touch $H/pin/new; } 2> $O/pin-w2
touch $O/pin-ready
while [ ! -e $O/pin-changed ]; do sleep 0.2; done
cat $H/pin/a $H/pin/sub/b > $O/pin-reread
ls $H/pin > $O/pin-ls
EOF2
chmod 755 "$H/pol.sh"; chown alice "$H/pol.sh"
test_expect_success 'an endpoint policy with stage = in: its tree is staged in, a read-only snapshot, read once' '
    as_user alice mkdir -p $H/pin/sub &&
    as_user alice sh -c "echo one > $H/pin/a; echo two > $H/pin/sub/b" &&
    (cd $H && as_user alice $TIERCTL -N n1 set policy $H/pin endpoint --stage in) &&
    (cd $H && as_user alice $TIERCTL -N n1 show policy --json $H/pin/a) >$TRASH/pin.json &&
    grep -q "\"stage\": *\"in\"" $TRASH/pin.json &&
    q1=$(sha256sum < $H/in/q1.txt | cut -d" " -f1) &&
    gfsemu_reset "$GFS" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-cache=auto \
        --tier-stage-in=$H/in/q1.txt -o $OUT/pin.out -e $OUT/pin.err "$H/pol.sh" "$H") &&
    wait_for 60 test -e $OUT/pin-ready &&
    as_user alice sh -c "echo changed > $H/pin/a; echo new > $H/pin/c" &&
    touch $OUT/pin-changed &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    cat $OUT/pin.err $OUT/pin-w1 $OUT/pin-w2 &&
    test "$(cat $OUT/pin-read)" = "$(printf "one\ntwo")" &&
    test "$(cat $OUT/pin-reread)" = "$(printf "one\ntwo")" &&
    test "$(cat $OUT/pin-q1)" = "$q1" &&
    grep -q "Read-only file system" $OUT/pin-w1 &&
    grep -q "Read-only file system" $OUT/pin-w2 &&
    test "$(cat $OUT/pin-ls | tr "\n" " ")" = "a sub " &&
    test "$(gfsemu_stat "$GFS" home/alice/pin/a read_bytes)" = 4 &&
    test "$(gfsemu_stat "$GFS" home/alice/pin/sub/b read_bytes)" = 4 &&
    grep -q "job $id: staging in 1 item(s)$" $CLUSTER/log/tierd-n1.log &&
    grep -q "job $id: staging in 1 item(s) more" $CLUSTER/log/tierd-n1.log &&
    (cd $H && as_user alice $TIERCTL -N n1 unset policy $H/pin)
'
test_expect_success 'an input policy inside a pipeline directory is refused when it is set' '
    (cd $H && as_user alice $TIERCTL -N n1 set policy $H/pipe pipeline) &&
    (cd $H && ! as_user alice $TIERCTL -N n1 set policy $H/pipe/in endpoint --stage in) 2>$TRASH/nest.err &&
    cat $TRASH/nest.err && grep -q "nothing may nest inside a pipeline directory" $TRASH/nest.err &&
    (cd $H && ! as_user alice $TIERCTL -N n1 set policy $H/pin batch --stage in) 2>$TRASH/role.err &&
    grep -q "key .stage.: does not apply to role batch" $TRASH/role.err &&
    (cd $H && as_user alice $TIERCTL -N n1 unset policy $H/pipe)
'
# ------------------------------------------ stage-in within the NVDIMM room
#
# Staged inputs are on the NVDIMM tier (NvdimmCapacity 1 GiB here) as
# scratch is: a part may stage what the scratch reservations of running
# jobs and their other stage-ins leave, and a reservation counts what
# staged inputs hold.  The files are sparse in the GFS's backing store:
# a part that does not fit fails from its sizes, before it reads a byte.
HB=$GFS-backing/home/alice
truncate -s 1200M $HB/in/huge && chown alice: $HB/in/huge
truncate -s 400M $HB/in/mid && chown alice: $HB/in/mid
as_user alice mkdir -p $H/scr
test_expect_success 'a stage-in larger than the NVDIMM tier fails the job, naming the sizes' '
    id=$(sbatch_wait alice -w n2 --tier-stage-in=$H/in/huge -o /dev/null -e $OUT/huge.err --wrap "echo ran") &&
    test "$(job_state $id)" = FAILED && cat $OUT/huge.err &&
    grep -q "$H/in/huge: the stage-in needs 1.2 GiB, and the NVDIMM tier of this node has 1.0 GiB left for it (NvdimmCapacity 1.0 GiB, 0 B of it reserved for scratch or holding other stage-ins)" $OUT/huge.err &&
    b=$(gfsemu_stat "$GFS" home/alice/in/huge read_bytes) && test "$b" = 0 &&
    test ! -e $(cat $CLUSTER/run/nvdimm.path)/n2/$id
'
test_expect_success 'a running job'"'"'s scratch reservation is not staged over: the next stage-in gets what is left' '
    rm -f $OUT/hold-ready $OUT/hold-go &&
    a=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-scratch=$H/scr:800M -o /dev/null \
        --wrap "touch $OUT/hold-ready; while [ ! -e $OUT/hold-go ]; do sleep 0.2; done") &&
    wait_for 60 test -e $OUT/hold-ready &&
    id=$(sbatch_wait alice -w n2 --tier-stage-in=$H/in/mid -o /dev/null -e $OUT/mid.err --wrap "echo ran") &&
    touch $OUT/hold-go && wait_for 60 job_done $a &&
    test "$(job_state $id)" = FAILED && cat $OUT/mid.err &&
    grep -q "$H/in/mid: the stage-in needs 400.0 MiB, and the NVDIMM tier of this node has 224.0 MiB left for it (NvdimmCapacity 1.0 GiB, 800.0 MiB of it reserved" $OUT/mid.err &&
    test "$(job_state $a)" = COMPLETED
'
test_expect_success 'a scratch reservation counts what staged inputs hold' '
    gfsemu_reset "$GFS" && gfsemu_fault "$GFS" "home/alice/in/mid:read:hang:20" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-stage-in=$H/in/mid -o /dev/null --wrap true) &&
    wait_for 30 gfsemu_hung "$GFS" &&
    wait_for 30 grep -q "\"total\":419430400" $CLUSTER/run/ns/n2/$id/stage.status &&
    as_user alice srun -w n2 --tier-scratch=$H/scr:700M true 2>$OUT/res.err;
    cat $OUT/res.err &&
    grep -q "cannot reserve 700 MiB (400 of 1024 MiB are reserved, 400 MiB of them by staged inputs)" $OUT/res.err &&
    scancel $id && wait_for 30 job_done $id &&
    gfsemu_fault_clear "$GFS"
'
# L2: the user swaps the staged input for a symlink to a file that is
# not theirs while the stage-in copies (a slow input comes first: its
# copy is the window).  Binding the copy by the path again would put the
# user's bytes over root's file in the job (with a set-user-ID program
# that reads it, root); the bind goes only where the copy came from.
truncate -s 160M $HB/in/slow $HB/in/slow2 && chown alice: $HB/in/slow $HB/in/slow2
mkdir -p $GFS/apps && echo "the site's" >$GFS/apps/tool.conf && chmod 644 $GFS/apps/tool.conf
as_user alice sh -c "echo alice > $H/in/mine"
test_expect_success 'an input swapped for a symlink during its stage-in is not bound over the symlink'"'"'s target' '
    gfsemu_reset "$GFS" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-in=$H/in/slow,$H/in/mine \
        -o $OUT/swap.out -e $OUT/swap.err --wrap "cat $GFS/apps/tool.conf") &&
    wait_for 30 grep -q "\"total\":167772166" $CLUSTER/run/ns/n1/$id/stage.status &&
    as_user alice sh -c "mv $H/in/mine $H/in/mine.was && ln -s ../../../apps/tool.conf $H/in/mine" &&
    wait_for 60 job_done $id && cat $OUT/swap.err &&
    test "$(job_state $id)" = FAILED &&
    grep -q "stage-in: $H/in/mine now leads to $GFS/apps/tool.conf, and its copy was made from $H/in/mine (a symlink or a rename since): not bound" $OUT/swap.err &&
    ! grep -q alice $OUT/swap.out &&
    test "$(cat $GFS/apps/tool.conf)" = "the site'"'"'s"
'
test_expect_success 'an input replaced at its own path is bound there' '
    rm -f $H/in/mine && as_user alice sh -c "echo alice > $H/in/mine" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-stage-in=$H/in/slow2,$H/in/mine \
        -o $OUT/swap.out -e $OUT/swap.err --wrap "cat $H/in/mine") &&
    wait_for 30 grep -q "\"total\":167772166" $CLUSTER/run/ns/n1/$id/stage.status &&
    as_user alice sh -c "echo other > $H/in/mine.new && mv $H/in/mine.new $H/in/mine" &&
    wait_for 60 job_done $id && cat $OUT/swap.err &&
    test "$(job_state $id)" = COMPLETED && test "$(cat $OUT/swap.out)" = alice
'
test_expect_success 'no node was drained' 'no_drain'
test_done
