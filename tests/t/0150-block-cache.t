#!/bin/bash
# 0150-block-cache.t - the block cache's agent side (issue 18): a job's
# write log on the node, its drain child, and job end waiting for it
#
# tests/readers/blogw.c writes as the interposer will: blog.open with a
# GFS file's descriptor, the log mapped, each write a committed record.
# The file on the GFS must be exactly what the writes make of it once
# the job ended (an afterok dependent reads it), also when the writer
# was killed, the drain child stopped by its user, or the GFS refused a
# write for a while.
test_description='the block cache: the agent'"'"'s write log and drain, job end waits for it'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster' 'cluster_start'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
test_at_exit "gfsemu_fault_clear '$GFS' 2>/dev/null"
H=$GFS/home/alice
HB=$GFS-backing/home/alice
CONF=$CLUSTER/etc/tier.conf
LOG=$CLUSTER/log/tierd-n1.log
TIERCTL="$CLUSTER/lib/tierctl -c $CONF"
SOCK=$CLUSTER/run/tier/n1/tierd.sock
NV=$(sed -n "s/^NvdimmDir *= *//p" $CONF | sed "s/%n/n1/")
as_alice () { (cd "$H" && as_user alice "$@"); }
as_user alice mkdir -p $H/ckpt $H/plain $H/out
W=$TRASH/blogw
gcc -O2 -I$TIER_SRCDIR -I$TIER_SRCDIR/lib -I$TIER_BUILDDIR -o $W \
    $TIER_SRCDIR/tests/readers/blogw.c $TIER_BUILDDIR/lib/.libs/libtiercore.a \
    -lpthread || bail_out "blogw does not build"
chmod 755 $TRASH $W
# expect FILE OP...: what the w: operations make of an empty file
expect () {
    python3 - "$@" <<'PY'
import sys
out = bytearray()
for op in sys.argv[2:]:
    if op.startswith("w:"):
        _, off, ln, ch = op.split(":")
        off, ln = int(off), int(ln)
        if len(out) < off + ln:
            out.extend(b"\0" * (off + ln - len(out)))
        out[off:off + ln] = ch.encode() * ln
open(sys.argv[1], "wb").write(out)
PY
}
wait_job () {
    for i in $(seq 600); do job_done $1 && return 0; sleep 0.2; done
    return 1
}
drains () { pgrep -f "^tierd-drain job $1" | wc -l; }

test_expect_success 'policy: window makes stage none; window with stage out is refused' '
    as_alice srun -w n1 --tier-cache=auto true &&
    as_alice $TIERCTL -N n1 set policy $H/ckpt endpoint --window 1M &&
    as_alice $TIERCTL -N n1 show policy $H/ckpt/x | tee $TRASH/show &&
    grep -q "stage.*none" $TRASH/show &&
    ! as_alice $TIERCTL -N n1 set policy $H/plain endpoint --window 1M --stage out 2>$TRASH/err &&
    cat $TRASH/err && grep -q "window.*does not apply to an output directory" $TRASH/err
'

OPS="w:0:300000:a w:100000:50000:b w:1048576:4096:c w:200000:700000:d"
test_expect_success 'writes through the log reach the GFS by job end, in order' '
    expect $TRASH/want1 $OPS &&
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o $H/out/w1.out -e $H/out/w1.err \
        --wrap "$W $H/ckpt/f1 $OPS flush w:5000:10:z; echo rc=\$?") &&
    cat $H/out/w1.out $H/out/w1.err &&
    grep -qx rc=0 $H/out/w1.out && grep -qx flushed $H/out/w1.out &&
    python3 -c "
import sys; d = bytearray(open(\"$TRASH/want1\", \"rb\").read()); d[5000:5010] = b\"z\" * 10
open(\"$TRASH/want1\", \"wb\").write(d)" &&
    cmp $TRASH/want1 $HB/ckpt/f1 &&
    grep -q "job $id: block cache drained: [1-9][0-9]* records" $LOG &&
    test "$(drains $id)" = 0 &&
    ! ls $NV/.blog/ | grep -q "^$id\\."
'

test_expect_success 'the log is root-protected: alice cannot open it by name' '
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-cache=auto -o $H/out/w2.out \
        --wrap "$W $H/ckpt/f2 w:0:1000:x sleep:4000") &&
    for i in $(seq 50); do grep -q acked $H/out/w2.out 2>/dev/null && break; sleep 0.2; done &&
    nv=$NV && ls -la $nv/.blog &&
    test "$(stat -c %U:%a $nv/.blog)" = root:700 &&
    f=$(ls $nv/.blog | grep "^$id\\.") && test "$(stat -c %U:%a $nv/.blog/$f)" = alice:600 &&
    ! as_user alice cat $nv/.blog/$f &&
    as_alice $TIERCTL -N n1 status --json >$TRASH/st.json &&
    python3 -c "
import json; s = json.load(open(\"$TRASH/st.json\"))
b = [j for j in s[\"block_cache\"] if j[\"job_id\"] == $id]
assert b and b[0][\"files\"] == 1 and b[0][\"user\"] == \"alice\", s[\"block_cache\"]" &&
    wait_job $id
'

test_expect_success 'a file outside a window directory, or open for reading, is refused' '
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o $H/out/w3.out -e $H/out/w3.err \
        --wrap "$W $H/plain/f w:0:10:a; echo rc=\$?") &&
    cat $H/out/w3.err && grep -qx rc=2 $H/out/w3.out &&
    grep -q "is not in a block cache directory" $H/out/w3.err
'

test_expect_success 'the writer killed (-9) mid-way: every acknowledged write is on the GFS' '
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o $H/out/w4.out \
        --wrap "$W $H/ckpt/f4 w:0:65536:a w:65536:65536:b w:131072:65536:c & p=\$!; sleep 0.5; $W $H/ckpt/f4 w:10:10:q & q=\$!; wait \$p; kill -9 \$q 2>/dev/null; wait") &&
    cat $H/out/w4.out &&
    python3 -c "
d = open(\"$HB/ckpt/f4\", \"rb\").read()
assert d[:10] == b\"a\" * 10 and d[20:65536] == b\"a\" * (65536 - 20)
assert d[65536:131072] == b\"b\" * 65536 and d[131072:196608] == b\"c\" * 65536
assert d[10:20] in (b\"a\" * 10, b\"q\" * 10)"
'

test_expect_success 'the drain stopped by its user is started again; job end still waits for it' '
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-cache=auto -o $H/out/w5.out \
        --wrap "$W $H/ckpt/f5 w:0:4096:a sleep:3000 w:4096:4096:b") &&
    for i in $(seq 50); do grep -q acked $H/out/w5.out 2>/dev/null && break; sleep 0.2; done &&
    p=$(pgrep -f "^tierd-drain job $id") && test -n "$p" &&
    test "$(stat -c %U /proc/$p)" = alice &&
    as_user alice kill -STOP $p &&
    for i in $(seq 50); do grep -q "job $id: its drain ended" $LOG && break; sleep 0.2; done &&
    wait_job $id && cat $H/out/w5.out &&
    grep -q "job $id: its drain ended" $LOG &&
    expect $TRASH/want5 w:0:4096:a w:4096:4096:b && cmp $TRASH/want5 $HB/ckpt/f5
'

test_expect_success 'a GFS that refuses the writes: named in tierctl status, drained once it accepts' '
    rm -f $HB/ckpt/f6 &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-cache=auto -o $H/out/w6.out \
        --wrap "$W $H/ckpt/f6 sleep:500 w:0:8192:e flush") &&
    for i in $(seq 50); do test -e $HB/ckpt/f6 && break; sleep 0.1; done &&
    gfsemu_fault $GFS "home/alice/ckpt/f6:write:EIO" &&
    for i in $(seq 100); do grep -q "^failed" $H/out/w6.out 2>/dev/null && break; sleep 0.2; done &&
    cat $H/out/w6.out && grep -q "^failed 5 .*ckpt/f6" $H/out/w6.out &&
    grep -q "job $id: block cache: writing $H/ckpt/f6 to the GFS failed" $LOG &&
    as_alice $TIERCTL -N n1 status --json >$TRASH/st6.json &&
    python3 -c "
import json; s = json.load(open(\"$TRASH/st6.json\"))
b = [j for j in s[\"block_cache\"] if j[\"job_id\"] == $id]
assert b and b[0][\"failed\"][\"errno\"] == 5 and \"ckpt/f6\" in b[0][\"failed\"][\"error\"], b" &&
    gfsemu_fault_clear $GFS &&
    wait_job $id &&
    expect $TRASH/want6 w:0:8192:e && cmp $TRASH/want6 $HB/ckpt/f6
'

test_expect_success 'bob cannot end, flush or see alice'"'"'s block cache' '
    id=$(cd $H && as_user alice sbatch --parsable -w n1 --tier-cache=auto -o $H/out/w7.out \
        --wrap "$W $H/ckpt/f7 w:0:100:a sleep:3000") &&
    for i in $(seq 50); do grep -q acked $H/out/w7.out 2>/dev/null && break; sleep 0.2; done &&
    as_user bob python3 $TIER_SRCDIR/tests/lib/rawclient.py $SOCK request "{\"op\":\"blog.sync\",\"job_id\":$id,\"end\":true}" >$TRASH/b7 2>&1 ;
    cat $TRASH/b7 && grep -q "belongs to another user" $TRASH/b7 &&
    as_user bob python3 $TIER_SRCDIR/tests/lib/rawclient.py $SOCK request "{\"op\":\"blog.flush\"}" >$TRASH/b7f 2>&1 ;
    cat $TRASH/b7f && grep -q "errno" $TRASH/b7f &&
    cat $TRASH/b7 && grep -q "belongs to another user" $TRASH/b7 &&
    as_user bob $TIERCTL -N n1 status --json >$TRASH/st7.json &&
    python3 -c "
import json; s = json.load(open(\"$TRASH/st7.json\"))
assert not [j for j in s[\"block_cache\"] if j[\"job_id\"] == $id], s[\"block_cache\"]" &&
    wait_job $id
'

# the interposer: real programs writing in place through the job's log
cat >$TRASH/inplace.py <<'PY'
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(64):
    os.write(fd, bytes([65 + i % 26]) * 131072)
os.pwrite(fd, b"Z" * 100, 5000)
print("size", os.fstat(fd).st_size)
print("end", os.lseek(fd, 0, os.SEEK_END))
os.write(fd, b"tail")
os.fsync(fd)
os.close(fd)
fd = os.open(p, os.O_WRONLY)
d = os.dup(fd)
os.close(fd)
os.pwrite(d, b"Q" * 10, 0)
os.close(d)
with open(p, "rb") as f:
    print("head", f.read(12).decode())
PY
chmod 644 $TRASH/inplace.py
test_expect_success 'the interposer: writes, a size, SEEK_END, fsync, dup and a reopen, as direct I/O' '
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o $H/out/i1.out -e $H/out/i1.err \
        --wrap "python3 $TRASH/inplace.py $H/ckpt/i1; dd if=/dev/zero of=$H/ckpt/i1 bs=64k seek=2 count=4 conv=notrunc,fsync status=none; echo rc=\$?") &&
    cat $H/out/i1.out $H/out/i1.err &&
    grep -qx "size 8388608" $H/out/i1.out && grep -qx "end 8388608" $H/out/i1.out &&
    grep -qx "head QQQQQQQQQQAA" $H/out/i1.out && grep -qx rc=0 $H/out/i1.out &&
    python3 -c "
d = bytearray()
for i in range(64): d += bytes([65 + i % 26]) * 131072
d[5000:5100] = b\"Z\" * 100; d += b\"tail\"; d[0:10] = b\"Q\" * 10
d[131072:131072 + 262144] = bytes(262144)
assert open(\"$HB/ckpt/i1\", \"rb\").read() == bytes(d)" &&
    n=$(sed -n "s/.*job $id: block cache drained: \([0-9]*\) records.*/\1/p" $LOG) &&
    echo "records: $n" && test "$n" -ge 64
'

test_expect_success 'the interposer: a file outside the window directories is written directly' '
    id=$(sbatch_wait alice -w n1 --tier-cache=auto -o $H/out/i2.out \
        --wrap "dd if=/dev/zero of=$H/plain/d bs=4k count=4 status=none; echo rc=\$?") &&
    grep -qx rc=0 $H/out/i2.out && test "$(stat -c %s $HB/plain/d)" = 16384 &&
    ! grep -q "job $id: block cache" $LOG
'

test_expect_success 'no node drained' 'no_drain'
test_done
