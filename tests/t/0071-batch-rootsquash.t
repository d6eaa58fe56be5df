#!/bin/bash
test_description='batch replicas on a root-squashing GFS: made from the user'"'"'s own descriptors'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start a cluster whose GFS squashes root' '
    cluster_start --gfs-opts root_squash && test "$(cat $CLUSTER/run/gfs.mode)" = gfsemu
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
DB=$H/private/db
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
as_user alice mkdir -m 700 $H/private && as_user alice mkdir -m 700 $DB
as_user alice sh -c "head -c 16M /dev/urandom > $DB/data && chmod 600 $DB/data"
as_user alice cp "$(command -v busybox)" $DB/busybox
SUM=$(sha256sum <$GFS-backing/home/alice/private/db/data | cut -d" " -f1)
# the batch's counters added over the nodes' agents (the shared state
# directory, where tierctl stats reads, is not writable by root here)
batch_ctr () {
    for n in n1 n2 n3; do
        (cd $H && as_user alice $TIERCTL -N $n counters --batch "$1" --json 2>/dev/null)
    done | python3 -c "
import json,sys
dec=json.JSONDecoder(); text=sys.stdin.read(); i=0; total=0
while i < len(text):
    if text[i].isspace(): i += 1; continue
    o, i = dec.raw_decode(text, i)
    total += o[\"counters\"][\"batch\"][sys.argv[1]]
print(total)" "$2"
}

test_expect_success 'root cannot read alice'"'"'s 0600 file in her 0700 directories' '
    ! cat $DB/data >/dev/null 2>&1
'
test_expect_success 'a 4-task array: one copy from alice'"'"'s descriptor, three hits, right bytes' '
    gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice --array=1-4 --tier-batch=$DB -o $H/r-%a.out --wrap "sha256sum $DB/data") &&
    test "$(job_state $id)" = COMPLETED &&
    for i in 1 2 3 4; do grep -q "^$SUM " $H/r-$i.out || exit 1; done &&
    test "$(gfsemu_stat "$GFS" home/alice/private/db/data read_bytes)" = 16777216 &&
    sleep 3 && test "$(batch_ctr $id misses)" = 1 && test "$(batch_ctr $id hits)" = 3
'
test_expect_success 'tierctl prefetch --bind works there too: the mirror is bound, a static binary reads it' '
    (cd $H && as_user alice srun -w n1 --tier-batch=$DB $TIERCTL -N n1 prefetch --bind $DB) && gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o $H/e.out -e $H/e.err --wrap "$DB/busybox sha256sum $DB/data") &&
    cat $H/e.out $H/e.err && grep -q "^$SUM " $H/e.out &&
    test "$(gfsemu_stat "$GFS" home/alice/private/db/data read_bytes)" = 0
'
test_expect_success 'no node was drained' '! sinfo -h -R | grep .'
test_done
