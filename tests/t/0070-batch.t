#!/bin/bash
test_description='batch-shared inputs: the read-only BB replica cache, filled once per batch'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
# the GFS is capped so that a copy takes long enough to be interrupted;
# the BB is a 1 GiB tmpfs of its own (mounted before any agent starts),
# so that its free space moves only with what this test does
test_expect_success 'start the cluster (GFS capped at 100 MiB/s, BB on a 1 GiB tmpfs)' '
    test_at_exit "umount -l $TRASH/${CLUSTER_NAME:-cluster}/bb" &&
    cluster_start --gfs-opts bandwidth=100M &&
    mount -t tmpfs -o size=1G,mode=700 tier-bb $CLUSTER/bb &&
    echo "BBLockStale = 3s" >>$CLUSTER/etc/tier.conf
'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
DB=$H/db
OUT=$H/out
BB=$CLUSTER/bb
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
RAW="python3 $TIER_SRCDIR/tests/lib/rawclient.py"
as_user alice mkdir -p "$DB" "$OUT"
as_user alice sh -c "head -c 64M /dev/urandom > $DB/big"
SUM=$(sha256sum <$GFS-backing/home/alice/db/big | cut -d" " -f1)
alice_uid=$(id -u alice)

# the replica key of a GFS file: inode, size, mtime, ctime (ns)
key_of () {
    stat -c "%i %s %.9Y %.9Z" "$1" | awk '{
        split($3, m, "."); split($4, c, ".");
        printf "%x-%x-%s.%s-%s.%s\n", $1, $2, m[1], m[2], c[1], c[2] }'
}
# batch_ctr ID COUNTER: a counter of the batch role, over all nodes
batch_ctr () {
    (cd $H && as_user alice $TIERCTL stats --batch "$1" --json) |
        python3 -c "import json,sys; print(json.load(sys.stdin)[\"roles\"][\"batch\"][sys.argv[1]])" "$2"
}
# wait until every node has published the batch's final counters
stats_settle () { sleep 3; }
# agent_reload NODE: SIGHUP its agent, wait until it has reread tier.conf
reloads () { grep -c "reloaded" $CLUSTER/log/tierd-$1.log || :; }
agent_reload () {
    _n=$(reloads $1) && kill -HUP $(cat $CLUSTER/state/$1/tierd.pid) &&
        wait_for 10 eval "test \$(reloads $1) -gt $_n"
}
# conf_set KEY [VALUE]: set KEY in tier.conf, or remove it
conf_set () {
    sed -i "/^$1 = /d" $CLUSTER/etc/tier.conf &&
        if [ -n "${2:-}" ]; then echo "$1 = $2" >>$CLUSTER/etc/tier.conf; fi
}

# cat_fortify_*: built as distributions build programs (-O2
# -D_FORTIFY_SOURCE=2), so that glibc sends their opens to __open_2 and
# its siblings; nm shows that it does.
test_expect_success 'build the C and C++ readers (stdio fopen, std::ifstream, fortified open)' '
    for k in 0:open:__open_2 1:open64:__open64_2 2:openat:__openat_2 3:openat64:__openat64_2; do
        gcc -O2 -D_FORTIFY_SOURCE=2 -DOPEN_KIND=${k%%:*} -o $TRASH/cat_fortify_$(echo $k | cut -d: -f2) \
            $TIER_SRCDIR/tests/readers/cat_fortify.c &&
        nm -u $TRASH/cat_fortify_$(echo $k | cut -d: -f2) | grep -q " ${k##*:}@" || exit 1
    done &&
    gcc -O2 -pthread -o $TRASH/opener $TIER_SRCDIR/tests/readers/opener.c &&
    gcc -O2 -o $TRASH/cat_fopen $TIER_SRCDIR/tests/readers/cat_fopen.c &&
    gcc -O2 -o $TRASH/cat_paths $TIER_SRCDIR/tests/readers/cat_paths.c &&
    g++ -O2 -o $TRASH/cat_ifstream $TIER_SRCDIR/tests/readers/cat_ifstream.cc &&
    cp $TIER_SRCDIR/tests/readers/cat_openat.py $TRASH/ && chmod 755 $TRASH/*
'

# Each task reads the shared file once, with a different reader; with
# ORDERED=1 in turn (each waits for the one before), so that no two reads
# overlap and share the emulator's page cache.
cat >"$H/read.sh" <<EOF2
#!/bin/bash
i=\$SLURM_ARRAY_TASK_ID
if [ "\${ORDERED:-0}" = 1 ] && [ \$i -gt 1 ]; then
    while [ ! -e $OUT/sum-\$((i - 1)) ]; do sleep 0.1; done
fi
case \$((i % 5)) in
    0) cat \$1 ;;
    1) python3 $TRASH/cat_openat.py \$(dirname \$1) \$(basename \$1) ;;
    2) $TRASH/cat_fopen \$1 ;;
    3) $TRASH/cat_ifstream \$1 ;;
    4) cd \$(dirname \$1) && cat ./\$(basename \$1) ;;
esac | sha256sum | cut -d" " -f1 > $OUT/sum-\$i.tmp
mv $OUT/sum-\$i.tmp $OUT/sum-\$i
echo \$SLURMD_NODENAME > $OUT/node-\$i
EOF2
chmod 755 "$H/read.sh"; chown alice "$H/read.sh"

# The control run reads 12 x 64 MiB, give or take a page the kernel reads
# twice now and then (seen in CI: 3 pages over 12 opens); the tiered runs
# below must count the file exactly once.
test_expect_success 'control run (--tier-cache=off): 12 tasks in turn read the file 12 times from the GFS' '
    gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice --export=ALL,ORDERED=1 --array=1-12 --tier-cache=off -o /dev/null "$H/read.sh" $DB/big) &&
    test "$(job_state $id)" = COMPLETED &&
    b=$(gfsemu_stat "$GFS" home/alice/db/big read_bytes) && echo "read $b" &&
    test "$b" -ge $((12 * 67108864)) && test "$b" -lt $((12 * 67108864 + 1048576)) &&
    rm -f $OUT/sum-*
'
test_expect_success 'the same 12 tasks with --tier-batch, on three nodes: the GFS serves the file once' '
    gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice --export=ALL,ORDERED=1 --array=1-12 --tier-batch=$DB -o $OUT/r-%a.out -e $OUT/r-%a.err \
        "$H/read.sh" $DB/big) &&
    test "$(job_state $id)" = COMPLETED && echo $id >$TRASH/id &&
    b=$(gfsemu_stat "$GFS" home/alice/db/big read_bytes) && echo "read $b" &&
    test "$b" = 67108864 &&
    test "$(cat $OUT/node-* | sort -u | wc -l)" = 3
'
test_expect_success 'every task read the right bytes, with cat, Python (openat), fopen, ifstream and a relative path' '
    for i in $(seq 12); do test "$(cat $OUT/sum-$i)" = "$SUM" || { echo "task $i"; exit 1; }; done
'
test_expect_success 'the counters say 1 miss and 11 hits, 64 MiB read from the GFS' '
    stats_settle && id=$(cat $TRASH/id) &&
    test "$(batch_ctr $id misses)" = 1 && test "$(batch_ctr $id hits)" = 11 &&
    test "$(batch_ctr $id fallthroughs)" = 0 &&
    test "$(batch_ctr $id gfs_bytes_read)" = 67108864 &&
    test "$(batch_ctr $id gfs_bytes_avoided)" = $((11 * 67108864))
'
test_expect_success '12 tasks reading a cold file at once, across nodes: still one copy' '
    as_user alice sh -c "head -c 64M /dev/urandom > $DB/big2" && gfsemu_reset "$GFS" &&
    s2=$(sha256sum <$GFS-backing/home/alice/db/big2 | cut -d" " -f1) && rm -f $OUT/sum-* &&
    id=$(sbatch_wait alice --array=1-12 --tier-batch=$DB -o /dev/null "$H/read.sh" $DB/big2) &&
    test "$(job_state $id)" = COMPLETED &&
    for i in $(seq 12); do test "$(cat $OUT/sum-$i)" = "$s2" || exit 1; done &&
    b=$(gfsemu_stat "$GFS" home/alice/db/big2 read_bytes) && echo "read $b" && test "$b" = 67108864 &&
    stats_settle && test "$(batch_ctr $id misses)" = 1 && test "$(batch_ctr $id hits)" = 11 &&
    test "$(batch_ctr $id gfs_bytes_read)" = "$b"
'
test_expect_success 'the replica is a root-owned read-only file that only root opens by name' '
    k=$(key_of $DB/big) && f=$BB/replicas/u$alice_uid/$k && ls -l $f &&
    test "$(stat -c "%U %a" $f)" = "root 444" &&
    test "$(stat -c "%U %a" $BB/replicas/u$alice_uid)" = "root 700" &&
    test "$(stat -c "%U %a" $BB/replicas)" = "root 700" &&
    ! getfacl -cp $BB/replicas/u$alice_uid | grep -q "^user:[a-z]" &&
    test "$(sha256sum <$f | cut -d" " -f1)" = "$SUM" &&
    ! as_user alice cat $f >/dev/null 2>$TRASH/byname && cat $TRASH/byname &&
    grep -q "Permission denied" $TRASH/byname
'
test_expect_success 'access to a source revoked: its user reads no replica of it afterwards, by any way' '
    mkdir -p $GFS-backing/pub/rv && echo revoked-data >$GFS-backing/pub/rv/f &&
    chmod 755 $GFS-backing/pub/rv && chmod 644 $GFS-backing/pub/rv/f &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$GFS/pub/rv -o $OUT/rv1.out --wrap "cat $GFS/pub/rv/f") &&
    grep -qx revoked-data $OUT/rv1.out &&
    k=$(key_of $GFS/pub/rv/f) && f=$BB/replicas/u$alice_uid/$k && test -f $f &&
    chmod 600 $GFS-backing/pub/rv/f &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$GFS/pub/rv -o $OUT/rv2.out         --wrap "cat $GFS/pub/rv/f; cat $f; ls $BB/replicas/u$alice_uid; true") &&
    cat $OUT/rv2.out && ! grep -q revoked-data $OUT/rv2.out &&
    test "$(grep -c "Permission denied" $OUT/rv2.out)" = 3 &&
    test -f $f
'

test_expect_success 'a directory policy does the same without any option' '
    (cd $H && as_user alice $TIERCTL set policy $DB batch) &&
    id=$(sbatch_wait alice --array=1-3 --tier-cache=auto -o /dev/null "$H/read.sh" $DB/big) &&
    test "$(job_state $id)" = COMPLETED && stats_settle &&
    test "$(batch_ctr $id hits)" = 3 && test "$(batch_ctr $id misses)" = 0
'

test_expect_success 'none inside a batch directory: read from the GFS, never cached' '
    as_user alice mkdir -p $DB/nc && as_user alice sh -c "head -c 1M /dev/urandom > $DB/nc/f" &&
    (cd $H && as_user alice $TIERCTL set policy $DB/nc none) && gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o $OUT/nc.out \
        --wrap "cat $DB/nc/f >/dev/null; sha256sum $DB/nc/f; cat $DB/big >/dev/null") &&
    grep -q "^$(sha256sum <$GFS-backing/home/alice/db/nc/f | cut -d" " -f1) " $OUT/nc.out &&
    test ! -e $BB/replicas/u$alice_uid/$(key_of $DB/nc/f) &&
    test "$(gfsemu_stat "$GFS" home/alice/db/nc/f read_bytes)" = $((2 * 1048576)) &&
    test "$(gfsemu_stat "$GFS" home/alice/db/big read_bytes)" = 0 &&
    stats_settle && test "$(batch_ctr $id hits)" = 1 && test "$(batch_ctr $id misses)" = 0 &&
    (cd $H && as_user alice $TIERCTL unset policy $DB/nc)
'

test_expect_success '16 processes opening a cold file behind a barrier cause one copy' '
    as_user alice sh -c "head -c 32M /dev/urandom > $DB/cold" && gfsemu_reset "$GFS" &&
    cat >$H/barrier.sh <<EOF2 &&
#!/bin/bash
for p in \$(seq 16); do
    ( while [ ! -e $OUT/go ]; do sleep 0.05; done; sha256sum $DB/cold | cut -d" " -f1 > $OUT/cold-\$p ) &
done
sleep 1; touch $OUT/go; wait
EOF2
    chmod 755 $H/barrier.sh && chown alice $H/barrier.sh &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o /dev/null $H/barrier.sh) &&
    test "$(job_state $id)" = COMPLETED &&
    test "$(cat $OUT/cold-* | sort -u)" = "$(sha256sum <$GFS-backing/home/alice/db/cold | cut -d" " -f1)" &&
    test "$(ls $OUT/cold-* | wc -l)" = 16 &&
    b=$(gfsemu_stat "$GFS" home/alice/db/cold read_bytes) && echo "read $b" && test "$b" = 33554432 &&
    stats_settle && test "$(batch_ctr $id misses)" = 1 && test "$(batch_ctr $id hits)" = 15
'

test_expect_success 'a fresh lock planted "from n2": n1 waits for it and serves n2'"'"'s replica' '
    as_user alice sh -c "head -c 8M /dev/urandom > $DB/locked" && gfsemu_reset "$GFS" &&
    k=$(key_of $DB/locked) && d=$BB/replicas/u$alice_uid &&
    echo "node=n2 boot=other pid=1 start=1" >$d/$k.lock &&
    { ( for s in 1 2 3 4 5 6; do sleep 1; touch $d/$k.lock; done;
        cp $GFS-backing/home/alice/db/locked $d/.x && chmod 444 $d/.x && mv $d/.x $d/$k && rm -f $d/$k.lock ) & } &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$DB -o $OUT/l.out --wrap "sha256sum $DB/locked") && wait &&
    test "$(job_state $id)" = COMPLETED &&
    grep -q "$(sha256sum <$GFS-backing/home/alice/db/locked | cut -d" " -f1)" $OUT/l.out &&
    stats_settle && r=$(gfsemu_stat "$GFS" home/alice/db/locked read_bytes) &&
    h=$(batch_ctr $id hits) && m=$(batch_ctr $id misses) &&
    echo "GFS read $r, hits $h, misses $m" && grep "locked" $CLUSTER/log/tierd-n1.log;
    test "$r" = 0 && test "$h" = 1 && test "$m" = 0
'
test_expect_success 'a stale lock (its heartbeat stopped) is broken and the file copied' '
    as_user alice sh -c "head -c 8M /dev/urandom > $DB/stale" && gfsemu_reset "$GFS" &&
    k=$(key_of $DB/stale) && d=$BB/replicas/u$alice_uid &&
    echo "node=n2 boot=other pid=1 start=1" >$d/$k.lock &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$DB -o $OUT/s.out --wrap "sha256sum $DB/stale") &&
    test "$(job_state $id)" = COMPLETED &&
    grep -q "$(sha256sum <$GFS-backing/home/alice/db/stale | cut -d" " -f1)" $OUT/s.out &&
    test ! -e $d/$k.lock && test -f $d/$k &&
    test "$(gfsemu_stat "$GFS" home/alice/db/stale read_bytes)" = 8388608 &&
    stats_settle && test "$(batch_ctr $id misses)" = 1
'

# versioned blocks: every 4 KiB block starts with the version
cat >$TRASH/stamp.py <<'EOF2'
import os, sys
path, version = sys.argv[1], sys.argv[2].encode()
block = (version * 4096)[:4096]
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(2048):
    os.pwrite(fd, block, i * 4096)
os.close(fd)
EOF2
cat >$TRASH/check.py <<'EOF2'
import sys
seen = set()
with open(sys.argv[1], "rb") as f:
    while True:
        b = f.read(4096)
        if not b:
            break
        seen.add(b[:2])
print(",".join(sorted(x.decode() for x in seen)))
EOF2
chmod 644 $TRASH/*.py
# rewrite_mid_batch FILE RESTORE: 4 tasks read FILE (v1); after the
# first two have read it, it is rewritten in place (v2), its mtime put
# back if RESTORE=1; the last two and a later job must read v2, and no
# task a mix.
rewrite_mid_batch () {
    _f=$1 && as_user alice python3 $TRASH/stamp.py $_f v1 &&
    _m=$(stat -c %.9Y $_f) && rm -f $OUT/rewritten $OUT/ver-* &&
    cat >$H/ver.sh <<EOF2 &&
#!/bin/bash
i=\$SLURM_ARRAY_TASK_ID
if [ \$i -gt 2 ]; then while [ ! -e $OUT/rewritten ]; do sleep 0.2; done; fi
python3 $TRASH/check.py $_f > $OUT/ver-\$i
EOF2
    chmod 755 $H/ver.sh && chown alice $H/ver.sh &&
    _id=$(cd $H && as_user alice sbatch --parsable --array=1-4 --tier-batch=$DB -o /dev/null $H/ver.sh) &&
    wait_for 60 test -s $OUT/ver-1 && wait_for 60 test -s $OUT/ver-2 &&
    as_user alice python3 $TRASH/stamp.py $_f v2 &&
    if [ "$2" = 1 ]; then
        as_user alice touch -d "@$_m" $_f && test "$(stat -c %.9Y $_f)" = "$_m"
    else
        test "$(stat -c %.9Y $_f)" != "$_m"
    fi &&
    touch $OUT/rewritten && wait_for 60 job_done $_id && test "$(job_state $_id)" = COMPLETED &&
    cat $OUT/ver-* &&
    test "$(cat $OUT/ver-1)" = v1 && test "$(cat $OUT/ver-2)" = v1 &&
    test "$(cat $OUT/ver-3)" = v2 && test "$(cat $OUT/ver-4)" = v2 &&
    _id=$(sbatch_wait alice --tier-batch=$DB -o $OUT/later.out --wrap "python3 $TRASH/check.py $_f") &&
    test "$(cat $OUT/later.out)" = v2
}
test_expect_success 'a source rewritten in place mid-batch (mtime restored): no task reads a mix; later tasks and jobs read the new one' '
    rewrite_mid_batch $DB/versioned 1
'
test_expect_success 'the same without restoring the mtime' '
    rewrite_mid_batch $DB/versioned2 0
'

# The replica key is the source's version when the open asked; the copy
# may start much later (queued behind GfsStreams, or waiting for another
# node's lock).  Here the only stream waits for a planted lock while the
# second file's request is queued and the file is rewritten in place.
replicas_field () {
    (cd $H && as_user alice $TIERCTL -N "$1" status --json) |
        python3 -c "import json,sys; print(json.load(sys.stdin)[\"replicas\"][sys.argv[1]])" "$2"
}
replicas_is () { test "$(replicas_field "$1" "$2")" = "$3"; }
test_expect_success 'a source rewritten while its copy is queued: the old key gets no replica of the new bytes' '
    conf_set GfsStreams 1 && agent_reload n1 &&
    as_user alice sh -c "head -c 1M /dev/urandom > $DB/hold" &&
    as_user alice python3 $TRASH/stamp.py $DB/queued v1 &&
    d=$BB/replicas/u$alice_uid && kh=$(key_of $DB/hold) && kq=$(key_of $DB/queued) &&
    echo "node=n2 boot=other pid=1 start=1" >$d/$kh.lock && rm -f $TRASH/release &&
    { ( for s in $(seq 240); do [ -e $TRASH/release ] && break; touch $d/$kh.lock; sleep 0.5; done
        rm -f $d/$kh.lock ) & } &&
    a=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-batch=$DB -o /dev/null --wrap "cat $DB/hold") &&
    wait_for 60 replicas_is n1 fetching 1 &&
    b=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-batch=$DB -o $OUT/queued.out \
        --wrap "python3 $TRASH/check.py $DB/queued") &&
    wait_for 60 replicas_is n1 queued 1 &&
    as_user alice python3 $TRASH/stamp.py $DB/queued v2 && test "$(key_of $DB/queued)" != "$kq" &&
    touch $TRASH/release && wait && wait_for 60 job_done $a && wait_for 60 job_done $b &&
    cat $OUT/queued.out && test "$(cat $OUT/queued.out)" = v2 &&
    test ! -e $d/$kq &&
    grep -q "replica of $DB/queued not made: the source changed since it was opened" $CLUSTER/log/tierd-n1.log &&
    conf_set GfsStreams && agent_reload n1
'

# The fetcher reads the task's own descriptor with O_DIRECT: when the
# agent dies mid-copy the task must not be left with that flag (its
# unaligned reads would fail with EINVAL on ext4, XFS or Lustre).
test_expect_success 'kill -9 of the agent mid-copy: no partial replica is served, the task'"'"'s descriptor has no O_DIRECT; the next open completes' '
    as_user alice sh -c "head -c 256M /dev/urandom > $DB/killed" && gfsemu_reset "$GFS" &&
    ksum=$(sha256sum <$GFS-backing/home/alice/db/killed | cut -d" " -f1) &&
    khash=$(cd $GFS-backing/home/alice/db && $TRASH/cat_paths killed | cut -d" " -f2-) &&
    k=$(key_of $DB/killed) &&
    id=$(cd $H && as_user alice sbatch --parsable -w n3 --tier-batch=$DB -o $OUT/k1.out --wrap "$TRASH/cat_paths -f $DB/killed") &&
    wait_for 30 sh -c "ls -a $BB/.tmp/n3 | grep -q part" &&
    pid=$(cat $CLUSTER/state/n3/tierd.pid) && kill -9 $pid &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED && cat $OUT/k1.out &&
    grep -qx "$DB/killed: O_DIRECT clear" $OUT/k1.out && grep -qx "$DB/killed: $khash" $OUT/k1.out &&
    if [ -e $BB/replicas/u$alice_uid/$k ]; then
        test "$(sha256sum <$BB/replicas/u$alice_uid/$k | cut -d" " -f1)" = $ksum
    fi &&
    id=$(sbatch_wait alice -w n3 --tier-batch=$DB -o $OUT/k2.out --wrap "sha256sum $DB/killed") &&
    test "$(job_state $id)" = COMPLETED && grep -q $ksum $OUT/k2.out &&
    test "$(sha256sum <$BB/replicas/u$alice_uid/$k | cut -d" " -f1)" = $ksum &&
    test -z "$(ls -A $BB/.tmp/n3)"
'

test_expect_success 'bob, on the same node at the same time, cannot list, stat or open alice'"'"'s replicas' '
    as_user alice mkdir -m 700 $H/private && as_user alice mkdir $H/private/db &&
    as_user alice sh -c "echo secret-data > $H/private/db/s && chmod 600 $H/private/db/s" &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-batch=$H/private/db -o $OUT/p.out \
        --wrap "cat $H/private/db/s; sleep 8") &&
    wait_for 30 grep -q secret-data $OUT/p.out &&
    k=$(key_of $H/private/db/s) && d=$BB/replicas/u$alice_uid && test -f $d/$k &&
    bid=$(cd $GFS/home/bob && as_user bob sbatch --parsable -w n1 -o $GFS/home/bob/probe.out \
        --wrap "ls $d; stat $d/$k; cat $d/$k; cat $BB/replicas/*/*") &&
    wait_for 60 job_done $bid && wait_for 60 job_done $id &&
    cat $GFS/home/bob/probe.out &&
    ! grep -q secret-data $GFS/home/bob/probe.out &&
    test "$(grep -c "Permission denied" $GFS/home/bob/probe.out)" -ge 3
'
test_expect_success 'a descriptor of another file, claimed as alice'"'"'s path, is refused' '
    as_user bob sh -c "echo bob > $GFS/home/bob/mine" &&
    (cd $GFS/home/bob && as_user bob srun -w n1 --tier-cache=auto $RAW $CLUSTER/run/tier/n1/tierd.sock fd \
        $GFS/home/bob/mine "{\"op\":\"replica.open\",\"path\":\"$DB/big\"}") >$TRASH/claim 2>&1;
    cat $TRASH/claim && grep -q "the descriptor is not $DB/big" $TRASH/claim
'
test_expect_success 'a symlink in a batch directory leading out is read as the user, never cached' '
    as_user alice ln -sfn /etc/passwd $DB/pw && as_user alice ln -sfn /etc/shadow $DB/shadow &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o $OUT/sym.out -e $OUT/sym.err \
        --wrap "md5sum $DB/pw; cat $DB/shadow") &&
    grep -q "$(md5sum </etc/passwd | cut -d" " -f1)" $OUT/sym.out &&
    grep -q "Permission denied" $OUT/sym.err &&
    ! grep -rl "^root:" $BB/replicas/ && stats_settle &&
    test "$(batch_ctr $id hits)" = 0 && test "$(batch_ctr $id misses)" = 0
'
test_expect_success 'a symlink planted in the BB does not make the agent write outside it' '
    bob_uid=$(id -u bob) && mkdir -p $TRASH/elsewhere &&
    rm -rf $BB/replicas/u$bob_uid && ln -s $TRASH/elsewhere $BB/replicas/u$bob_uid &&
    as_user bob mkdir -p $GFS/home/bob/db && as_user bob sh -c "echo b > $GFS/home/bob/db/f" &&
    id=$(sbatch_wait bob -w n2 --tier-batch=$GFS/home/bob/db -o $GFS/home/bob/sl.out --wrap "cat $GFS/home/bob/db/f") &&
    test "$(job_state $id)" = COMPLETED && grep -qx b $GFS/home/bob/sl.out &&
    test -z "$(ls -A $TRASH/elsewhere)" && test -L $BB/replicas/u$bob_uid &&
    rm $BB/replicas/u$bob_uid
'

test_expect_success 'a static binary reads the GFS directly and gets the same bytes' '
    bb=$(command -v busybox) && gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$DB -o $OUT/static.out --wrap "$bb sha256sum $DB/big") &&
    grep -q $SUM $OUT/static.out &&
    test "$(gfsemu_stat "$GFS" home/alice/db/big read_bytes)" = 67108864
'

test_expect_success 'threads, fork and exec; open, openat, open64, fopen, freopen, freopen64: every open reads the file'"'"'s bytes; the process caches its decisions' '
    head -c 4096 $GFS-backing/home/alice/db/big >$TRASH/big.head &&
    first=$($TRASH/cat_paths $TRASH/big.head | cut -d" " -f2-) &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$DB -o $OUT/op.out -e $OUT/op.err --wrap "$TRASH/opener $DB/big 50 4") &&
    test "$(job_state $id)" = COMPLETED && cat $OUT/op.out && grep -qx "ok 602" $OUT/op.out &&
    grep -qx "first $first" $OUT/op.out &&
    stats_settle && h=$(batch_ctr $id hits) && m=$(batch_ctr $id gfs_meta_ops) &&
    echo "hits $h, GFS metadata operations $m" && test "$h" = 602 && test "$m" -le 24
'
# The process's cache is keyed by path: it may answer only for a path
# that names its file as the kernel resolves it.  s1/.. and s2/.. are
# not DB (the symlinks lead elsewhere), x/. and x/ are not a file.
test_expect_success 'once x is cached, ".." after a symlink, "x/." and "x/" still open what the kernel opens' '
    as_user alice sh -c "echo plain-x > $DB/x; mkdir -p $H/e1/d $H/e2/d; echo other-x > $H/e2/x" &&
    as_user alice ln -sfn $H/e1/d $DB/s1 && as_user alice ln -sfn $H/e2/d $DB/s2 &&
    args="$DB/x $DB/s1/../x $DB/s2/../x $DB/x/. $DB/x/ $DB/./x $DB//x x s1/../x s2/../x ./x x/ x/." &&
    (cd $DB && as_user alice $TRASH/cat_paths $args) >$TRASH/dd.want && cat $TRASH/dd.want &&
    grep -q "s1/../x: No such file" $TRASH/dd.want && grep -q "x/.: Not a directory" $TRASH/dd.want &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$DB -o $OUT/dd.out --wrap "cd $DB && $TRASH/cat_paths $args") &&
    diff $TRASH/dd.want $OUT/dd.out && stats_settle &&
    test "$(batch_ctr $id misses)" = 1 && test "$(batch_ctr $id hits)" = 4
'
test_expect_success 'programs built with _FORTIFY_SOURCE (__open_2, __open64_2, __openat_2, __openat64_2) are served replicas' '
    gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice -w n1 --tier-batch=$DB -o $OUT/fort.out \
        --wrap "for r in open open64 openat openat64; do $TRASH/cat_fortify_\$r $DB/big | sha256sum; done") &&
    cat $OUT/fort.out && test "$(grep -c "^$SUM " $OUT/fort.out)" = 4 &&
    test "$(gfsemu_stat "$GFS" home/alice/db/big read_bytes)" = 0 &&
    stats_settle && test "$(batch_ctr $id hits)" = 4 && test "$(batch_ctr $id fallthroughs)" = 0
'
test_expect_success 'revalidate 0: every open asks the agent (and opens the source)' '
    as_user alice mkdir -p $H/reval && as_user alice sh -c "echo r > $H/reval/f" &&
    (cd $H && as_user alice $TIERCTL set policy $H/reval batch --revalidate 0) &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o $OUT/rv.out --wrap "$TRASH/opener $H/reval/f 5 1") &&
    grep -qx "ok 17" $OUT/rv.out && stats_settle &&
    test "$(batch_ctr $id gfs_meta_ops)" = 17 && test "$(batch_ctr $id hits)" = 16
'

test_expect_success 'tierctl prefetch copies a tree before the batch; its first task hits' '
    as_user alice mkdir -p $DB/tree/sub &&
    as_user alice sh -c "head -c 1M /dev/urandom > $DB/tree/a; echo x > $DB/tree/sub/b" &&
    (cd $H && as_user alice $TIERCTL -N n3 prefetch $DB/tree) >$TRASH/pf && cat $TRASH/pf &&
    grep -q "2 files .* 2 copied" $TRASH/pf && gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice -w n3 --tier-batch=$DB -o /dev/null --wrap "cat $DB/tree/a $DB/tree/sub/b >/dev/null") &&
    test "$(gfsemu_stat "$GFS" home/alice/db/tree/a read_bytes)" = 0 &&
    stats_settle && test "$(batch_ctr $id hits)" = 2 && test "$(batch_ctr $id misses)" = 0 &&
    (cd $H && as_user alice $TIERCTL -N n3 replicas $DB/tree) | grep -q "$DB/tree/sub/b"
'
test_expect_success 'tierctl evict drops them; bob cannot evict alice'"'"'s' '
    (cd $GFS/home/bob && as_user bob $TIERCTL -N n3 evict $DB/tree) | grep -q "0 replicas" &&
    (cd $H && as_user alice $TIERCTL -N n3 evict $DB/tree) | grep -q "2 replicas" &&
    test ! -e $BB/replicas/u$alice_uid/$(key_of $DB/tree/a)
'
test_expect_success 'prefetch outside a batch directory is refused with the reason' '
    as_user alice sh -c "echo y > $H/notbatch" &&
    ! (cd $H && as_user alice $TIERCTL -N n3 prefetch $H/notbatch) 2>$TRASH/nb &&
    cat $TRASH/nb && grep -q "is not in a batch directory" $TRASH/nb
'
# A prefetch asks the agent once per file; each request follows the
# caller's policies, read as the user off the loop.  The requests of one
# tierctl prefetch share one read, so a tree of 20 files costs one read,
# not 20; the next prefetch reads them again, so a policy unset just
# before it counts.
test_expect_success 'prefetch of 20 files reads the policies once; unset policy applies to the next at once' '
    as_user alice mkdir -p $H/many &&
    for i in $(seq 1 20); do as_user alice sh -c "echo $i > $H/many/f$i" || exit 1; done &&
    (cd $H && as_user alice $TIERCTL -N n3 set policy $H/many batch) &&
    gfsemu_reset "$GFS" &&
    (cd $H && as_user alice $TIERCTL -N n3 prefetch $H/many) >$TRASH/many && cat $TRASH/many &&
    grep -q "20 files" $TRASH/many &&
    reads=$(gfsemu_stat "$GFS" .tier/users/alice/policies.json open) &&
    echo "policy reads for 20 prefetched files: $reads" && test "$reads" -ge 1 && test "$reads" -le 2 &&
    (cd $H && as_user alice $TIERCTL -N n3 unset policy $H/many) &&
    ! (cd $H && as_user alice $TIERCTL -N n3 prefetch $H/many/f1) 2>$TRASH/many2 &&
    cat $TRASH/many2 && grep -q "is not in a batch directory" $TRASH/many2
'
test_expect_success 'eager mode: prefetch --bind mirrors a directory; a later job gets it bound read-only' '
    as_user alice mkdir -p $H/tools/lib &&
    as_user alice cp "$(command -v busybox)" $H/tools/busybox &&
    as_user alice sh -c "head -c 4M /dev/urandom > $H/tools/lib/data; ln -s lib/data $H/tools/link" &&
    (cd $H && as_user alice $TIERCTL set policy $H/tools batch) &&
    (cd $H && as_user alice $TIERCTL -N n2 prefetch --bind $H/tools) >$TRASH/bind && cat $TRASH/bind &&
    grep -q "$H/tools: bound read-only into your jobs" $TRASH/bind && gfsemu_reset "$GFS" &&
    tsum=$(sha256sum <$GFS-backing/home/alice/tools/lib/data | cut -d" " -f1) &&
    id=$(sbatch_wait alice -w n3 --tier-cache=auto -o $OUT/eager.out -e $OUT/eager.err \
        --wrap "grep -c \" $H/tools ro,nosuid,nodev\" /proc/self/mountinfo; $H/tools/busybox sha256sum $H/tools/link; touch $H/tools/new") &&
    cat $OUT/eager.out $OUT/eager.err &&
    test "$(head -1 $OUT/eager.out)" = 1 && grep -q "^$tsum " $OUT/eager.out &&
    grep -q "Read-only file system" $OUT/eager.err &&
    test "$(gfsemu_stat "$GFS" home/alice/tools/lib/data read_bytes)" = 0 &&
    test "$(gfsemu_stat "$GFS" home/alice/tools/busybox read_bytes)" = 0
'
test_expect_success 'eager mode: a changed source is not bound; the job reads it through the interposer' '
    as_user alice sh -c "echo more >> $H/tools/lib/data" &&
    id=$(sbatch_wait alice -w n3 --tier-cache=auto -o $OUT/eager2.out \
        --wrap "grep -c \" $H/tools ro,\" /proc/self/mountinfo; sha256sum $H/tools/lib/data") &&
    cat $OUT/eager2.out && test "$(head -1 $OUT/eager2.out)" = 0 &&
    grep -q "$(sha256sum <$GFS-backing/home/alice/tools/lib/data | cut -d" " -f1)" $OUT/eager2.out &&
    grep -q "mirror .* dropped: its source changed" $CLUSTER/log/tierd-n3.log
'
test_have_prereq ROOT && command -v strace >/dev/null && test_set_prereq STRACE
# The agent walks the sources of a job's mirrors again at each job start
# (its mirror checker, off the loop): a GFS that does not answer those
# walks (n3's agent and its children are held for a minute on both
# directories by strace) holds the job's registration within the job
# start's 7 s for all of them together (one walk each would reach the
# plugin's 10 s AgentTimeout: a warning); the job runs through the
# interposer, and the mirrors stay for the next job.
test_expect_success STRACE 'eager mode: walks the GFS does not answer hold the job start 7 s at most' '
    as_user alice mkdir -p $H/tools2 && as_user alice sh -c "echo two > $H/tools2/f" &&
    (cd $H && as_user alice $TIERCTL set policy $H/tools2 batch) &&
    (cd $H && as_user alice $TIERCTL -N n2 prefetch --bind $H/tools $H/tools2) >$TRASH/bind2 && cat $TRASH/bind2 &&
    test "$(grep -c "bound read-only" $TRASH/bind2)" = 2 &&
    pid=$(cat $CLUSTER/state/n3/tierd.pid) &&
    { strace -f -qq -o /dev/null -p $pid -e trace=openat,getdents64 \
        -e inject=openat,getdents64:delay_enter=60000000 -P $H/tools -P $H/tools2 & } && st=$! &&
    wait_for 10 grep -q "^TracerPid:[[:space:]]*$st\$" /proc/$pid/status &&
    { id=$(sbatch_wait alice -w n3 --tier-cache=auto -o $OUT/eager3.out \
        --wrap "grep -c \" $H/tools2\? ro,\" /proc/self/mountinfo; sha256sum $H/tools/lib/data"); rc=$?
      kill $st; wait $st; test $rc = 0; } &&
    cat $OUT/eager3.out && test "$(head -1 $OUT/eager3.out)" = 0 && ! grep -q warning $OUT/eager3.out &&
    grep -q "$(sha256sum <$GFS-backing/home/alice/tools/lib/data | cut -d" " -f1)" $OUT/eager3.out &&
    grep "job $id: mirror $H/tools2\? not bound" $CLUSTER/log/tierd-n3.log >$TRASH/nb && cat $TRASH/nb &&
    test "$(grep -c "did not finish within the job start'"'"'s 7 s" $TRASH/nb)" = 1 &&
    test "$(grep -c "no time left to walk" $TRASH/nb)" = 1 &&
    id=$(sbatch_wait alice -w n3 --tier-cache=auto -o $OUT/eager4.out \
        --wrap "grep -c \" $H/tools2\? ro,\" /proc/self/mountinfo") &&
    test "$(head -1 $OUT/eager4.out)" = 2
'
test_expect_success 'share = world (site policy): one replica for every user of a world-readable file' '
    mkdir -p $GFS-backing/pub && chmod 755 $GFS-backing/pub &&
    head -c 2M /dev/urandom >$GFS-backing/pub/ref && chmod 644 $GFS-backing/pub/ref &&
    echo private >$GFS-backing/pub/own && chown alice $GFS-backing/pub/own && chmod 600 $GFS-backing/pub/own &&
    printf "{\"version\": 1, \"policies\": {\"%s\": {\"role\": \"batch\", \"share\": \"world\"}}}\n" \
        "$GFS/pub" >$CLUSTER/etc/policies.d/pub.json && gfsemu_reset "$GFS" &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o /dev/null --wrap "cat $GFS/pub/ref $GFS/pub/own >/dev/null") &&
    bid=$(sbatch_wait bob -w n2 --tier-cache=auto -o $GFS/home/bob/w.out --wrap "sha256sum $GFS/pub/ref") &&
    grep -q "$(sha256sum <$GFS-backing/pub/ref | cut -d" " -f1)" $GFS/home/bob/w.out &&
    test "$(gfsemu_stat "$GFS" pub/ref read_bytes)" = 2097152 &&
    test -f $BB/replicas/world/$(key_of $GFS/pub/ref) &&
    test -f $BB/replicas/u$alice_uid/$(key_of $GFS/pub/own) &&
    test ! -e $BB/replicas/world/$(key_of $GFS/pub/own) &&
    stats_settle && test "$(batch_ctr $id misses)" = 2 &&
    (cd $GFS/home/bob && as_user bob $TIERCTL stats --batch $bid --json) | grep -q "\"hits\": 1"
'
test_expect_success 'tierctl status shows the replica cache' '
    (cd $H && as_user alice $TIERCTL -N n1 status) >$TRASH/st && cat $TRASH/st &&
    grep -q "^replicas: [0-9]* files, .* fetching" $TRASH/st &&
    (cd $H && as_user alice $TIERCTL -N n1 status --json) | python3 -c "
import json,sys; r=json.load(sys.stdin)[\"replicas\"]; assert r[\"enabled\"] and r[\"files\"]>=1, r"
'

test_expect_success 'ttl: a replica older than its policy'"'"'s ttl is removed' '
    as_user alice mkdir -p $H/short && as_user alice sh -c "echo t > $H/short/f" &&
    (cd $H && as_user alice $TIERCTL set policy $H/short batch --ttl 2s) &&
    id=$(sbatch_wait alice -w n2 --tier-cache=auto -o /dev/null --wrap "cat $H/short/f") &&
    k=$(key_of $H/short/f) && test -f $BB/replicas/u$alice_uid/$k &&
    wait_for 20 test ! -e $BB/replicas/u$alice_uid/$k &&
    grep -q "evicted: ttl" $CLUSTER/log/tierd-n2.log
'
test_expect_success 'budget: past BBCapacity the least recently used replica goes; a file larger than it reads the GFS' '
    sed -i "s/^BBCapacity = .*/BBCapacity = 40M/" $CLUSTER/etc/tier.conf &&
    agent_reload n2 &&
    (cd $H && as_user alice $TIERCTL -N n2 evict $H) >/dev/null &&
    as_user alice mkdir -p $DB/b &&
    for f in f1 f2 f3; do as_user alice sh -c "head -c 16M /dev/urandom > $DB/b/$f" || exit 1; done &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o /dev/null \
        --wrap "cat $DB/b/f1 >/dev/null; sleep 1; cat $DB/b/f2 >/dev/null; sleep 1; cat $DB/b/f3 >/dev/null") &&
    test ! -e $BB/replicas/u$alice_uid/$(key_of $DB/b/f1) &&
    test -f $BB/replicas/u$alice_uid/$(key_of $DB/b/f2) &&
    test -f $BB/replicas/u$alice_uid/$(key_of $DB/b/f3) &&
    grep -q "evicted: BB budget" $CLUSTER/log/tierd-n2.log &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o $OUT/huge.out --wrap "sha256sum $DB/big") &&
    grep -q $SUM $OUT/huge.out && stats_settle &&
    test "$(batch_ctr $id fallthroughs)" = 1 &&
    grep "replica not made: $DB/big (64 MiB) is larger than the BB budget of node n2 (BBCapacity 40 MiB)" \
        $CLUSTER/log/tierd-n2.log &&
    sed -i "s/^BBCapacity = .*/BBCapacity = 2G/" $CLUSTER/etc/tier.conf &&
    agent_reload n2
'
# n2 now owns the replicas of b/f2 and b/f3 (16 MiB each).
replica_of () { test -f $BB/replicas/u$alice_uid/$(key_of "$1"); }
test_expect_success 'a BB too full even after evicting everything: the open reads the GFS, nothing is evicted, one log line names the file' '
    replica_of $DB/b/f2 && replica_of $DB/b/f3 &&
    conf_set BBMinFree 2G && agent_reload n2 &&
    as_user alice sh -c "head -c 1M /dev/urandom > $DB/b/full" &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o $OUT/full.out --wrap "sha256sum $DB/b/full") &&
    grep -q "^$(sha256sum <$GFS-backing/home/alice/db/b/full | cut -d" " -f1) " $OUT/full.out &&
    replica_of $DB/b/f2 && replica_of $DB/b/f3 && ! replica_of $DB/b/full &&
    grep "replica of $DB/b/full not made: the burst buffer is full" $CLUSTER/log/tierd-n2.log &&
    stats_settle && test "$(batch_ctr $id fallthroughs)" = 1 &&
    conf_set BBMinFree && agent_reload n2
'
test_expect_success 'no budget (BBCapacity 0): a file larger than the BB reads the GFS at once, nothing is evicted' '
    conf_set BBCapacity 0 && agent_reload n2 &&
    as_user alice truncate -s 2G $DB/b/huge &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o $OUT/hg.out --wrap "head -c 1M $DB/b/huge | sha256sum") &&
    grep -q "^$(head -c 1M /dev/zero | sha256sum | cut -d" " -f1) " $OUT/hg.out &&
    replica_of $DB/b/f2 && replica_of $DB/b/f3 &&
    grep "replica not made: $DB/b/huge (2048 MiB) is larger than the burst buffer (1024 MiB, BBMinFree 0 MiB)" \
        $CLUSTER/log/tierd-n2.log &&
    stats_settle && test "$(batch_ctr $id fallthroughs)" = 1 &&
    conf_set BBCapacity 2G && agent_reload n2
'
# The BB's free space is the test's alone (its own tmpfs): keep 8 MiB
# less than is free now, and a 16 MiB copy must first evict one replica.
test_expect_success 'BBMinFree: below it the least recently used replica goes first' '
    replica_of $DB/b/f2 && replica_of $DB/b/f3 &&
    as_user alice sh -c "head -c 16M /dev/urandom > $DB/b/m1" &&
    free_k=$(( $(stat -f -c "%a * %S" $BB) / 1024 )) &&
    conf_set BBMinFree "$((free_k - 8192))K" && agent_reload n2 &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o $OUT/m1.out --wrap "sha256sum $DB/b/m1") &&
    grep -q "^$(sha256sum <$GFS-backing/home/alice/db/b/m1 | cut -d" " -f1) " $OUT/m1.out &&
    ! replica_of $DB/b/f2 && replica_of $DB/b/f3 && replica_of $DB/b/m1 &&
    grep "replica of $DB/b/f2 (16777216 bytes) evicted: BB free space" $CLUSTER/log/tierd-n2.log &&
    stats_settle && test "$(batch_ctr $id misses)" = 1 &&
    conf_set BBMinFree && agent_reload n2
'
test_expect_success 'budget: replicas in use by a running batch go last' '
    (cd $H && as_user alice $TIERCTL -N n2 evict $DB/b) >/dev/null &&
    for f in r1 r2 r3; do as_user alice sh -c "head -c 16M /dev/urandom > $DB/b/$f" || exit 1; done &&
    conf_set BBCapacity 40M && agent_reload n2 && rm -f $OUT/goA &&
    a=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-batch=$DB -o /dev/null \
        --wrap "cat $DB/b/r1 >/dev/null; while [ ! -e $OUT/goA ]; do sleep 0.2; done") &&
    wait_for 60 replica_of $DB/b/r1 &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o /dev/null --wrap "cat $DB/b/r2 >/dev/null") &&
    replica_of $DB/b/r2 &&
    id=$(sbatch_wait alice -w n2 --tier-batch=$DB -o /dev/null --wrap "cat $DB/b/r3 >/dev/null") &&
    replica_of $DB/b/r1 && ! replica_of $DB/b/r2 && replica_of $DB/b/r3 &&
    grep "replica of $DB/b/r2 (16777216 bytes) evicted: BB budget" $CLUSTER/log/tierd-n2.log &&
    touch $OUT/goA && wait_for 60 job_done $a &&
    conf_set BBCapacity 2G && agent_reload n2
'
test_expect_success 'no node was drained' 'no_drain'
test_done
