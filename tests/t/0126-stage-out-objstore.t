#!/bin/bash
# 0126-stage-out-objstore.t - stage-out to object stores on the real
# cluster: --tier-stage-out=DIR=s3://bucket/prefix/ to s3rver and
# DIR=https://host/dav/prefix/ to nginx-light (WebDAV), both over TLS with
# a CA made here (EndpointCAFile).  Objects are read back with the
# endpoint library's own tool and compared with checksums the tasks
# recorded outside tier.  s3rver implements neither AbortMultipartUpload
# nor ListParts: a resumed upload relies on the part ETags tier kept, and
# an upload left behind would stay in s3rver's storage (checked: none is).
test_description='stage-out to s3:// and https:// (WebDAV) prefixes'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"
. "$TIER_SRCDIR/tests/lib/endpoints.sh"

TOOL=$TIER_BUILDDIR/tests/unit/endpoint_tool
test_have_prereq ROOT,SLURM,FUSE || skip_all "needs root, Slurm and FUSE"
[ -x "$TOOL" ] || bail_out "no $TOOL (make -C tests/unit endpoint_tool)"
s3rver_install || skip_all "s3rver (npm) is not available"
{ [ -x /usr/sbin/nginx ] && command -v openssl >/dev/null 2>&1; } \
    || skip_all "needs nginx-light and openssl"
command -v strace >/dev/null 2>&1 || skip_all "needs strace"
test_at_exit 's3rver_stop; nginx_dav_stop'

# multipart above 5 MiB, in 5 MiB parts: a 16 MiB file takes 4 parts
test_expect_success 'start the cluster, and s3rver and nginx over TLS' '
    endpoints_make_ca "$TRASH/ca" &&
    cluster_start &&
    install -m 644 "$TRASH/ca/ca.crt" "$CLUSTER/etc/endpoint-ca.crt" &&
    printf "%s\n" "EndpointCAFile = $CLUSTER/etc/endpoint-ca.crt" \
        "EndpointPartSize = 5M" "EndpointMultipartThreshold = 5M" \
        "StageOutTimeout = 20s" >>"$CLUSTER/etc/tier.conf" &&
    S3RVER_CERTS=$TRASH/ca s3rver_start "$TRASH/s3" bucket &&
    nginx_dav_start "$TRASH/nginx" "$TRASH/ca"
'
[ -n "${CLUSTER:-}" ] && [ -n "$S3RVER_PID" ] && [ -n "$NGINX_PID" ] \
    || bail_out "no cluster or no servers"
H=$GFS/home/alice
SUMS=$H/sums
S3=https://127.0.0.1:$S3RVER_PORT
DAV=https://127.0.0.1:$NGINX_PORT/dav
WWW=$TRASH/nginx/www/dav
CREDS=$GFS/.tier/users/alice/credentials
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
NV=$(cat $CLUSTER/run/nvdimm.path)
sum () { sha256sum "$1" | cut -d" " -f1; }
outbox_empty () { test -z "$(ls -A "$NV/$1/.outbox" 2>/dev/null)"; }
tool () { "$TOOL" -c "$TRASH/creds" -C "$TRASH/ca/ca.crt" "$@"; }
# exists URL: the object is there
exists () { tool head "$1" 2>/dev/null | grep -q "^exists "; }
absent () { test "$(tool head "$1" 2>/dev/null)" = absent; }
# the object's sha256, fetched whole
osum () { tool get "$1" - 2>/dev/null | sha256sum | cut -d" " -f1; }
# the multipart uploads s3rver holds (none is left once each completed)
s3_uploads () { find "$TRASH/s3/data" -mindepth 3 -maxdepth 3 -type d -path "*/._S3rver_uploads/*" | wc -l; }
as_user alice mkdir -p "$SUMS"

test_expect_success 'alice keeps her S3 credentials in the shared state (0600)' '
    printf "[default]\naccess_key = S3RVER\nsecret_key = S3RVER\nendpoint = %s\n" \
        "$S3" >"$TRASH/creds" && chmod 600 "$TRASH/creds" &&
    mkdir -p -m 755 "$GFS/.tier/users" &&
    { [ -d "$GFS/.tier/users/alice" ] || mkdir -m 700 "$GFS/.tier/users/alice"; } &&
    chown alice: "$GFS/.tier/users/alice" &&
    as_user alice sh -c "umask 077 && cat >$CREDS" <"$TRASH/creds" &&
    test "$(stat -c %a "$CREDS")" = 600
'

test_expect_success 'bad output URLs are refused at submit, naming the option' '
    as_user alice mkdir -p $H/o &&
    ! (cd $H && as_user alice sbatch "--tier-stage-out=$H/o=s3://bucket/noslash" \
        --wrap true) 2>$TRASH/e1 && cat $TRASH/e1 &&
    grep -q "tier: --tier-stage-out: s3://bucket/noslash: an output URL is a prefix: end it with ./." $TRASH/e1 &&
    ! (cd $H && as_user alice sbatch "--tier-stage-out=$H/o=$DAV/o/?X-Amz-Signature=s3cr3t" \
        --wrap true) 2>$TRASH/e2 &&
    grep -q "tier: --tier-stage-out: $DAV/o/?...: a query string is not allowed" $TRASH/e2 &&
    ! grep "tier:" $TRASH/e2 | grep -q s3cr3t &&
    ! (cd $H && as_user alice sbatch "--tier-stage-out=$H/o=https://al:pw@127.0.0.1/o/" \
        --wrap true) 2>$TRASH/e3 &&
    grep -q "credentials in the URL are not allowed" $TRASH/e3 &&
    ! grep "tier:" $TRASH/e3 | grep -q pw@ &&
    ! (cd $H && as_user alice sbatch "--tier-stage-out=$H/o=s3://bucket/%a/" \
        --wrap true) 2>$TRASH/e4 &&
    grep -q "%a is used but the job is not an array job" $TRASH/e4 &&
    test -z "$(squeue -h -u alice)"
'

# Each task writes small files, one in a subdirectory, a file it renames
# at once (q) and one it renames once it is published (r), one it deletes
# once it is published (d); task 1 also a 16 MiB file (4 parts).  The
# checksums go outside tier.
cat >"$H/task.sh" <<'EOF'
#!/bin/bash
i=$SLURM_ARRAY_TASK_ID; H=$1; O=$H/arr
mkdir -p $O/sub
echo "task $i" > $O/a.txt
head -c 1000000 /dev/urandom > $O/sub/b.bin
if [ $i = 1 ]; then head -c $((16 << 20)) /dev/urandom > $O/big.bin; fi
echo draft-$i > $O/q.tmp && mv $O/q.tmp $O/q.txt
echo rename-$i > $O/r.tmp
echo gone-$i > $O/d.txt
touch $H/sums/ready-$i
while [ ! -e $H/sums/go-$i ]; do sleep 0.2; done
mv $O/r.tmp $O/r.txt
rm $O/d.txt
(cd $O && sha256sum a.txt sub/b.bin q.txt r.txt $(ls big.bin 2>/dev/null)) > $H/sums/$i
EOF
chmod 755 "$H/task.sh"; chown alice "$H/task.sh"
as_user alice mkdir -p "$H/arr"

test_expect_success 'a 3-task array writes to s3://bucket/out/%a/' '
    id=$(cd $H && as_user alice sbatch --parsable --array=1-3 \
        "--tier-stage-out=$H/arr=s3://bucket/out/%a/" \
        -o $H/t-%a.out -e $H/t-%a.err $H/task.sh $H) && echo $id >$TRASH/id &&
    for i in 1 2 3; do
        wait_for 60 test -e $SUMS/ready-$i || { cat $H/t-$i.err; exit 1; }
    done &&
    for i in 1 2 3; do
        wait_for 60 exists s3://bucket/out/$i/r.tmp &&
        wait_for 60 exists s3://bucket/out/$i/d.txt || exit 1
        touch $SUMS/go-$i
    done &&
    wait_for 120 job_done $id && test "$(job_state $id)" = COMPLETED &&
    cat $H/t-1.err $H/t-2.err $H/t-3.err && ! grep -q "tier:" $H/t-?.err
'
test_expect_success 'every object arrived, byte for byte, under its task'"'"'s prefix' '
    for i in 1 2 3; do
        test -s $SUMS/$i || exit 1
        while read -r s f; do
            test "$(osum s3://bucket/out/$i/$f)" = "$s" || { echo "$i/$f differs"; exit 1; }
        done <$SUMS/$i
    done &&
    test "$(wc -l <$SUMS/1)" = 5 && grep -q " big.bin$" $SUMS/1
'
test_expect_success 'write then rename, delete: only the final names are there' '
    for i in 1 2 3; do
        absent s3://bucket/out/$i/q.tmp && absent s3://bucket/out/$i/r.tmp &&
        absent s3://bucket/out/$i/d.txt || exit 1
    done &&
    find $TRASH/s3/data/bucket/out -name "*._S3rver_object" | sort >$TRASH/keys &&
    cat $TRASH/keys && test "$(wc -l <$TRASH/keys)" = 13
'
test_expect_success 'the GFS directory was not written; no upload is left behind' '
    test -z "$(ls -A $GFS-backing/home/alice/arr)" &&
    test "$(s3_uploads)" = 0 &&
    for n in n1 n2 n3; do outbox_empty $n || exit 1; done
'
test_expect_success 'the 16 MiB file went as a 4-part multipart upload' '
    id=$(cat $TRASH/id) &&
    cat $GFS/.tier/users/alice/jobs/*/outputs-*.json >/dev/null &&
    python3 - "$GFS/.tier/users/alice/jobs" <<-PY
	import glob, json, sys
	big = [o for f in glob.glob(sys.argv[1] + "/*/outputs-*.json")
	       for o in json.load(open(f))["outputs"]
	       if o.get("url") == "s3://bucket/out/1/big.bin"]
	print(big)
	assert len(big) == 1 and big[0]["parts"] == 4, big
	assert big[0]["size"] == 16 << 20, big
	PY
'
test_expect_success 'the manifests list each object with its URL, size and SHA-256' '
    python3 - "$GFS/.tier/users/alice/jobs" "$SUMS" <<-PY
	import glob, json, os, sys
	seen = {}
	for f in glob.glob(sys.argv[1] + "/*/outputs-*.json"):
	    for o in json.load(open(f))["outputs"]:
	        if o.get("url", "").startswith("s3://bucket/out/"):
	            assert o["state"] == "done", o
	            seen[o["url"]] = (o["sha256"], o["size"])
	want = {}
	for i in (1, 2, 3):
	    for line in open(os.path.join(sys.argv[2], str(i))):
	        s, name = line.split()
	        want["s3://bucket/out/%d/%s" % (i, name)] = s
	print(len(seen), "in the manifests,", len(want), "recorded by the tasks")
	assert set(seen) == set(want), (sorted(seen), sorted(want))
	for u, s in want.items():
	    assert seen[u][0] == s, u
	PY
'
test_expect_success 'counters: files and bytes staged out, none of them GFS bytes' '
    sleep 3 && id=$(cat $TRASH/id) &&
    (cd $H && as_user alice $TIERCTL stats --batch $id --json) >$TRASH/s.json &&
    python3 -c "
import json,sys
t=json.load(open(sys.argv[1]))[\"roles\"][\"endpoint\"]
print(t[\"stage_out_files\"], t[\"stage_out_bytes\"], t[\"gfs_bytes_written\"])
assert t[\"stage_out_files\"] >= 13, t
assert t[\"stage_out_bytes\"] >= (16 << 20) + 3 * 1000000, t
assert t[\"gfs_bytes_written\"] == 0, t" $TRASH/s.json
'

test_expect_success 'WebDAV: each file goes to a temporary name, then MOVE' '
    as_user alice mkdir -p $H/dav &&
    id=$(sbatch_wait alice -w n2 "--tier-stage-out=$H/dav=$DAV/out/%j/" -o /dev/null \
        -e $H/dav.err --wrap "mkdir -p $H/dav/sub; head -c 3000000 /dev/urandom > $H/dav/w.bin; echo note > $H/dav/sub/n.txt; (cd $H/dav && sha256sum w.bin sub/n.txt) > $SUMS/dav") &&
    test "$(job_state $id)" = COMPLETED && cat $H/dav.err &&
    (cd $WWW/out/$id && sha256sum -c $SUMS/dav) &&
    grep "/dav/out/$id/" $TRASH/nginx/logs/access.log >$TRASH/dav.log &&
    cat $TRASH/dav.log &&
    grep -q "\"PUT /dav/out/$id/\.w\.bin\.tier-[a-z0-9]*\.part " $TRASH/dav.log &&
    grep -q "\"MOVE /dav/out/$id/\.w\.bin\.tier-[a-z0-9]*\.part " $TRASH/dav.log &&
    test "$(sed -n "s|.*\"\([A-Z]*\) /dav/out/$id/\.w\.bin\.tier-.*|\1|p" $TRASH/dav.log | tr "\n" " ")" = "PUT MOVE " &&
    grep -q "\"HEAD /dav/out/$id/w.bin " $TRASH/dav.log &&
    test -z "$(find $WWW/out/$id -name ".*.part")" &&
    test -z "$(ls -A $GFS-backing/home/alice/dav)"
'

test_expect_success 'an object that was there before the job is never overwritten: a conflict, kept beside it' '
    as_user alice mkdir -p $H/pre &&
    echo theirs >$TRASH/theirs && tool put $TRASH/theirs s3://bucket/pre/x.txt >/dev/null &&
    id=$(sbatch_wait alice -w n3 "--tier-stage-out=$H/pre=s3://bucket/pre/" -o /dev/null \
        --wrap "echo mine > $H/pre/x.txt") &&
    test "$(job_state $id)" = COMPLETED &&
    test "$(tool get s3://bucket/pre/x.txt -)" = theirs &&
    test "$(tool get s3://bucket/pre/.tier-conflicts/$id/n3/x.txt -)" = mine &&
    (cd $H && as_user alice $TIERCTL -N n3 outputs --job $id) >$TRASH/c && cat $TRASH/c &&
    grep -q "^conflict .*x.txt.*existed before the job.*s3://bucket/pre/.tier-conflicts/$id/n3/x.txt" $TRASH/c &&
    wait_for 20 outbox_empty n3
'

# The migrator of the job is held (strace delays every pread of the big
# file: hashing and sending it), the agent is killed once a part is
# recorded, and the job's end restarts it (the epilog).
# (the agent's other children of alice, such as its policy freezer, have
# other names)
mig_pid () {
    ps -e -o pid=,ppid=,user=,comm= |
        awk -v p="$1" '$2 == p && $3 == "alice" && $4 == "tierd-mig" { print $1 }'
}
parts_done () {
    (cd $H && as_user alice $TIERCTL -N n1 outputs --job $1 --json) 2>/dev/null | python3 -c "
import json,sys
o=[x for x in json.load(sys.stdin)[\"outputs\"] if x[\"file\"] == \"k.bin\"]
sys.exit(not (o and o[0][\"state\"] == \"uploading\" and o[0].get(\"parts_done\", 0) >= 1))"
}
test_expect_success 'kill -9 of the agent during a multipart upload: the object arrives once, complete' '
    as_user alice mkdir -p $H/kill && rm -f $SUMS/k.go $SUMS/k.end &&
    id=$(cd $H && as_user alice sbatch --parsable -w n1 "--tier-stage-out=$H/kill=s3://bucket/kill/" \
        -o /dev/null -e $H/k.err --wrap "touch $SUMS/k.started; while [ ! -e $SUMS/k.go ]; do sleep 0.2; done; head -c \$((16 << 20)) /dev/urandom > $H/kill/k.bin; sha256sum < $H/kill/k.bin | cut -d\" \" -f1 > $SUMS/k.sum; while [ ! -e $SUMS/k.end ]; do sleep 0.2; done") &&
    echo $id >$TRASH/kid &&
    wait_for 60 test -e $SUMS/k.started &&
    pid=$(cat $CLUSTER/state/n1/tierd.pid) && wait_for 20 test -n "$(mig_pid $pid)" &&
    mig=$(mig_pid $pid) && echo "agent $pid, migrator $mig" &&
    { strace -qq -o /dev/null -p $mig -e trace=pread64 \
        -e inject=pread64:delay_enter=30000 & } && st=$! &&
    wait_for 10 grep -q "^TracerPid:[[:space:]]*$st\$" /proc/$mig/status &&
    touch $SUMS/k.go && wait_for 120 parts_done $id &&
    kill -9 $pid && { wait $st; true; } &&
    (cd $H && as_user alice $TIERCTL -N n1 outputs --job $id) 2>&1 | cat &&
    absent s3://bucket/kill/k.bin && test "$(s3_uploads)" = 1 &&
    touch $SUMS/k.end && wait_for 120 job_done $id &&
    wait_for 120 outbox_empty n1 &&
    grep -q "job $id: resuming its outputs" $CLUSTER/log/tierd-n1.log &&
    grep -q "job $id: 1 multipart upload(s) resume" $CLUSTER/log/tierd-n1.log &&
    test "$(osum s3://bucket/kill/k.bin)" = "$(cat $SUMS/k.sum)" &&
    test "$(s3_uploads)" = 0 &&
    find $TRASH/s3/data/bucket/kill -name "*._S3rver_object" >$TRASH/kkeys &&
    cat $TRASH/kkeys && test "$(wc -l <$TRASH/kkeys)" = 1
'

test_expect_success 'a missing bucket: the output is kept, and reported with the reason' '
    as_user alice mkdir -p $H/nb &&
    id=$(sbatch_wait alice -w n2 "--tier-stage-out=$H/nb=s3://newbucket/x/" -o /dev/null \
        -e $H/nb.err --wrap "echo kept > $H/nb/f.txt") && echo $id >$TRASH/nb &&
    test "$(job_state $id)" = COMPLETED && cat $H/nb.err &&
    grep -q "^tier: warning: 1 output file(s) could not be written .*s3://newbucket/x/f.txt: .*NoSuchBucket" $H/nb.err &&
    (cd $H && as_user alice $TIERCTL -N n2 outputs --job $id) >$TRASH/nb.out && cat $TRASH/nb.out &&
    grep -q "^failed .*s3://newbucket/x/f.txt .*HTTP 404 NoSuchBucket" $TRASH/nb.out &&
    (cd $H && as_user alice $TIERCTL -N n2 status) >$TRASH/nb.st && cat $TRASH/nb.st &&
    grep -q "^    failed: s3://newbucket/x/f.txt: .*NoSuchBucket" $TRASH/nb.st &&
    ! outbox_empty n2 && no_drain
'
test_expect_success 'once the bucket exists, tierctl flush --job completes it' '
    id=$(cat $TRASH/nb) &&
    curl -sf --cacert $TRASH/ca/ca.crt -X PUT $S3/newbucket >/dev/null &&
    (cd $H && as_user alice $TIERCTL -N n2 flush --job $id) &&
    test "$(tool get s3://newbucket/x/f.txt -)" = kept &&
    wait_for 30 outbox_empty n2
'
test_expect_success 'refused credentials: kept and reported; fixed, a flush completes it' '
    as_user alice mkdir -p $H/bc &&
    sed "s/^access_key = .*/access_key = WRONGKEY/" $TRASH/creds >$TRASH/bad &&
    as_user alice sh -c "cat >$CREDS" <$TRASH/bad &&
    id=$(sbatch_wait alice -w n3 "--tier-stage-out=$H/bc=s3://bucket/bc/" -o /dev/null \
        --wrap "echo secret-work > $H/bc/g.txt") &&
    (cd $H && as_user alice $TIERCTL -N n3 outputs --job $id) >$TRASH/bc.out && cat $TRASH/bc.out &&
    grep -q "^failed .*s3://bucket/bc/g.txt .*HTTP 403" $TRASH/bc.out &&
    ! grep -rq "WRONGKEY\|S3RVER" $CLUSTER/log/tierd-*.log &&
    as_user alice sh -c "cat >$CREDS" <$TRASH/creds &&
    (cd $H && as_user alice $TIERCTL -N n3 flush --job $id) &&
    test "$(tool get s3://bucket/bc/g.txt -)" = secret-work &&
    wait_for 30 outbox_empty n3
'
test_expect_success 'no node was drained' 'no_drain'
test_done
