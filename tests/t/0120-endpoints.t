#!/bin/bash
# 0120-endpoints.t - the endpoint library against real servers on loopback:
# s3rver (S3) and nginx-light with WebDAV over TLS (a CA made here).
#
# s3rver does not check signatures (tests/unit/test_sigv4.c checks them
# against AWS's test suite) and does not implement AbortMultipartUpload or
# ListParts: here the abort is checked to be reported as unsupported, and
# resumption relies on the persisted ETags alone (which is all the library
# uses).
test_description='object-store and WebDAV endpoints (lib/endpoint)'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/endpoints.sh"

TOOL=$TIER_BUILDDIR/tests/unit/endpoint_tool
cd "$TRASH" || bail_out "cannot enter $TRASH"
[ -x "$TOOL" ] || bail_out "no $TOOL (make -C tests/unit endpoint_tool)"

if [ "${TIER_SKIP_INTEGRATION:-0}" != 1 ]; then
    s3rver_install && test_set_prereq S3RVER
    [ -x /usr/sbin/nginx ] && command -v openssl >/dev/null 2>&1 \
        && command -v curl >/dev/null 2>&1 && test_set_prereq NGINX
fi
test_at_exit 's3rver_stop; nginx_dav_stop'

MIB=1048576
# A file of $2 bytes of random data.
random_file () {
    head -c "$2" /dev/urandom >"$1"
}
# The value of KEY=N in endpoint_tool's "ok ..." line in FILE.
field () {
    sed -n "s/.* $2=\([0-9-]*\).*/\1/p" "$1"
}
# CMD exits with status $1.
test_expect_code_ () {
    _want=$1
    shift
    "$@"
    test $? = "$_want"
}
# Wait until the multipart state in $1 records part $2.
wait_part () {
    wait_for 30 grep -q "\"n\":$2[,}]" "$1"
}

printf '[default]\naccess_key = S3RVER\nsecret_key = S3RVER-secret-value\n' \
    >creds.base

test_expect_success 'bad URLs are refused with the URL and the reason' '
    ! "$TOOL" get ftp://host/x out 2>err &&
    grep -q "ftp://host/x: unsupported scheme .ftp." err &&
    ! "$TOOL" get s3://Bad_Bucket/k out 2>err &&
    grep -q "s3://Bad_Bucket/k: bucket name .Bad_Bucket." err &&
    ! "$TOOL" get "https://alice:pw@example.org/x" out 2>err &&
    grep -q "credentials in the URL are not allowed" err &&
    ! grep -q "alice\|pw" err &&
    grep -q "https://\*\*\*@example.org/x" err &&
    ! "$TOOL" get "https://example.org/a b" out 2>err &&
    grep -q "blank or control character" err &&
    ! "$TOOL" get "https://example.org:99999/x" out 2>err &&
    grep -q "is not a port" err &&
    ! "$TOOL" -R -1 get "https://nonexistent.invalid/x?X-Amz-Signature=abc" \
        out 2>err &&
    grep -q "https://nonexistent.invalid/x?...: GET" err &&
    ! grep -q abc err
'

test_expect_success 'a credentials file others can read is refused' '
    cp creds.base creds && chmod 640 creds &&
    ! "$TOOL" -c creds get s3://bucket/k out 2>err &&
    grep -q "creds: mode 0640 lets others read it: refused" err &&
    ! grep -q secret-value err &&
    ln -sf creds creds.link && chmod 600 creds &&
    ! "$TOOL" -c creds.link get s3://bucket/k out 2>err &&
    grep -q "symlink" err
'

test_expect_success 'a malformed credentials file names file, line and key, not values' '
    printf "[default]\naccess_key = A\nsecret_key S3RVER-secret-value\n" \
        >bad && chmod 600 bad &&
    ! "$TOOL" -c bad get s3://bucket/k out 2>err &&
    grep -q "bad:3: expected .key = value." err &&
    ! grep -q secret-value err &&
    printf "[default]\naccess_key = A\nsecret = S3RVER-secret-value\n" \
        >bad &&
    ! "$TOOL" -c bad get s3://bucket/k out 2>err &&
    grep -q "bad:3: unknown key .secret." err &&
    ! grep -q secret-value err &&
    printf "[other]\naccess_key = A\nsecret_key = S\n" >bad &&
    ! "$TOOL" -c bad get s3://bucket/k out 2>err &&
    grep -q "bad: no \[default\] profile" err
'

# A server that fails on purpose: the first GET of a file stops halfway,
# the first PUT gets a 503.
FLAKY_PID=""
test_at_exit 'test -n "$FLAKY_PID" && kill "$FLAKY_PID"'
test_expect_success 'start a flaky HTTP server on loopback' '
    mkdir -p flaky &&
    { python3 "$TIER_SRCDIR/tests/lib/flaky_http.py" "$TRASH/flaky" \
          >flaky.port 2>flaky.err & } &&
    FLAKY_PID=$! &&
    wait_for 10 test -s flaky.port &&
    FLAKY=http://127.0.0.1:$(cat flaky.port)
'

test_expect_success 'http: a GET cut short is resumed with Range and If-Range' '
    random_file flaky/obj $((3 * MIB + 3)) &&
    "$TOOL" -R 2 get "$FLAKY/obj" obj.back >get.out &&
    cmp flaky/obj obj.back &&
    test "$(field get.out retries)" = 1 &&
    test "$(field get.out requests)" = 2 &&
    half=$(( (3 * MIB + 3) / 2 )) &&
    grep -q "GET /obj range=bytes=$half- if-range=\"v1\"" \
        flaky/requests.log
'

test_expect_success 'http: a PUT answered 503 is retried' '
    random_file small.src 100000 &&
    "$TOOL" -R 2 -n put small.src "$FLAKY/up2" >put.out &&
    cmp small.src flaky/up2.put &&
    test "$(field put.out retries)" = 1 &&
    test "$(grep -c "^PUT /up2 " flaky/requests.log)" = 2
'

test_expect_success 'http: without retries the 503 is the answer' '
    test_expect_code_ 1 "$TOOL" -R -1 -n put small.src "$FLAKY/up3" \
        2>err &&
    grep -q "$FLAKY/up3: PUT: HTTP 503" err
'

test_expect_success S3RVER 'start s3rver on loopback' '
    s3rver_start "$TRASH/s3" bucket &&
    { cat creds.base &&
      echo "endpoint = http://127.0.0.1:$S3RVER_PORT"; } >creds &&
    chmod 600 creds
'
if test_have_prereq S3RVER && [ -z "$S3RVER_PID" ]; then
    bail_out "s3rver did not start"
fi

test_expect_success S3RVER 's3: a small file goes and comes back byte for byte' '
    random_file small $((3 * MIB + 17)) &&
    "$TOOL" -c creds put small s3://bucket/in/small >put.out &&
    test "$(field put.out parts)" = 0 &&
    "$TOOL" -c creds get s3://bucket/in/small small.back &&
    cmp small small.back
'

test_expect_success S3RVER 's3: an empty object' '
    : >empty &&
    "$TOOL" -c creds put empty "s3://bucket/in/an empty key" &&
    random_file empty.back 10 &&
    "$TOOL" -c creds get "s3://bucket/in/an empty key" empty.back &&
    test ! -s empty.back
'

test_expect_success S3RVER 's3: a four-part multipart upload, byte for byte' '
    random_file big $((18 * MIB + 123)) &&
    "$TOOL" -c creds -P 5M -T 5M -s state put big s3://bucket/out/big \
        >put.out &&
    test "$(field put.out parts)" = 4 &&
    test "$(field put.out resumed)" = 0 &&
    test ! -e state &&
    "$TOOL" -c creds get s3://bucket/out/big big.back &&
    cmp big big.back
'

test_expect_success S3RVER 's3: HEAD gives size and the ETag the PUT answered' '
    etag=$(sed -n "s/.* etag=\(.*\)$/\1/p" put.out) && test "$etag" != - &&
    "$TOOL" -c creds head s3://bucket/out/big >head.out && cat head.out &&
    test "$(cat head.out)" = "exists $((18 * MIB + 123)) $etag" &&
    "$TOOL" -c creds put small s3://bucket/in/small >put1.out &&
    etag=$(sed -n "s/.* etag=\(.*\)$/\1/p" put1.out) && test "$etag" != - &&
    "$TOOL" -c creds head s3://bucket/in/small >head.out &&
    test "$(cat head.out)" = "exists $((3 * MIB + 17)) $etag" &&
    "$TOOL" -c creds head s3://bucket/out/none >head.out &&
    test "$(cat head.out)" = absent &&
    "$TOOL" -c creds head s3://nobucket/k >head.out &&
    test "$(cat head.out)" = absent
'

test_expect_success S3RVER 's3: an upload killed after two parts resumes from its state' '
    rm -f state &&
    { "$TOOL" -c creds -P 5M -T 5M -r 4M -s state put big \
          s3://bucket/out/resumed >first.out 2>&1 & } &&
    pid=$! &&
    wait_part state 2 &&
    kill -9 $pid && { wait $pid; test $? = 137; } &&
    test -s state &&
    ! grep -q "\"n\":4" state &&
    ! "$TOOL" -c creds get s3://bucket/out/resumed x 2>err &&
    grep -q NoSuchKey err &&
    "$TOOL" -c creds -P 5M -T 5M -s state put big s3://bucket/out/resumed \
        >put.out &&
    test "$(field put.out parts)" = 4 &&
    test "$(field put.out resumed)" -ge 2 &&
    test ! -e state &&
    "$TOOL" -c creds get s3://bucket/out/resumed big.back &&
    cmp big big.back
'

test_expect_success S3RVER 's3: the state of another version of the file is not resumed' '
    rm -f state &&
    { "$TOOL" -c creds -P 5M -T 5M -r 4M -s state put big \
          s3://bucket/out/changed >/dev/null 2>&1 & } &&
    pid=$! &&
    wait_part state 1 &&
    kill -9 $pid; wait $pid;
    random_file big2 $((16 * MIB)) &&
    "$TOOL" -c creds -P 5M -T 5M -s state put big2 s3://bucket/out/changed \
        >put.out 2>err &&
    test "$(field put.out resumed)" = 0 &&
    "$TOOL" -c creds get s3://bucket/out/changed big2.back &&
    cmp big2 big2.back
'

test_expect_success S3RVER 's3: AbortMultipartUpload is reported as unsupported by s3rver' '
    rm -f state &&
    { "$TOOL" -c creds -P 5M -T 5M -r 4M -s state put big \
          s3://bucket/out/aborted >/dev/null 2>&1 & } &&
    pid=$! &&
    wait_part state 1 &&
    kill -9 $pid; wait $pid;
    test_expect_code_ 1 "$TOOL" -c creds -R -1 abort s3://bucket/out/aborted \
        state 2>err &&
    grep -q "does not support AbortMultipartUpload" err &&
    grep -q ENOTSUP err &&
    test_expect_code_ 1 "$TOOL" -c creds abort s3://bucket/out/other \
        state 2>err &&
    grep -q "another URL" err
'

test_expect_success S3RVER 's3: a GET resumes at an offset with Range' '
    head -c $((7 * MIB)) big >part &&
    "$TOOL" -c creds -o $((7 * MIB)) get s3://bucket/out/big part \
        >get.out &&
    test "$(field get.out bytes)" = $((11 * MIB + 123)) &&
    cmp big part
'

test_expect_success S3RVER 's3: a GET to a pipe streams' '
    "$TOOL" -c creds get s3://bucket/in/small - | cmp - small
'

test_expect_success S3RVER 's3: a missing object is ENOENT, named' '
    test_expect_code_ 1 "$TOOL" -c creds get s3://bucket/nope out 2>err &&
    grep -q "s3://bucket/nope: GET: HTTP 404 NoSuchKey" err &&
    grep -q ENOENT err &&
    test_expect_code_ 1 "$TOOL" -c creds get s3://nobucket/k out 2>err &&
    grep -q "NoSuchBucket" err
'

# s3rver stores the body of a PUT cut short as a (truncated) object: it
# checks neither Content-Length nor Content-MD5, which S3 does.  So only
# the multipart case can be checked to publish nothing here.
test_expect_success S3RVER 's3: a cancelled upload stops with ECANCELED' '
    test_expect_code_ 1 "$TOOL" -c creds -x 2M -r 8M put small \
        s3://bucket/out/cancelled-single 2>err &&
    grep -q "s3://bucket/out/cancelled-single: PUT: cancelled" err &&
    grep -q ECANCELED err
'

test_expect_success S3RVER 's3: a cancelled multipart upload publishes nothing' '
    test_expect_code_ 1 "$TOOL" -c creds -x 7M -r 16M -P 5M -T 5M put big \
        s3://bucket/out/cancelled 2>err &&
    grep -q ECANCELED err &&
    grep -q "aborted=0" err &&
    ! "$TOOL" -c creds get s3://bucket/out/cancelled x 2>err &&
    grep -q NoSuchKey err
'

test_expect_success S3RVER 's3: a refused connection is named and not retried forever' '
    s3rver_stop &&
    test_expect_code_ 1 "$TOOL" -c creds -R 1 get s3://bucket/in/small \
        out 2>err &&
    grep -q "s3://bucket/in/small: GET: Couldn.t connect" err &&
    grep -q ECONNREFUSED err
'

test_expect_success NGINX 'start nginx with WebDAV over TLS (a test CA)' '
    endpoints_make_ca "$TRASH/ca" &&
    nginx_dav_start "$TRASH/nginx" "$TRASH/ca" &&
    WWW=$TRASH/nginx/www/dav &&
    BASE=https://127.0.0.1:$NGINX_PORT/dav
'
if test_have_prereq NGINX && [ -z "$NGINX_PID" ]; then
    bail_out "nginx did not start"
fi

test_expect_success NGINX 'https: a download, byte for byte' '
    random_file "$WWW/in.bin" $((5 * MIB + 1)) &&
    "$TOOL" -C ca/ca.crt get "$BASE/in.bin" in.back >get.out &&
    cmp "$WWW/in.bin" in.back &&
    head -c 1000 "$WWW/in.bin" >in.part &&
    "$TOOL" -C ca/ca.crt -o 1000 get "$BASE/in.bin" in.part &&
    cmp "$WWW/in.bin" in.part
'

test_expect_success NGINX 'https: a wrong CA fails clearly and fetches nothing' '
    test_expect_code_ 1 "$TOOL" -C ca/other-ca.crt get "$BASE/in.bin" \
        wrong.out 2>err &&
    grep -q "$BASE/in.bin: GET: .*certificate" err &&
    grep -q "is the CA file right" err &&
    test ! -s wrong.out &&
    test_expect_code_ 1 "$TOOL" get "$BASE/in.bin" wrong.out 2>err &&
    grep -q "certificate" err
'

test_expect_success NGINX 'WebDAV: PUT to a temporary name, then MOVE' '
    random_file out.bin $((9 * MIB + 5)) &&
    "$TOOL" -C ca/ca.crt put out.bin "$BASE/results/out.bin" >put.out &&
    test "$(field put.out requests)" = 2 &&
    cmp out.bin "$WWW/results/out.bin" &&
    test "$(ls -A "$WWW/results")" = out.bin &&
    grep -q "PUT /dav/results/\.out\.bin\.tier-[a-z0-9]*\.part " \
        "$TRASH/nginx/logs/access.log" &&
    grep -q "MOVE /dav/results/\.out\.bin\.tier-" \
        "$TRASH/nginx/logs/access.log"
'

test_expect_success NGINX 'https: HEAD of a file and of a missing one' '
    "$TOOL" -C ca/ca.crt head "$BASE/results/out.bin" >head.out &&
    cat head.out && grep -q "^exists $((9 * MIB + 5)) \"[0-9a-f]*-[0-9a-f]*\"$" head.out &&
    "$TOOL" -C ca/ca.crt head "$BASE/results/none.bin" >head.out &&
    test "$(cat head.out)" = absent &&
    grep -q "HEAD /dav/results/out.bin " "$TRASH/nginx/logs/access.log"
'

test_expect_success NGINX 'WebDAV: a failed upload leaves nothing under the final name' '
    random_file out2.bin $((6 * MIB)) &&
    test_expect_code_ 1 "$TOOL" -C ca/ca.crt -x 2M -r 8M put out2.bin \
        "$BASE/results/out2.bin" 2>err &&
    grep -q ECANCELED err &&
    test ! -e "$WWW/results/out2.bin" &&
    test "$(ls -A "$WWW/results")" = out.bin &&
    { "$TOOL" -C ca/ca.crt -r 2M put out2.bin \
          "$BASE/results/out2.bin" >/dev/null 2>&1 & } &&
    pid=$! && sleep 1 && kill -9 $pid; wait $pid;
    test ! -e "$WWW/results/out2.bin"
'

test_expect_success NGINX 'WebDAV: an upload replaces the final name atomically' '
    random_file out.bin $((2 * MIB)) &&
    "$TOOL" -C ca/ca.crt put out.bin "$BASE/results/out.bin" &&
    cmp out.bin "$WWW/results/out.bin"
'

test_expect_success NGINX 'http: a plain PUT (not atomic) works too' '
    "$TOOL" -C ca/ca.crt -n put out.bin "$BASE/plain.bin" >put.out &&
    test "$(field put.out requests)" = 1 &&
    cmp out.bin "$WWW/plain.bin"
'

test_expect_success NGINX 'https: a missing file is ENOENT; DELETE removes' '
    test_expect_code_ 1 "$TOOL" -C ca/ca.crt get "$BASE/none" x 2>err &&
    grep -q "$BASE/none: GET: HTTP 404" err &&
    "$TOOL" -C ca/ca.crt rm "$BASE/plain.bin" &&
    test ! -e "$WWW/plain.bin" &&
    "$TOOL" -C ca/ca.crt rm "$BASE/plain.bin"
'

test_expect_success NGINX 'a server without WebDAV is reported' '
    test_expect_code_ 1 "$TOOL" -C ca/ca.crt put out.bin \
        "https://127.0.0.1:$NGINX_PORT/nodav/x.bin" 2>err &&
    grep -q "nodav/x.bin: PUT: HTTP 405" err &&
    grep -q ENOTSUP err
'

test_expect_success NGINX 'stop nginx by its PID' '
    pid=$NGINX_PID &&
    nginx_dav_stop && ! kill -0 "$pid" 2>/dev/null
'

test_done
