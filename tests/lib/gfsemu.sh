# gfsemu.sh - start, stop and read the GFS emulator (tests/gfsemu/gfsemu)
#
# Sourced by tests and benchmarks (after tap.sh, or on its own):
#
#   gfsemu_start BACKING MOUNT [OPTS] [ARG...]
#       Mount BACKING at MOUNT (created if missing; BACKING may be MOUNT
#       itself) and wait until it serves requests.  OPTS is a -o option
#       string such as latency=100,bandwidth=20M,root_squash; further
#       ARGs go to gfsemu as they are.  The emulator runs in the
#       foreground as a background job of this shell; its PID is kept in
#       a file (and in GFSEMU_PID, for the caller) and its output in
#       $GFSEMU_RUNDIR/gfsemu.<mount>.log.
#   gfsemu_stop MOUNT
#       Unmount (fusermount3 -u, else umount), then wait for that PID to
#       exit.  If the file system is busy the emulator gets SIGTERM (by
#       its PID), which detaches the mount; the status is then 1.
#   gfsemu_pid MOUNT            the emulator's PID
#   gfsemu_stat MOUNT PATH FIELD
#       One per-file counter (0 when the file has none).  PATH is relative
#       to the mount ("." is its root) or an absolute path under MOUNT.
#   gfsemu_value MOUNT KEY      a global value: total.read_bytes,
#                               throttle.stall_ns, latency.ops, config.burst
#   gfsemu_reset MOUNT          zero every counter
#   gfsemu_stats MOUNT          the whole stats file
#   gfsemu_fault MOUNT RULE...  replace the fault rules by these (each
#                               PATTERN:OP:ERROR[:WHEN] or seed=S; see
#                               tests/gfsemu/README.md); a rule that does
#                               not parse is an error and changes nothing
#   gfsemu_fault_clear MOUNT    no more faults (hung requests get EIO)
#   gfsemu_faults MOUNT         the rules, each with "# hits H matched M"
#   gfsemu_fault_hits MOUNT RULE    how often RULE (as written) fired
#   gfsemu_abort MOUNT          abort the FUSE connection (as
#       /sys/fs/fuse/connections/N/abort does, N the mount's minor device
#       number): every request in flight, hung ones included, fails
#       (ECONNABORTED), later ones get ENOTCONN; the emulator exits
#       (waited for) and the dead mount stays until gfsemu_stop
#
# An unknown FIELD or KEY is an error (status 2), never a silent 0.
#
# Environment: GFSEMU (the binary; default the build tree's),
# GFSEMU_RUNDIR (pid and log files; default $TRASH, else ${TMPDIR:-/tmp}),
# GFSEMU_TIMEOUT (seconds to wait for a mount or an exit; default 10).

: "${GFSEMU:=${TIER_BUILDDIR:-.}/tests/gfsemu/gfsemu}"

gfsemu_rundir_ () {
    printf '%s' "${GFSEMU_RUNDIR:-${TRASH:-${TMPDIR:-/tmp}}}"
}

# The absolute path of $1 with symlinks resolved, as mountinfo shows it,
# found without entering the mount itself (that would be counted, and
# hangs if the emulator does).
gfsemu_abspath_ () {
    _gd=$(cd "$(dirname "$1")" 2>/dev/null && pwd -P) || return 1
    _gn=$(basename "$1")
    case $_gd in
        /) printf '/%s' "$_gn" ;;
        *) printf '%s/%s' "$_gd" "$_gn" ;;
    esac
}

# The state file name of a mount: its absolute path with / as %.
gfsemu_key_ () {
    _gk=$(gfsemu_abspath_ "$1") || _gk=$1
    printf '%s' "$_gk" | tr '/' '%'
}

gfsemu_pidfile_ () {
    printf '%s/gfsemu.%s.pid' "$(gfsemu_rundir_)" "$(gfsemu_key_ "$1")"
}

gfsemu_log () {
    printf '%s/gfsemu.%s.log' "$(gfsemu_rundir_)" "$(gfsemu_key_ "$1")"
}

# The mountinfo device ("0:N") of the gfsemu file system mounted at $1
# (spaces as \040), read without entering the mount; fails if none.
gfsemu_dev_ () {
    _gabs=$(gfsemu_abspath_ "$1") || return 1
    _gabs=$(printf '%s' "$_gabs" | sed 's/ /\\040/g')
    awk -v m="$_gabs" '
        $5 == m {
            for (i = 7; i <= NF; i++)
                if ($i == "-") {
                    if ($(i + 1) == "fuse.gfsemu")
                        dev = $3
                    break
                }
        }
        END { if (dev == "") exit 1; print dev }' /proc/self/mountinfo
}

# Is a gfsemu file system mounted at $1?
gfsemu_mounted () {
    gfsemu_dev_ "$1" >/dev/null
}

gfsemu_pid () {
    cat "$(gfsemu_pidfile_ "$1")" 2>/dev/null
}

gfsemu_start () {
    if [ $# -lt 2 ]; then
        echo "usage: gfsemu_start BACKING MOUNT [OPTS] [ARG...]" >&2
        return 2
    fi
    _gb=$1
    _gm=$2
    shift 2
    if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
        _go=$1
        shift
        if [ -n "$_go" ]; then
            set -- -o "$_go" "$@"
        fi
    fi
    mkdir -p "$_gm" || return 1
    _gpf=$(gfsemu_pidfile_ "$_gm")
    _glog=$(gfsemu_log "$_gm")
    # a pid file left behind names another process once the pid is reused:
    # only an emulator serving this mount counts
    if [ -s "$_gpf" ] && kill -0 "$(cat "$_gpf")" 2>/dev/null \
       && tr '\0' ' ' <"/proc/$(cat "$_gpf")/cmdline" 2>/dev/null \
          | grep -qF " $_gm "; then
        echo "gfsemu_start: $_gm is served already" >&2
        return 1
    fi
    "$GFSEMU" "$_gb" "$_gm" -f "$@" >>"$_glog" 2>&1 </dev/null &
    _gp=$!
    GFSEMU_PID=$_gp
    echo "$_gp" >"$_gpf"
    _gdeadline=$(( $(date +%s) + ${GFSEMU_TIMEOUT:-10} ))
    while :; do
        if ! kill -0 "$_gp" 2>/dev/null; then
            wait "$_gp" 2>/dev/null
            echo "gfsemu_start: gfsemu exited with $?:" >&2
            cat "$_glog" >&2
            rm -f "$_gpf"
            return 1
        fi
        if gfsemu_mounted "$_gm" && [ -r "$_gm/.gfsemu/stats" ]; then
            return 0
        fi
        if [ "$(date +%s)" -ge "$_gdeadline" ]; then
            echo "gfsemu_start: $_gm not mounted after" \
                "${GFSEMU_TIMEOUT:-10}s" >&2
            gfsemu_stop "$_gm"
            return 1
        fi
        sleep 0.05
    done
}

# Wait up to GFSEMU_TIMEOUT seconds for PID $1 to exit.
gfsemu_wait_exit_ () {
    _gdeadline=$(( $(date +%s) + ${GFSEMU_TIMEOUT:-10} ))
    while kill -0 "$1" 2>/dev/null; do
        [ "$(date +%s)" -ge "$_gdeadline" ] && return 1
        sleep 0.05
    done
    return 0
}

gfsemu_stop () {
    _gm=$1
    _gpf=$(gfsemu_pidfile_ "$_gm")
    _grc=0
    if ! _gp=$(cat "$_gpf" 2>/dev/null) || [ -z "$_gp" ]; then
        echo "gfsemu_stop: no emulator recorded for $_gm" >&2
        return 1
    fi
    _gn=
    if gfsemu_mounted "$_gm"; then
        _gn=$(gfsemu_conn_ "$_gm")
        [ -e "/sys/fs/fuse/connections/$_gn" ] \
            || mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null
        if ! fusermount3 -u "$_gm" 2>/dev/null && ! umount "$_gm"; then
            echo "gfsemu_stop: cannot unmount $_gm" >&2
            _grc=1
        fi
    fi
    # A mount namespace made while this was mounted (a job's, or any
    # unshare -m, on a machine whose / is private) holds a copy of the
    # mount, and with it the connection: the emulator would serve it on.
    # End the connection itself, unless its number now names a newer
    # mount of this namespace.
    if [ -n "$_gn" ] && [ -e "/sys/fs/fuse/connections/$_gn/abort" ] \
       && ! awk -v d="0:$_gn" '$3 == d { f = 1 } END { exit !f }' \
            /proc/self/mountinfo; then
        echo 1 >"/sys/fs/fuse/connections/$_gn/abort" 2>/dev/null
    fi
    if ! gfsemu_wait_exit_ "$_gp"; then
        # Busy or hung: SIGTERM makes it detach the mount and exit.
        kill -TERM "$_gp" 2>/dev/null
        if ! gfsemu_wait_exit_ "$_gp"; then
            echo "gfsemu_stop: pid $_gp ignores SIGTERM, killing it" >&2
            kill -KILL "$_gp" 2>/dev/null
            gfsemu_mounted "$_gm" && umount -l "$_gm" 2>/dev/null
        fi
        _grc=1
    fi
    # Reap it when it is our child, and report its exit status.
    if wait "$_gp" 2>/dev/null; then
        :
    else
        _gst=$?
        [ "$_gst" != 127 ] && _grc=1
    fi
    rm -f "$_gpf"
    return "$_grc"
}

gfsemu_stats () {
    cat "$1/.gfsemu/stats"
}

gfsemu_reset () {
    : >"$1/.gfsemu/reset"
}

gfsemu_value () {
    GFSEMU_KEY_=$2 awk '
        BEGIN { k = ENVIRON["GFSEMU_KEY_"] }
        $1 == k { print $2; found = 1; exit }
        END { if (!found) { print "gfsemu: no key " k > "/dev/stderr"
                            exit 2 } }' "$1/.gfsemu/stats"
}

# gfsemu_hung MNT: a request is held by a hang fault now;
# gfsemu_unhung MNT: none is
gfsemu_hung () { test "$(gfsemu_value "$1" fault.hung)" -ge 1; }
gfsemu_unhung () { test "$(gfsemu_value "$1" fault.hung)" = 0; }

gfsemu_stat () {
    _gm=$1
    _gpath=$2
    case $_gpath in
        "$_gm") _gpath=. ;;
        "$_gm"/*) _gpath=${_gpath#"$_gm"/} ;;
    esac
    while [ "${_gpath#./}" != "$_gpath" ]; do
        _gpath=${_gpath#./}
    done
    _gpath=${_gpath%/}
    [ -z "$_gpath" ] && _gpath=.
    GFSEMU_PATH_=$_gpath GFSEMU_FIELD_=$3 awk '
        BEGIN {
            p = ENVIRON["GFSEMU_PATH_"]
            f = ENVIRON["GFSEMU_FIELD_"]
            gsub(/\\/, "\\\\", p)
            gsub(/\n/, "\\n", p)
            v = 0
        }
        $1 == "total." f { known = 1 }
        $1 == "file." f {
            n = $2
            line = $0
            sub(/^[^ ]* [^ ]* /, "", line)
            if (line == p)
                v = n
        }
        END {
            if (!known) {
                print "gfsemu: no field " f > "/dev/stderr"
                exit 2
            }
            print v
        }' "$_gm/.gfsemu/stats"
}

gfsemu_fault () {
    _gm=$1
    shift
    printf '%s\n' "$@" >"$_gm/.gfsemu/fault"
}

gfsemu_fault_clear () {
    echo >"$1/.gfsemu/fault"
}

gfsemu_faults () {
    cat "$1/.gfsemu/fault"
}

gfsemu_fault_hits () {
    GFSEMU_RULE_=$2 awk '
        BEGIN { r = ENVIRON["GFSEMU_RULE_"] " # hits " }
        index($0, r) == 1 {
            split(substr($0, length(r) + 1), w, " ")
            print w[1]; found = 1; exit
        }
        END { if (!found) { print "gfsemu: no rule " ENVIRON["GFSEMU_RULE_"] \
                                > "/dev/stderr"
                            exit 2 } }' "$1/.gfsemu/fault"
}

# The FUSE connection number of the gfsemu mount at $1: its device number
# (major 0, so the minor) in mountinfo, read without entering the mount.
gfsemu_conn_ () {
    _gdev=$(gfsemu_dev_ "$1") || return 1
    printf '%s\n' "${_gdev#0:}"
}

gfsemu_abort () {
    _gm=$1
    _gctl=/sys/fs/fuse/connections
    if ! _gn=$(gfsemu_conn_ "$_gm"); then
        echo "gfsemu_abort: no gfsemu mounted at $_gm" >&2
        return 1
    fi
    if [ ! -e "$_gctl/$_gn/abort" ]; then
        mount -t fusectl fusectl "$_gctl" 2>/dev/null
    fi
    if [ ! -e "$_gctl/$_gn/abort" ]; then
        echo "gfsemu_abort: no $_gctl/$_gn/abort (fusectl)" >&2
        return 1
    fi
    echo 1 >"$_gctl/$_gn/abort" || return 1
    _gp=$(gfsemu_pid "$_gm")
    if [ -n "$_gp" ] && ! gfsemu_wait_exit_ "$_gp"; then
        echo "gfsemu_abort: pid $_gp still runs" >&2
        return 1
    fi
    return 0
}
