#!/bin/bash
# 0125-stage-objstore.t - stage-in from object stores on the real cluster:
# s3:// from s3rver and https:// from nginx-light, both over TLS with a CA
# made here (EndpointCAFile), the objects put there beforehand with the
# endpoint library's own tool.  s3rver does not check signatures
# (tests/unit/test_sigv4.c checks them against AWS's test suite).
test_description='stage-in from s3:// and https:// URLs'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/endpoints.sh"

TOOL=$TIER_BUILDDIR/tests/unit/endpoint_tool
test_have_prereq ROOT,SLURM,FUSE || skip_all "needs root, Slurm and FUSE"
[ -x "$TOOL" ] || bail_out "no $TOOL (make -C tests/unit endpoint_tool)"
s3rver_install || skip_all "s3rver (npm) is not available"
{ [ -x /usr/sbin/nginx ] && command -v openssl >/dev/null 2>&1; } \
    || skip_all "needs nginx-light and openssl"
test_at_exit 's3rver_stop; nginx_dav_stop'

test_expect_success 'start the cluster, and s3rver and nginx over TLS' '
    endpoints_make_ca "$TRASH/ca" &&
    cluster_start &&
    install -m 644 "$TRASH/ca/ca.crt" "$CLUSTER/etc/endpoint-ca.crt" &&
    echo "EndpointCAFile = $CLUSTER/etc/endpoint-ca.crt" \
        >>"$CLUSTER/etc/tier.conf" &&
    S3RVER_CERTS=$TRASH/ca s3rver_start "$TRASH/s3" bucket &&
    nginx_dav_start "$TRASH/nginx" "$TRASH/ca"
'
[ -n "${CLUSTER:-}" ] && [ -n "$S3RVER_PID" ] && [ -n "$NGINX_PID" ] \
    || bail_out "no cluster or no servers"
H=$GFS/home/alice
OUT=$H/out
DAV=https://127.0.0.1:$NGINX_PORT/dav
CREDS=$GFS/.tier/users/alice/credentials
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
sum () { sha256sum "$1" | cut -d" " -f1; }
as_user alice mkdir -p "$H/in" "$OUT"

test_expect_success 'objects on s3rver (the library PUTs them) and nginx' '
    printf "[default]\naccess_key = S3RVER\nsecret_key = S3RVER\nendpoint = https://127.0.0.1:%s\n" \
        "$S3RVER_PORT" >"$TRASH/creds" && chmod 600 "$TRASH/creds" &&
    for i in 1 2 3; do
        head -c $((100000 + i)) /dev/urandom >"$TRASH/q$i.txt" &&
        "$TOOL" -c "$TRASH/creds" -C "$TRASH/ca/ca.crt" put "$TRASH/q$i.txt" \
            s3://bucket/in/q$i.txt || exit 1
    done &&
    head -c 3000000 /dev/urandom >"$TRASH/nginx/www/dav/ref data.bin" &&
    chmod 644 "$TRASH/nginx/www/dav/ref data.bin" &&
    curl -sf --cacert "$TRASH/ca/ca.crt" "$DAV/ref%20data.bin" | cmp - "$TRASH/nginx/www/dav/ref data.bin"
'
test_expect_success 'alice keeps her S3 credentials in the shared state (0600)' '
    mkdir -p -m 755 "$GFS/.tier/users" &&
    { [ -d "$GFS/.tier/users/alice" ] || mkdir -m 700 "$GFS/.tier/users/alice"; } &&
    chown alice: "$GFS/.tier/users/alice" &&
    as_user alice sh -c "umask 077 && cat >$CREDS" <"$TRASH/creds" &&
    test "$(stat -c %a "$CREDS")" = 600
'

# (sbatch's own "Invalid --tier-stage-in argument" line repeats the value
# on the submitter's terminal; nothing reaches a job or a log)
test_expect_success 'a URL with a query string is refused at submit' '
    ! (cd $H && as_user alice sbatch --parsable \
        "--tier-stage-in=$DAV/x?X-Amz-Signature=s3cr3t=$H/in/x" --wrap true) \
        >$TRASH/q.out 2>$TRASH/q.err &&
    cat $TRASH/q.err &&
    grep -q "tier: --tier-stage-in: $DAV/x?...: a query string is not allowed" $TRASH/q.err &&
    ! grep "tier:" $TRASH/q.err | grep -q s3cr3t && ! test -s $TRASH/q.out &&
    ! (cd $H && as_user alice sbatch --tier-stage-in=https://al:pw@127.0.0.1/x=$H/in/x \
        --wrap true) 2>$TRASH/u.err &&
    grep -q "credentials in the URL are not allowed" $TRASH/u.err &&
    ! grep "tier:" $TRASH/u.err | grep -q pw@ &&
    test -z "$(squeue -h -u alice)"
'

# A job that shows the https object at a path that does not exist yet, and
# waits until it is told to end.
cat >"$H/holder.sh" <<'EOF'
#!/bin/bash
sha256sum $1/in/ref.dat | cut -d" " -f1 > $1/out/refA
touch $1/out/readyA
while [ ! -e $1/out/goA ]; do sleep 0.2; done
EOF
# Each array task reads its own s3 object and the shared https one, waits,
# and reads the shared one again.
cat >"$H/task.sh" <<'EOF'
#!/bin/bash
i=$SLURM_ARRAY_TASK_ID; H=$1
sha256sum $H/in/q$i.txt | cut -d" " -f1 > $H/out/q-$i
sha256sum $H/in/ref.dat | cut -d" " -f1 > $H/out/ref-$i
touch $H/out/ready-$i
while [ ! -e $H/out/go-$i ]; do sleep 0.2; done
sha256sum $H/in/ref.dat | cut -d" " -f1 > $H/out/ref2-$i
EOF
chmod 755 "$H/holder.sh" "$H/task.sh"
chown alice "$H/holder.sh" "$H/task.sh"
# the array's own targets exist: the objects are shown in their place
for i in 1 2 3; do as_user alice sh -c "echo old > $H/in/q$i.txt"; done

test_expect_success 'https to a path that does not exist: an empty file is its mount point' '
    test ! -e $H/in/ref.dat &&
    a=$(cd $H && as_user alice sbatch --parsable -w n1 \
        "--tier-stage-in=$DAV/ref%%20data.bin=$H/in/ref.dat" \
        -o $OUT/a.out -e $OUT/a.err $H/holder.sh $H) && echo $a >$TRASH/a &&
    wait_for 60 test -e $OUT/readyA &&
    test "$(cat $OUT/refA)" = "$(sum "$TRASH/nginx/www/dav/ref data.bin")" &&
    test -f $H/in/ref.dat && ! test -s $H/in/ref.dat &&
    test "$(stat -c "%U %a" $H/in/ref.dat)" = "alice 600"
'
test_expect_success 'a 3-task array: s3://bucket/in/q%a.txt and the shared https input' '
    id=$(cd $H && as_user alice sbatch --parsable --array=1-3 \
        "--tier-stage-in=s3://bucket/in/q%a.txt=$H/in/q%a.txt,$DAV/ref%%20data.bin=$H/in/ref.dat" \
        -o $OUT/t-%a.out -e $OUT/t-%a.err $H/task.sh $H) && echo $id >$TRASH/id &&
    for i in 1 2 3; do wait_for 60 test -e $OUT/ready-$i || { cat $OUT/t-$i.err; exit 1; }; done &&
    for i in 1 2 3; do
        test "$(cat $OUT/q-$i)" = "$(sum $TRASH/q$i.txt)" &&
        test "$(cat $OUT/ref-$i)" = "$(sum "$TRASH/nginx/www/dav/ref data.bin")" || exit 1
    done &&
    for i in 1 2 3; do test "$(cat $H/in/q$i.txt)" = old || exit 1; done
'
test_expect_success 'the job that made the mount point ends first: the others keep their view' '
    touch $OUT/goA && wait_for 60 job_done $(cat $TRASH/a) &&
    test "$(job_state $(cat $TRASH/a))" = COMPLETED &&
    test -f $H/in/ref.dat && ! test -s $H/in/ref.dat &&
    for i in 1 2 3; do touch $OUT/go-$i; done &&
    id=$(cat $TRASH/id) && wait_for 60 job_done $id &&
    test "$(job_state $id)" = COMPLETED &&
    for i in 1 2 3; do
        test "$(cat $OUT/ref2-$i)" = "$(sum "$TRASH/nginx/www/dav/ref data.bin")" || exit 1
    done
'
test_expect_success 'after the last job the mount point is gone; existing targets stay' '
    wait_for 10 test ! -e $H/in/ref.dat &&
    for i in 1 2 3; do test "$(cat $H/in/q$i.txt)" = old || exit 1; done &&
    test -z "$(ls -A $GFS/.tier/users/alice/stage-refs)" &&
    grep -q "removed the 1 empty file(s) made as mount points" $CLUSTER/log/tierd-*.log
'
test_expect_success 'stage-in counters: files and bytes, none of them GFS bytes' '
    sleep 3 && id=$(cat $TRASH/id) &&
    (cd $H && as_user alice $TIERCTL stats --batch $id --json) >$TRASH/s.json &&
    python3 -c "
import json,sys
t=json.load(open(sys.argv[1]))[\"roles\"][\"endpoint\"]
print(t[\"stage_in_files\"], t[\"stage_in_bytes\"], t[\"gfs_bytes_read\"])
assert t[\"stage_in_files\"]==3*2, t
assert t[\"stage_in_bytes\"]==100001+100002+100003+3*3000000, t
assert t[\"gfs_bytes_read\"]==0, t" $TRASH/s.json
'

test_expect_success 'a missing object fails the job cleanly, with the URL' '
    id=$(sbatch_wait alice -w n2 --tier-stage-in=s3://bucket/in/nope.txt=$H/in/nope.txt \
        -o $OUT/m.out -e $OUT/m.err --wrap "echo ran") &&
    test "$(job_state $id)" = FAILED && cat $OUT/m.err &&
    grep -q "tier: stage-in failed: s3://bucket/in/nope.txt: GET: HTTP 404 NoSuchKey" $OUT/m.err &&
    ! grep -q ran $OUT/m.out && no_drain &&
    test "$(scontrol show job $id | grep -o "Restarts=[0-9]*")" = Restarts=0 &&
    test ! -e $H/in/nope.txt &&
    id=$(sbatch_wait alice -w n3 --tier-stage-in=$DAV/none.bin=$H/in/none.bin \
        -o /dev/null -e $OUT/m2.err --wrap true) &&
    test "$(job_state $id)" = FAILED && cat $OUT/m2.err &&
    grep -q "tier: stage-in failed: $DAV/none.bin: GET: HTTP 404" $OUT/m2.err &&
    test ! -e $H/in/none.bin && no_drain
'
test_expect_success 'a host that does not resolve fails the job, with the URL' '
    id=$(sbatch_wait alice -w n2 --tier-stage-in=https://nonexistent.invalid/x=$H/in/x \
        -o /dev/null -e $OUT/d.err --wrap true) &&
    test "$(job_state $id)" = FAILED && cat $OUT/d.err &&
    grep -q "tier: stage-in failed: https://nonexistent.invalid/x: GET: .*resolve" $OUT/d.err &&
    test ! -e $H/in/x && no_drain
'
test_expect_success 'a credentials file others may read is refused, its secret never shown' '
    chmod 644 $CREDS &&
    id=$(sbatch_wait alice -w n1 --tier-stage-in=s3://bucket/in/q1.txt=$H/in/q1.txt \
        -o /dev/null -e $OUT/c.err --wrap "cat $H/in/q1.txt") &&
    chmod 600 $CREDS &&
    test "$(job_state $id)" = FAILED && cat $OUT/c.err &&
    grep -q "s3://bucket/in/q1.txt: $CREDS: mode 0644 lets others read it: refused (chmod 600 $CREDS)" $OUT/c.err &&
    ! grep -q "S3RVER\|access_key" $OUT/c.err &&
    ! grep -rq "secret_key\|S3RVER" $CLUSTER/log/tierd-*.log
'
test_expect_success 'bob cannot show an object in place of alice'"'"'s file' '
    id=$(sbatch_wait bob -w n2 --tier-stage-in=$DAV/ref%%20data.bin=$H/in/q1.txt \
        -o /dev/null -e $GFS/home/bob/b.err --wrap "cat $H/in/q1.txt") &&
    test "$(job_state $id)" = FAILED && cat $GFS/home/bob/b.err &&
    grep -q "$H/in/q1.txt: you neither own nor may write this file" $GFS/home/bob/b.err &&
    test "$(cat $H/in/q1.txt)" = old
'
test_expect_success 'a target whose directory does not exist fails the job' '
    id=$(sbatch_wait alice -w n3 --tier-stage-in=$DAV/ref%%20data.bin=$H/nodir/ref \
        -o /dev/null -e $OUT/n.err --wrap true) &&
    test "$(job_state $id)" = FAILED && cat $OUT/n.err &&
    grep -q "$H/nodir/ref: its directory does not exist" $OUT/n.err
'
# the cluster's NvdimmCapacity is 1 GiB: an object of 1.2 GiB (sparse on
# nginx's side) is stopped once its size is known, and fails the job
truncate -s 1200M "$TRASH/nginx/www/dav/huge.bin" && chmod 644 "$TRASH/nginx/www/dav/huge.bin"
test_expect_success 'an object larger than the NVDIMM tier fails the job, naming the sizes' '
    id=$(sbatch_wait alice -w n3 --tier-stage-in=$DAV/huge.bin=$H/in/huge.bin \
        -o /dev/null -e $OUT/h.err --wrap true) &&
    test "$(job_state $id)" = FAILED && cat $OUT/h.err &&
    grep -q "$H/in/huge.bin: the stage-in needs 1.2 GiB, and the NVDIMM tier of this node has 1.0 GiB left for it" $OUT/h.err &&
    test ! -e $H/in/huge.bin &&
    test ! -e $(cat $CLUSTER/run/nvdimm.path)/n3/$id
'
test_expect_success 'no node was drained' 'no_drain'
test_done
