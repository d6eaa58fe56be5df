# endpoints.sh - test servers for the endpoint library, on loopback
#
#   endpoints_make_ca DIR            a CA (DIR/ca.crt), a server certificate
#                                    for 127.0.0.1/localhost signed by it, and
#                                    an unrelated CA (DIR/other-ca.crt)
#   s3rver_install                   s3rver@3 into $S3RVER_CACHE (npm), once
#   s3rver_start DIR BUCKET...       start s3rver on a free port, data in DIR;
#                                    sets S3RVER_PID and S3RVER_PORT; over
#                                    TLS with S3RVER_CERTS=CERTDIR (the
#                                    server.key/crt of endpoints_make_ca)
#   s3rver_stop                      stop it (by its PID)
#   nginx_dav_start DIR CERTDIR      nginx-light over TLS with WebDAV under
#                                    /dav/, files in DIR/www; sets NGINX_PID
#                                    and NGINX_PORT
#   nginx_dav_stop                   stop it (by its PID)
#
# Servers are started as children of the test script and stopped by their
# own PID, never by name: other developers' servers may run on the machine.

: "${S3RVER_CACHE:=/var/cache/tier-tests/s3rver}"
S3RVER_BIN=$S3RVER_CACHE/node_modules/.bin/s3rver

endpoints_make_ca () {
    _d=$1
    mkdir -p "$_d" || return 1
    (
        cd "$_d" || exit 1
        _ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        # shellcheck disable=SC2086
        openssl req -x509 $_ec -keyout ca.key -out ca.crt -days 2 \
            -subj "/CN=tier test CA" 2>/dev/null || exit 1
        # shellcheck disable=SC2086
        openssl req -x509 $_ec -keyout other-ca.key -out other-ca.crt \
            -days 2 -subj "/CN=tier other CA" 2>/dev/null || exit 1
        # shellcheck disable=SC2086
        openssl req $_ec -keyout server.key -out server.csr \
            -subj "/CN=localhost" 2>/dev/null || exit 1
        printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" \
            "basicConstraints=CA:FALSE" \
            "keyUsage=digitalSignature,keyEncipherment" \
            "extendedKeyUsage=serverAuth" >server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key \
            -CAcreateserial -out server.crt -days 2 -extfile server.ext \
            2>/dev/null || exit 1
    )
}

# npm installs into the cache once (CI reaches the npm registry).
s3rver_install () {
    [ -x "$S3RVER_BIN" ] && return 0
    command -v npm >/dev/null 2>&1 || return 1
    mkdir -p "$S3RVER_CACHE" || return 1
    (cd "$S3RVER_CACHE" && npm install --no-audit --no-fund --silent \
        s3rver@3 >/dev/null 2>&1) || return 1
    [ -x "$S3RVER_BIN" ]
}

S3RVER_PID=""
s3rver_start () {
    _dir=$1
    shift
    _args=""
    for _b in "$@"; do
        _args="$_args --configure-bucket $_b"
    done
    if [ -n "${S3RVER_CERTS:-}" ]; then
        _args="$_args --key $S3RVER_CERTS/server.key"
        _args="$_args --cert $S3RVER_CERTS/server.crt"
    fi
    mkdir -p "$_dir/data" || return 1
    rm -f "$_dir/s3rver.out"
    # shellcheck disable=SC2086
    "$S3RVER_BIN" -d "$_dir/data" -a 127.0.0.1 -p 0 --silent \
        --no-vhost-buckets $_args >"$_dir/s3rver.out" 2>&1 &
    S3RVER_PID=$!
    for _i in $(seq 100); do
        S3RVER_PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' \
            "$_dir/s3rver.out")
        [ -n "$S3RVER_PORT" ] && return 0
        kill -0 "$S3RVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$_dir/s3rver.out" >&2
    return 1
}

s3rver_stop () {
    [ -n "$S3RVER_PID" ] || return 0
    kill "$S3RVER_PID" 2>/dev/null
    for _i in $(seq 50); do
        kill -0 "$S3RVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$S3RVER_PID" 2>/dev/null
    wait "$S3RVER_PID" 2>/dev/null
    S3RVER_PID=""
}

# A free loopback port (the kernel's choice, released again: another
# process could take it before nginx binds it, so callers retry).
free_port () {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

NGINX_PID=""
nginx_dav_start () {
    _dir=$1
    _certs=$2
    mkdir -p "$_dir/www/dav" "$_dir/tmp" "$_dir/logs" || return 1
    chown -R nobody "$_dir/www" "$_dir/tmp" 2>/dev/null
    for _try in 1 2 3; do
        NGINX_PORT=$(free_port) || return 1
        cat >"$_dir/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
user nobody nogroup;
pid $_dir/nginx.pid;
error_log $_dir/logs/error.log warn;
events { worker_connections 64; }
http {
    access_log $_dir/logs/access.log;
    client_body_temp_path $_dir/tmp/body;
    proxy_temp_path $_dir/tmp/proxy;
    fastcgi_temp_path $_dir/tmp/fastcgi;
    uwsgi_temp_path $_dir/tmp/uwsgi;
    scgi_temp_path $_dir/tmp/scgi;
    server {
        listen 127.0.0.1:$NGINX_PORT ssl;
        server_name localhost;
        ssl_certificate $_certs/server.crt;
        ssl_certificate_key $_certs/server.key;
        root $_dir/www;
        client_max_body_size 0;
        location /dav/ {
            dav_methods PUT DELETE MOVE;
            create_full_put_path on;
            dav_access user:rw group:r all:r;
        }
    }
}
EOF
        /usr/sbin/nginx -c "$_dir/nginx.conf" -p "$_dir" \
            >"$_dir/logs/stderr" 2>&1 &
        NGINX_PID=$!
        for _i in $(seq 50); do
            if curl -s -o /dev/null --cacert "$_certs/ca.crt" \
                "https://127.0.0.1:$NGINX_PORT/"; then
                return 0
            fi
            kill -0 "$NGINX_PID" 2>/dev/null || break
            sleep 0.1
        done
        nginx_dav_stop
    done
    cat "$_dir/logs/stderr" "$_dir/logs/error.log" >&2 2>/dev/null
    return 1
}

nginx_dav_stop () {
    [ -n "$NGINX_PID" ] || return 0
    kill -QUIT "$NGINX_PID" 2>/dev/null     # graceful: workers finish
    for _i in $(seq 50); do
        kill -0 "$NGINX_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$NGINX_PID" 2>/dev/null; then
        for _w in $(pgrep -P "$NGINX_PID"); do     # its workers
            kill -9 "$_w" 2>/dev/null
        done
        kill -9 "$NGINX_PID" 2>/dev/null
    fi
    wait "$NGINX_PID" 2>/dev/null
    NGINX_PID=""
}
