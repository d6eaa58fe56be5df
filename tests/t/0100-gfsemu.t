#!/bin/bash
# 0100-gfsemu.t - the GFS emulator: exact counters, POSIX permissions for
# every user, root squash, the shared throttle (checked through its own
# accounting, never through the test's wall-clock time), injected faults
# and hangs, and clean stops.
test_description='GFS emulator (tests/gfsemu)'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/gfsemu.sh"

test_have_prereq ROOT,FUSE || skip_all "gfsemu needs root and FUSE"
cd "$TRASH" || bail_out "cannot enter $TRASH"    # scratch files go there

MIB=1048576
B=$TRASH/backing        # the "GFS" itself
M=$TRASH/gfs            # ... as clients see it, through the emulator
MMAP=$TIER_BUILDDIR/tests/gfsemu/gfsemu-mmap
started=""              # every mount point we started, for the checks

# Start an emulator and remember it; stop every one at exit.
start () {
    gfsemu_start "$@" && started="$started $2" \
        && pids="${pids:-} $(gfsemu_pid "$2")"
}
test_at_exit 'for m in $started; do gfsemu_stop "$m"; done'

# Helpers in the test's own shell: they run as root unless told.
as () {
    _u=$1
    shift
    runuser -u "$_u" -- "$@"
}
owner () {
    stat -c '%u:%g' "$1"
}
# Every walk into the mount costs a GETATTR of its root (the kernel's
# exec check, default_permissions, attr_timeout 0), reading the control
# files included.  These print what else is nonzero.
nonzero_totals () {
    gfsemu_stats "$1" | grep '^total\.' | grep -v '^total.getattr ' \
        | grep -v ' 0$'
}
nonroot_files () {
    gfsemu_stats "$1" | grep '^file\.' | grep -v '^file.getattr [0-9]* \.$'
}
test_expect_code_ () {
    _want=$1
    shift
    "$@" 2>/dev/null
    test $? = "$_want"
}
# N stat () calls of PATH, by the shell itself (no process, no other I/O).
stat_n () {
    _i=0
    while [ "$_i" -lt "$1" ]; do
        test -e "$2" || return 1
        _i=$((_i + 1))
    done
}
# The value of KEY in a saved stats snapshot.
snap () {
    awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }' "$1"
}

test_expect_success 'gfsemu is built and documents its options' '
    test -x "$GFSEMU" &&
    "$GFSEMU" --help >help.out &&
    grep -q "latency=USEC" help.out &&
    grep -q "bandwidth=BYTES" help.out &&
    grep -q "root_squash" help.out &&
    grep -q "fault=PATTERN:OP:ERROR" help.out
'

test_expect_success 'bad options are refused before mounting' '
    mkdir -p "$TRASH/bad" "$B" &&
    ! "$GFSEMU" "$B" "$TRASH/bad" -f -o latency=soon 2>err.out &&
    grep -q "latency=soon" err.out &&
    ! "$GFSEMU" "$B" "$TRASH/bad" -f -o bandwidth=fast 2>err.out &&
    grep -q "bandwidth=fast" err.out &&
    ! "$GFSEMU" "$B" "$TRASH/bad" -f -o timeout=-1 2>err.out &&
    ! "$GFSEMU" "$B" "$TRASH/bad" -f -o no_such_option 2>err.out &&
    grep -q "no_such_option" err.out &&
    ! "$GFSEMU" "$B" "$TRASH/bad" -f -o "fault=x:reed:EIO" 2>err.out &&
    grep -q "unknown request .reed." err.out &&
    ! "$GFSEMU" "$B" "$TRASH/bad" -f -o fault_seed=many 2>err.out &&
    grep -q "fault_seed=many" err.out &&
    ! "$GFSEMU" "$TRASH/missing" "$TRASH/bad" -f 2>err.out &&
    ! gfsemu_mounted "$TRASH/bad"
'

test_expect_success 'users alice and bob exist' '
    (
        for u in alice bob; do
            id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u" || exit 1
        done
    )
'

test_expect_success 'a backing tree: data, a private home, a group dir' '
    chmod 755 "$B" &&
    mkdir -p "$B/data" "$B/alice" "$B/proj" &&
    head -c $((10 * MIB)) /dev/urandom >"$B/data/f10" &&
    head -c $((5 * MIB)) /dev/urandom >"$B/data/f5a" &&
    head -c $((5 * MIB)) /dev/urandom >"$B/data/f5b" &&
    echo small >"$B/data/small" &&
    chmod 644 "$B"/data/* &&
    chown alice:alice "$B/alice" && chmod 700 "$B/alice" &&
    chown root:4242 "$B/proj" && chmod 2770 "$B/proj"
'

test_expect_success 'start the emulator (defaults: timeouts 0, no cap)' '
    start "$B" "$M" &&
    gfsemu_mounted "$M" &&
    test "$GFSEMU_PID" = "$(gfsemu_pid "$M")" &&
    test "$(gfsemu_value "$M" format)" = 1 &&
    test "$(gfsemu_value "$M" config.attr_timeout)" = 0 &&
    test "$(gfsemu_value "$M" config.entry_timeout)" = 0
'
gfsemu_mounted "$M" || bail_out "the emulator did not start"

test_expect_success 'the stats file is one "key value [path]" per line' '
    gfsemu_stats "$M" >stats.out &&
    ! grep -Ev "^(format 1|[a-z_]+(\.[a-z_]+)? [0-9.e+-]+( .+)?)$" \
        stats.out &&
    grep -q "^total.getattr " stats.out &&
    grep -q "^throttle.stall_ns " stats.out
'

test_expect_success 'the control directory is hidden and not counted' '
    ls -a "$M" >ls.out &&
    ! grep -q gfsemu ls.out &&
    ls "$M/.gfsemu" >ctl.out &&
    grep -qx stats ctl.out && grep -qx reset ctl.out &&
    grep -qx fault ctl.out &&
    gfsemu_reset "$M" &&
    g0=$(gfsemu_stat "$M" . getattr) &&
    for i in 1 2 3 4 5; do cat "$M/.gfsemu/stats" >/dev/null; done &&
    test "$(gfsemu_stat "$M" . getattr)" = $((g0 + 6)) &&
    test -z "$(nonzero_totals "$M")" &&
    test -z "$(nonroot_files "$M")"
'

test_expect_success 'a 10 MiB file read twice through two opens counts 20 MiB' '
    gfsemu_reset "$M" &&
    cat "$M/data/f10" >copy1 &&
    cat "$M/data/f10" >copy2 &&
    cmp copy1 "$B/data/f10" && cmp copy2 "$B/data/f10" &&
    test "$(gfsemu_stat "$M" data/f10 read_bytes)" = $((20 * MIB)) &&
    test "$(gfsemu_value "$M" total.read_bytes)" = $((20 * MIB)) &&
    test "$(gfsemu_stat "$M" data/f10 open)" = 2 &&
    test "$(gfsemu_stat "$M" data/f10 lookup)" = 2 &&
    test "$(gfsemu_stat "$M" "$M/data/f10" open)" = 2 &&
    test "$(gfsemu_value "$M" total.write_bytes)" = 0
'

# Open handles: a gauge of the files open for reading (and for writing)
# and its peak since the last reset.  RELEASE is asynchronous (the kernel
# sends it after the last close), so the gauge falls shortly after.
gauge_is () {
    test "$(gfsemu_value "$M" "open.$1")" = "$2"
}
test_expect_success 'a gauge counts open read and write handles, with its peak' '
    gfsemu_reset "$M" &&
    test "$(gfsemu_value "$M" open.readers)" = 0 &&
    test "$(gfsemu_value "$M" open.readers_peak)" = 0 &&
    test "$(gfsemu_value "$M" open.writers_peak)" = 0 &&
    exec 7<"$M/data/f10" 8<"$M/data/f5a" 9<"$M/data/small" &&
    test "$(gfsemu_value "$M" open.readers)" = 3 &&
    test "$(gfsemu_value "$M" open.writers)" = 0 &&
    exec 7<&- 8<&- &&
    wait_for 10 gauge_is readers 1 &&
    exec 6>"$M/data/gauge" 5<>"$M/data/small" &&
    test "$(gfsemu_value "$M" open.readers)" = 2 &&
    test "$(gfsemu_value "$M" open.writers)" = 2 &&
    exec 9<&- 6>&- 5<&- &&
    wait_for 10 gauge_is readers 0 &&
    wait_for 10 gauge_is writers 0 &&
    test "$(gfsemu_value "$M" open.readers_peak)" = 3 &&
    test "$(gfsemu_value "$M" open.writers_peak)" = 2 &&
    gfsemu_reset "$M" &&
    test "$(gfsemu_value "$M" open.readers_peak)" = 0 &&
    rm -f "$B/data/gauge"
'

test_expect_success 'the peak is of handles open at once: N readers one after another peak at 1' '
    gfsemu_reset "$M" &&
    for i in 1 2 3 4 5; do
        cat "$M/data/small" >/dev/null &&
        wait_for 10 gauge_is readers 0 || exit 1
    done &&
    test "$(gfsemu_stat "$M" data/small open)" = 5 &&
    test "$(gfsemu_value "$M" open.readers_peak)" = 1
'

test_expect_success 'N stat calls count N lookups and N getattrs' '
    gfsemu_reset "$M" &&
    stat_n 25 "$M/data/small" &&
    test "$(gfsemu_stat "$M" data/small getattr)" = 25 &&
    test "$(gfsemu_stat "$M" data/small lookup)" = 25 &&
    test "$(gfsemu_stat "$M" data/small open)" = 0 &&
    test "$(gfsemu_stat "$M" data lookup)" = 25
'

test_expect_success 'a lookup of a missing file is a miss, not an error' '
    gfsemu_reset "$M" &&
    ! test -e "$M/data/nothing" &&
    test "$(gfsemu_stat "$M" data/nothing lookup)" = 1 &&
    test "$(gfsemu_stat "$M" data/nothing lookup_miss)" = 1 &&
    test "$(gfsemu_value "$M" total.errors)" = 0
'

test_expect_success 'an unknown counter name is an error, not 0' '
    test_expect_code_ 2 gfsemu_stat "$M" data/f10 read_byte &&
    test_expect_code_ 2 gfsemu_value "$M" total.nothing
'

test_expect_success 'a shared read-only mmap reads through the emulator' '
    gfsemu_reset "$M" &&
    "$MMAP" "$M/data/f10" >mapped &&
    cmp mapped "$B/data/f10" &&
    test "$(gfsemu_stat "$M" data/f10 read_bytes)" -ge $((10 * MIB))
'

test_expect_success 'writes are counted; root creates files as root' '
    gfsemu_reset "$M" &&
    dd if="$B/data/f5a" of="$M/data/w3" bs=1M count=3 status=none &&
    cmp -n $((3 * MIB)) "$B/data/w3" "$B/data/f5a" &&
    test "$(gfsemu_stat "$M" data/w3 create)" = 1 &&
    test "$(gfsemu_stat "$M" data/w3 write_bytes)" = $((3 * MIB)) &&
    test "$(gfsemu_value "$M" total.write_bytes)" = $((3 * MIB)) &&
    test "$(owner "$B/data/w3")" = 0:0
'

test_expect_success 'alice creates files as alice, honouring her umask' '
    as alice sh -c "umask 077 && echo secret >$M/alice/secret" &&
    as alice mkdir "$M/alice/sub" &&
    test "$(owner "$B/alice/secret")" = "$(id -u alice):$(id -g alice)" &&
    test "$(owner "$B/alice/sub")" = "$(id -u alice):$(id -g alice)" &&
    test "$(stat -c %a "$B/alice/secret")" = 600 &&
    as alice cat "$M/alice/secret" | grep -qx secret &&
    as alice chmod 640 "$M/alice/secret" &&
    test "$(stat -c %a "$B/alice/secret")" = 640 &&
    as alice chmod 600 "$M/alice/secret"
'

test_expect_success 'bob is refused by alice'"'"'s permissions' '
    ! as bob cat "$M/alice/secret" 2>err.out &&
    grep -q "Permission denied" err.out &&
    ! as bob touch "$M/alice/bobwashere" 2>/dev/null &&
    test ! -e "$B/alice/bobwashere" &&
    ! as bob chmod 644 "$M/data/w3" 2>/dev/null &&
    echo public >"$B/data/public" && chmod 600 "$B/data/public" &&
    ! as bob cat "$M/data/public" 2>/dev/null &&
    cat "$M/alice/secret" | grep -qx secret
'

test_expect_success 'supplementary groups count (setgid group dir)' '
    setpriv --reuid=$(id -u bob) --regid=$(id -g bob) --groups=4242 \
        sh -c "echo hi >$M/proj/bobfile" &&
    test "$(owner "$B/proj/bobfile")" = "$(id -u bob):4242" &&
    ! setpriv --reuid=$(id -u bob) --regid=$(id -g bob) --clear-groups \
        touch "$M/proj/nogroup" 2>/dev/null &&
    test ! -e "$B/proj/nogroup"
'

test_expect_success 'rename, unlink, mkdir and rmdir are counted per path' '
    gfsemu_reset "$M" &&
    mkdir "$M/data/dir" && mv "$M/data/w3" "$M/data/dir/w3" &&
    rm "$M/data/dir/w3" && rmdir "$M/data/dir" &&
    test "$(gfsemu_stat "$M" data/dir mkdir)" = 1 &&
    test "$(gfsemu_stat "$M" data/w3 rename)" = 1 &&
    test "$(gfsemu_stat "$M" data/dir/w3 unlink)" = 1 &&
    test "$(gfsemu_stat "$M" data/dir rmdir)" = 1 &&
    test ! -e "$B/data/w3"
'

test_expect_success 'reset zeroes every counter' '
    cat "$M/data/small" >/dev/null &&
    resets=$(gfsemu_value "$M" resets) &&
    gfsemu_reset "$M" &&
    test "$(gfsemu_value "$M" resets)" = $((resets + 1)) &&
    test -z "$(nonzero_totals "$M")" &&
    test -z "$(nonroot_files "$M")" &&
    test "$(gfsemu_value "$M" throttle.ops)" = 0
'

T=$TRASH/gfs-timeout
test_expect_success 'with timeout=60 the kernel caches attributes' '
    start "$B" "$T" timeout=60 &&
    test "$(gfsemu_value "$T" config.attr_timeout)" = 60 &&
    stat_n 25 "$T/data/small" &&
    test "$(gfsemu_stat "$T" data/small getattr)" -lt 25 &&
    test "$(gfsemu_stat "$T" data/small lookup)" -lt 25 &&
    gfsemu_stop "$T"
'

S=$TRASH/gfs-squash
test_expect_success 'root_squash: root cannot read alice'"'"'s 0600 file' '
    start "$B" "$S" root_squash &&
    test "$(gfsemu_value "$S" config.root_squash)" = 1 &&
    ! cat "$S/alice/secret" 2>err.out &&
    grep -q "Permission denied" err.out &&
    ! ls "$S/alice" >/dev/null 2>&1 &&
    ! cat "$S/data/public" 2>/dev/null &&
    cat "$S/data/small" | grep -qx small &&
    as alice cat "$S/alice/secret" | grep -qx secret
'

test_expect_success 'root_squash: files root creates belong to nobody' '
    chmod 1777 "$B/data" &&
    echo mine >"$S/data/rootfile" &&
    test "$(owner "$B/data/rootfile")" = 65534:65534 &&
    ! chown alice "$S/data/rootfile" 2>err.out &&
    grep -q "Operation not permitted" err.out &&
    ! echo x >"$S/data/f10" 2>/dev/null &&
    chmod 755 "$B/data"
'

test_expect_success 'root_squash: root still reads and resets the counters' '
    gfsemu_reset "$S" &&
    test "$(gfsemu_value "$S" total.open)" = 0 &&
    gfsemu_stop "$S"
'

R=$TRASH/gfs-ro
test_expect_success 'standard FUSE options still work (ro)' '
    start "$B" "$R" ro &&
    cat "$R/data/small" >/dev/null &&
    ! touch "$R/data/new" 2>err.out &&
    grep -q "Read-only" err.out &&
    gfsemu_stop "$R"
'

# -o acl: POSIX ACLs as a real GFS has them, visible through the mount
# (what tier's share = world check reads) and enforced; without it the
# mount has no extended attributes.
A=$TRASH/gfs-acl
test_expect_success 'acl: an ACL set through the mount is seen and enforced; none without it' '
    mkdir -p "$A" && start "$B" "$A" acl &&
    cp "$B/data/small" "$B/data/acl" && chmod 644 "$B/data/acl" &&
    setfacl -m u:bob:--- "$A/data/acl" &&
    getfacl -p "$A/data/acl" | grep -x "user:bob:---" &&
    getfacl -p "$B/data/acl" | grep -x "user:bob:---" &&
    ! as bob cat "$A/data/acl" >/dev/null 2>&1 && as alice cat "$A/data/acl" >/dev/null &&
    setfacl -b "$A/data/acl" && as bob cat "$A/data/acl" >/dev/null &&
    gfsemu_stop "$A" && start "$B" "$A" &&
    ! setfacl -m u:bob:--- "$A/data/acl" 2>err.out && cat err.out &&
    gfsemu_stop "$A" && rm -f "$B/data/acl"
'

# The throttle is judged by its own accounting.  With rate R and bucket
# C, moving X bytes takes at least (X - C) / R of held-back time (less
# only by the little processing time when no one waits), and the stall
# can never exceed delayed_bytes / R (+1 ns rounding per request).
check_throttle () {
    _m=$1 _x=$2 _lo_pct=$3
    _r=$(gfsemu_value "$_m" config.bandwidth) &&
    _c=$(gfsemu_value "$_m" config.burst) &&
    _db=$(gfsemu_value "$_m" throttle.delayed_bytes) &&
    _do=$(gfsemu_value "$_m" throttle.delayed_ops) &&
    _w=$(gfsemu_value "$_m" throttle.wait_ns) &&
    _s=$(gfsemu_value "$_m" throttle.stall_ns) &&
    _lo=$(( (_x - _c) * 1000000000 / _r * _lo_pct / 100 )) &&
    _hi=$(( _db * 1000000000 / _r + _do + 1 )) &&
    echo "rate $_r burst $_c delayed $_db/$_do wait $_w stall $_s" \
        "bounds [$_lo, $_hi]" &&
    test "$(gfsemu_value "$_m" throttle.bytes)" = "$_x" &&
    test "$_db" -gt 0 && test "$_db" -le "$_x" &&
    test "$_s" -ge "$_lo" && test "$_s" -le "$_hi" &&
    test "$_w" -ge "$_s"
}

L=$TRASH/gfs-bw
test_expect_success 'bandwidth=20M: the throttle accounts for a 10 MiB read' '
    start "$B" "$L" bandwidth=20M &&
    test "$(gfsemu_value "$L" config.bandwidth)" = $((20 * MIB)) &&
    gfsemu_reset "$L" &&
    cat "$L/data/f10" >/dev/null &&
    test "$(gfsemu_value "$L" total.read_bytes)" = $((10 * MIB)) &&
    check_throttle "$L" $((10 * MIB)) 75
'

test_expect_success 'the cap is shared by all clients (alice and bob at once)' '
    gfsemu_reset "$L" &&
    { as alice cat "$L/data/f5a" >/dev/null & a=$!; } &&
    { as bob cat "$L/data/f5b" >/dev/null & b=$!; } &&
    wait $a && wait $b &&
    test "$(gfsemu_value "$L" total.read_bytes)" = $((10 * MIB)) &&
    check_throttle "$L" $((10 * MIB)) 75 &&
    gfsemu_stop "$L"
'

D=$TRASH/gfs-latency
test_expect_success 'latency=2000: every counted request waits 2 ms' '
    start "$B" "$D" latency=2000 &&
    gfsemu_reset "$D" &&
    stat_n 5 "$D/data/small" &&
    cat "$D/data/small" >/dev/null &&
    ls "$D/data" >/dev/null &&
    gfsemu_stats "$D" >lat.out &&
    ops=$(snap lat.out latency.ops) &&
    test "$ops" -ge 20 &&
    test "$(snap lat.out latency.wait_ns)" = $((ops * 2000000)) &&
    delayed=0 &&
    for f in lookup getattr setattr open create opendir readdir read write \
             fsync mkdir mknod symlink readlink link unlink rmdir rename \
             statfs; do
        delayed=$((delayed + $(snap lat.out total.$f)))
    done &&
    test "$delayed" = "$ops" &&
    gfsemu_stop "$D"
'

# Faults: rules from the options and the control file .gfsemu/fault.
# Each check looks at what the application got and at the rule's own
# counters; hangs are waited for through fault.hung, never by time.
F=$TRASH/gfs-fault
hung_is () {
    test "$(gfsemu_value "$F" fault.hung)" = "$1"
}
gone () {
    ! kill -0 "$1" 2>/dev/null
}
# N appends to $1, one WRITE each: a string of 0 (written) and 1 (failed).
appends () {
    _i=0
    _s=
    while [ "$_i" -lt "$2" ]; do
        if echo "$_i" >>"$1" 2>/dev/null; then _s=${_s}0; else _s=${_s}1; fi
        _i=$((_i + 1))
    done
    printf '%s' "$_s"
}

test_expect_success 'fault rules from the options: the fault file and stats show them' '
    mkdir -p "$B/data/out" &&
    start "$B" "$F" "fault_seed=42,fault=data/out/*.dat:write:EIO:2,fault=data/new*:create:ENOSPC" &&
    ls "$F/.gfsemu" | grep -qx fault &&
    gfsemu_faults "$F" >faults.out &&
    grep -qx "seed=42" faults.out &&
    grep -qxF "data/out/*.dat:write:EIO:2 # hits 0 matched 0" faults.out &&
    grep -qxF "data/new*:create:ENOSPC # hits 0 matched 0" faults.out &&
    test "$(gfsemu_value "$F" fault.rules)" = 2 &&
    test "$(gfsemu_value "$F" fault.seed)" = 42 &&
    test "$(gfsemu_value "$F" fault.hits)" = 0
'

test_expect_success 'EIO on the 2nd write of a pattern only' '
    echo a >"$F/data/out/a.txt" && echo b >>"$F/data/out/a.txt" &&
    echo 1 >>"$F/data/out/a.dat" &&
    ! echo 2 2>err.out >>"$F/data/out/a.dat" &&
    grep -q "Input/output error" err.out &&
    echo 3 >>"$F/data/out/a.dat" &&
    echo 4 >>"$F/data/out/b.dat" &&
    printf "1\n3\n" | cmp - "$B/data/out/a.dat" &&
    test "$(cat "$B/data/out/a.txt")" = "a
b" &&
    test "$(gfsemu_fault_hits "$F" "data/out/*.dat:write:EIO:2")" = 1 &&
    grep -qxF "data/out/*.dat:write:EIO:2 # hits 1 matched 4" \
        "$F/.gfsemu/fault" &&
    test "$(gfsemu_value "$F" fault.hits)" = 1 &&
    test "$(gfsemu_stat "$F" data/out/a.dat errors)" = 1 &&
    test "$(gfsemu_stat "$F" data/out/a.dat write)" = 3
'

test_expect_success 'ENOSPC on create, not on the open of an existing file' '
    ! touch "$F/data/newfile" 2>err.out &&
    grep -q "No space left on device" err.out &&
    test ! -e "$B/data/newfile" &&
    echo old >"$B/data/new_exists" &&
    echo new >"$F/data/new_exists" &&
    test "$(cat "$B/data/new_exists")" = new &&
    test "$(gfsemu_fault_hits "$F" "data/new*:create:ENOSPC")" = 1
'

test_expect_success 'a bad rule, or a user, changes nothing' '
    ! gfsemu_fault "$F" "data/*:reed:EIO" 2>err.out &&
    grep -q "Invalid argument" err.out &&
    ! as alice sh -c "echo \"*:any:EIO\" >$F/.gfsemu/fault" 2>/dev/null &&
    test "$(gfsemu_value "$F" fault.rules)" = 2 &&
    test "$(gfsemu_value "$F" fault.hits)" = 2 &&
    cat "$F/data/small" >/dev/null
'

test_expect_success 'EACCES on open of one path; new rules replace the old' '
    gfsemu_fault "$F" "data/small:open:EACCES" &&
    test "$(gfsemu_value "$F" fault.rules)" = 1 &&
    ! cat "$F/data/small" 2>err.out &&
    grep -q "Permission denied" err.out &&
    test -e "$F/data/small" &&
    cat "$F/data/public" >/dev/null &&
    touch "$F/data/newfile" && rm "$F/data/newfile" &&
    test "$(gfsemu_fault_hits "$F" data/small:open:EACCES)" = 1
'

test_expect_success 'a short write: dd is told half, and writes the rest' '
    gfsemu_fault "$F" "data/short:write:short:1" &&
    strace -o dd.trace -e trace=write \
        dd if="$B/data/f5a" of="$F/data/short" bs=1M count=1 status=none &&
    grep -E "^write\(1, .*, 1048576\) += 524288$" dd.trace &&
    grep -E "^write\(1, .*, 524288\) += 524288$" dd.trace &&
    cmp -n $MIB "$B/data/f5a" "$B/data/short" &&
    test "$(stat -c %s "$B/data/short")" = $MIB &&
    test "$(gfsemu_stat "$F" data/short write)" = 2 &&
    test "$(gfsemu_fault_hits "$F" data/short:write:short:1)" = 1
'

test_expect_success 'a probability rule picks the same calls for a seed' '
    gfsemu_fault "$F" "data/p*:write:EIO:p50" &&
    test "$(gfsemu_value "$F" fault.seed)" = 42 &&
    p1=$(appends "$F/data/p1" 32) &&
    gfsemu_fault "$F" "data/p*:write:EIO:p50" &&
    p2=$(appends "$F/data/p2" 32) &&
    gfsemu_fault "$F" "seed=7" "data/p*:write:EIO:p50" &&
    p3=$(appends "$F/data/p1" 32) &&
    echo "seed 42: $p1, again: $p2, seed 7: $p3" &&
    test "$p1" = "$p2" && test "$p1" != "$p3" &&
    case $p1 in *0*1*|*1*0*) ;; *) false ;; esac &&
    ones=$(printf "%s" "$p3" | tr -d 0 | wc -c) &&
    test "$(gfsemu_value "$F" fault.hits)" = "$ones" &&
    rm -f "$B"/data/p[12]
'

test_expect_success 'a hung read holds its reader; other paths are answered' '
    gfsemu_fault "$F" "data/f10:read:hang" &&
    { dd if="$F/data/f10" of=hang.out bs=64k iflag=direct status=none \
        2>hang.err & hp=$!; } &&
    echo "$hp" >hang.pid &&
    wait_for 10 hung_is 1 &&
    timeout -k 5 10 stat "$F/data/small" >/dev/null &&
    timeout -k 5 10 cat "$F/data/f5a" | cmp - "$B/data/f5a" &&
    timeout -k 5 10 ls "$F/data" >/dev/null &&
    kill -0 "$hp" && hung_is 1
'

test_expect_success 'clearing the rules answers the hung read with EIO' '
    hp=$(cat hang.pid) &&
    gfsemu_fault_clear "$F" &&
    wait_for 10 gone "$hp" &&
    { wait "$hp"; test $? != 0; } &&
    grep -q "Input/output error" hang.err &&
    hung_is 0 &&
    test "$(gfsemu_value "$F" fault.rules)" = 0 &&
    cat "$F/data/f10" | cmp - "$B/data/f10"
'

test_expect_success 'gfsemu_abort ends a hang: the mount then reports ENOTCONN' '
    gfsemu_fault "$F" "data/f5b:read:hang" &&
    { cat "$F/data/f5b" >/dev/null 2>abort.err & hp=$!; } &&
    wait_for 10 hung_is 1 &&
    fp=$(gfsemu_pid "$F") &&
    gfsemu_abort "$F" &&
    wait_for 10 gone "$hp" &&
    { wait "$hp"; test $? != 0; } &&
    ! kill -0 "$fp" 2>/dev/null &&
    ! stat "$F/data/small" 2>err.out &&
    grep -q "Transport endpoint is not connected" err.out &&
    gfsemu_stop "$F" && ! gfsemu_mounted "$F"
'

test_expect_success 'the emulator starts again on that mount point' '
    start "$B" "$F" &&
    test "$(gfsemu_value "$F" fault.rules)" = 0 &&
    cat "$F/data/f5b" | cmp - "$B/data/f5b" &&
    gfsemu_stop "$F"
'

O=$TRASH/overlay
test_expect_success 'the emulator can be mounted over its own backing dir' '
    mkdir -p "$O" && echo over >"$O/file" &&
    start "$O" "$O" &&
    cat "$O/file" | grep -qx over &&
    test "$(gfsemu_stat "$O" file read_bytes)" = 5 &&
    echo more >"$O/new" &&
    gfsemu_stop "$O" &&
    test -f "$O/new" && ! gfsemu_mounted "$O"
'

# A mount namespace made while a mount is up (a job's on another test's
# cluster, or unshare -m, which makes its copy private) keeps the FUSE
# connection after the unmount here: stop ends it all the same.
C=$TRASH/gfs-copied
holds_copy () {
    grep -qF " $C " "/proc/$1/mountinfo"
}
test_expect_success 'stop ends an emulator whose mount another namespace holds' '
    start "$B" "$C" &&
    cp_pid=$(gfsemu_pid "$C") &&
    { unshare -m --propagation private sleep 600 & } &&
    holder=$! &&
    test_at_exit "kill $holder" &&
    wait_for 10 holds_copy "$holder" &&
    gfsemu_stop "$C" &&
    ! gfsemu_mounted "$C" &&
    ! kill -0 "$cp_pid" 2>/dev/null &&
    kill "$holder"
'

test_expect_success 'stop unmounts and leaves no gfsemu process' '
    gfsemu_stop "$M" &&
    ! gfsemu_mounted "$M" &&
    ( for p in $pids; do ! kill -0 "$p" 2>/dev/null || exit 1; done ) &&
    exe=$(readlink -f "$GFSEMU") &&
    (
        for p in /proc/[0-9]*; do
            test "$(readlink "$p/exe" 2>/dev/null)" = "$exe" || continue
            ! tr "\0" " " <"$p/cmdline" | grep -qF "$TRASH" || exit 1
        done
    ) &&
    started=""
'

test_expect_success 'the emulators logged nothing (no errors, no leaks)' '
    (
        for log in "$TRASH"/gfsemu.*.log; do
            test ! -s "$log" || { cat "$log"; exit 1; }
        done
    )
'

test_done
