#!/bin/bash
test_description='ENOSPC on the tiers: a burst buffer and an NVDIMM tier that fill up'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

# The BB is a 48 MiB tmpfs and n1's NVDIMM tier a 24 MiB one, mounted
# before any agent starts; UserBandwidth (8 MiB/s) makes each copy last
# long enough to fill the tier under it.  Whatever fills up: correct data
# or a clear error naming the file and the job, nothing half-written
# left in a tier, an agent that keeps serving, no drained node.
test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster (BB: 48 MiB tmpfs; n1 NVDIMM: 24 MiB tmpfs)' '
    cluster_start &&
    NV=$(cat $CLUSTER/run/nvdimm.path) &&
    test_at_exit "umount -l $CLUSTER/bb; umount -l $NV/n1" &&
    mount -t tmpfs -o size=48M,nr_inodes=4096,mode=700 tier-bb $CLUSTER/bb &&
    mkdir -p $NV/n1 && mount -t tmpfs -o size=24M,mode=700 tier-nv $NV/n1 &&
    echo "UserBandwidth = 8M" >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
NV=$(cat $CLUSTER/run/nvdimm.path)
H=$GFS/home/alice
HB=$GFS-backing/home/alice
BH=$GFS/home/bob
DB=$H/db
OUT=$H/out
BB=$CLUSTER/bb
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
alice_uid=$(id -u alice)
alice () { (cd $H && as_user alice "$@"); }
sum_of () { sha256sum <"$1" | cut -d" " -f1; }
# ping_all: every agent that runs answers (the plugin starts them with
# the first job on their node)
ping_all () {
    for n in n1 n2 n3; do
        [ -s $CLUSTER/state/$n/tierd.pid ] &&
            kill -0 "$(cat $CLUSTER/state/$n/tierd.pid)" 2>/dev/null || continue
        alice $TIERCTL -N $n ping >/dev/null || { echo "$n: no answer"; return 1; }
    done
}
# bob_ok: bob's own job on n1 runs and its stage-out arrives meanwhile
bob_ok () {
    _b=$(sbatch_wait bob -w n1 --tier-stage-out=$BH/out -o /dev/null \
        --wrap "echo $1 > $BH/out/$1.txt") &&
        test "$(job_state $_b)" = COMPLETED && test "$(cat $BH/out/$1.txt)" = $1
}
avail () { df -B1 --output=avail "$1" | tail -1 | tr -d " "; }
# fill DIR FILE: take every free byte of DIR's file system
fill () { fallocate -l "$(avail "$1")" "$1/$2" || :; test "$(avail "$1")" -lt 65536; }
# the replica key of a GFS file: inode, size, mtime, ctime (ns)
key_of () {
    stat -c "%i %s %.9Y %.9Z" "$1" | awk '{
        split($3, m, "."); split($4, c, ".");
        printf "%x-%x-%s.%s-%s.%s\n", $1, $2, m[1], m[2], c[1], c[2] }'
}
replica_of () { test -f $BB/replicas/u$alice_uid/$(key_of "$1"); }
# nothing half-made in the BB: no part file, no lock
bb_clean () {
    test -z "$(find $BB -name "*.part" -o -name "*.lock" -o -name "*.tier-*")"
}
part_there () { test -n "$(find $BB/.tmp -type f -size +0 2>/dev/null)"; }
as_user alice mkdir -p $DB $OUT $H/in $H/o1 $H/o2 &&
    as_user bob mkdir -p $BH/out &&
    as_user alice sh -c "head -c 24M /dev/urandom > $DB/big; head -c 1M /dev/urandom > $DB/small;
        head -c 32M /dev/urandom > $H/in/huge; echo fits > $H/in/small.txt"

# ------------------------------------------------------------------- BB

test_expect_success 'the BB fills up during a fetch: the task reads the GFS, the log names the file and the job, no part file or lock is left' '
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-batch=$DB -o $OUT/a.out \
        --wrap "sha256sum $DB/big") &&
    wait_for 60 part_there && fill $BB filler &&
    wait_for 120 job_done $id && test "$(job_state $id)" = COMPLETED &&
    grep -q "^$(sum_of $DB/big) " $OUT/a.out &&
    grep "job $id: replica of $DB/big not made: .*No space left on device" $CLUSTER/log/tierd-n1.log &&
    ! replica_of $DB/big && bb_clean && ping_all && no_drain
'
test_expect_success 'with room again, the next job on the node makes the replica' '
    rm -f $BB/filler &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$DB -o $OUT/b.out --wrap "sha256sum $DB/big") &&
    grep -q "^$(sum_of $DB/big) " $OUT/b.out && replica_of $DB/big && bb_clean
'
no_inodes () { mount -o remount,nr_inodes=$(df --output=iused $BB | tail -1 | tr -d " ") $BB; }
test_expect_success 'no inode left on the BB: the fetch cannot create its files, the task reads the GFS, the log says why' '
    no_inodes &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$DB -o $OUT/c.out --wrap "sha256sum $DB/small") &&
    mount -o remount,nr_inodes=4096 $BB &&
    grep -q "^$(sum_of $DB/small) " $OUT/c.out &&
    grep "job $id: replica of $DB/small not made: .*No space left on device" $CLUSTER/log/tierd-n1.log &&
    ! replica_of $DB/small && bb_clean && ping_all && no_drain
'
# n2's agent starts (with its node's first job) on a BB without inodes:
# its cache is off, and on again once the BB has room.
cache_on_n2 () { grep -q "replica cache in $BB (enabled again)" $CLUSTER/log/tierd-n2.log; }
test_expect_success 'an agent that starts on a full BB: the task reads the GFS; once there is room, the cache is enabled again' '
    no_inodes &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o $OUT/c2.out --wrap "sha256sum $DB/small") &&
    grep -q "^$(sum_of $DB/small) " $OUT/c2.out &&
    grep "replica cache disabled: .*No space left on device (tried again every 10 s)" $CLUSTER/log/tierd-n2.log &&
    ! cache_on_n2 && mount -o remount,nr_inodes=4096 $BB &&
    wait_for 30 cache_on_n2 &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o $OUT/c3.out --wrap "sha256sum $DB/small") &&
    grep -q "^$(sum_of $DB/small) " $OUT/c3.out && replica_of $DB/small && bb_clean
'

# --------------------------------------------------------------- NVDIMM

test_expect_success 'a stage-in larger than the NVDIMM tier: the job fails naming the file, the tier is emptied again' '
    id=$(sbatch_wait alice -w n1 --tier-stage-in=$H/in/huge -o /dev/null -e $OUT/d.err --wrap "cat $H/in/huge >/dev/null") &&
    test "$(job_state $id)" = FAILED &&
    grep "tier: stage-in failed: $H/in/huge: .*No space left on device" $OUT/d.err &&
    wait_for 30 test -z "$(ls -A $NV/n1/$id 2>/dev/null)" &&
    test "$(avail $NV/n1)" -gt $((20 << 20)) && ping_all && no_drain
'
test_expect_success 'then a stage-in that fits works on that node' '
    id=$(sbatch_wait alice -w n1 --tier-stage-in=$H/in/small.txt -o $OUT/e.out --wrap "cat $H/in/small.txt") &&
    test "$(job_state $id)" = COMPLETED && test "$(cat $OUT/e.out)" = fits
'
# The application writes past the write cache: its write fails with
# ENOSPC, as on any full file system; what it closed before arrives.
test_expect_success 'an output larger than the write cache: the write fails with ENOSPC, the closed outputs arrive, the cache is emptied' '
    id=$(sbatch_wait alice -w n1 --tier-stage-out=$H/o1 -o $OUT/f.out -e $OUT/f.err --wrap "
        echo first > $H/o1/first.txt
        if head -c 32M /dev/urandom > $H/o1/big.bin; then echo wrote; else echo failed; fi") &&
    test "$(job_state $id)" = COMPLETED && test "$(cat $OUT/f.out)" = failed &&
    grep -q "No space left on device" $OUT/f.err &&
    test "$(cat $HB/o1/first.txt)" = first &&
    wait_for 60 test -z "$(ls -A $NV/n1/.outbox 2>/dev/null)" &&
    test "$(avail $NV/n1)" -gt $((20 << 20)) && bob_ok f && ping_all && no_drain
'
# A full tier at job start: the output directory is the plain GFS for
# this job (a write cache would only give ENOSPC at the first write).
test_expect_success 'a full NVDIMM tier at job start: the job writes its output directory on the GFS directly, with a warning' '
    fill $NV/n1 filler &&
    id=$(sbatch_wait alice -w n1 --tier-stage-out=$H/o2 -o $OUT/g.out -e $OUT/g.err --wrap "
        echo second > $H/o2/second.txt && srun -n1 true") &&
    rm -f $NV/n1/filler &&
    test "$(job_state $id)" = COMPLETED &&
    test "$(cat $HB/o2/second.txt)" = second &&
    grep "tier: warning: --tier-stage-out: $H/o2: the node.s write cache is full (.* KiB free in $NV/n1): the job writes to the GFS directly" $OUT/g.err &&
    test "$(grep -c "write cache is full" $OUT/g.err)" = 2 &&
    test -z "$(find $NV/n1/.outbox -type f -path "*/upper/*" 2>/dev/null)" &&
    bob_ok g && ping_all && no_drain
'
test_expect_success 'no node was drained' 'no_drain'
test_done
