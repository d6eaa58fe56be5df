#!/bin/bash
test_description='the house rules of doc/hacking.md hold over the product code'
. "$(dirname "$0")/../lib/tap.sh"

# Each rule of doc/hacking.md that a program can check, over the product
# code (what is built into tier.so, tierd, tierctl and the interposer).
# A failure lists the lines that break the rule; doc/hacking.md says
# where the code belongs instead.
cd "$TIER_SRCDIR" || exit 99
DIRS="lib agent spank_plugin ctl policies"
# shellcheck disable=SC2086
find $DIRS -name '*.[ch]' | sort >"$TRASH/files"
files () { grep -E "${1:-.}" "$TRASH/files"; }

# must_be_empty FILE WHAT: FILE lists the lines that break a rule
must_be_empty () {
    if test -s "$1"; then
        echo "$2:"
        cat "$1"
        return 1
    fi
}

test_expect_success 'the product code is here' '
    test "$(wc -l <"$TRASH/files")" -gt 100 &&
    grep -qx lib/cred.c "$TRASH/files" && grep -qx lib/trust.c "$TRASH/files"
'

test_expect_success 'credentials change only in lib/cred.c' '
    grep -nE "\bset(res|fs)?[ug]id\b|\bsetgroups\b|SYS_set" $(files) |
        grep -v "^lib/cred\.[ch]:" >"$TRASH/cred" || :
    must_be_empty "$TRASH/cred" "credential changes outside lib/cred.c"
'

# st_uid outside lib/trust.c: an identity comparison with a user id
# (st.st_uid != uid), or a copy of the owner (fchown); never root as
# owner (== 0), which is a trust rule.
test_expect_success 'owner checks of what root trusts only in lib/trust.c' '
    grep -nE "st_uid" $(files "\.c$") | grep -v "^lib/trust\.c:" |
        grep -vE "fchown(at)? \(" >"$TRASH/uid.all" || :
    grep -E "st_uid *[!=]= *0\b|\b0 *[!=]= *[a-z_.>-]*st_uid|st_uid *[!=]= *[a-z_>.-]*slurm" \
        "$TRASH/uid.all" >"$TRASH/uid" || :
    grep -vE "st_uid *[!=]=|[!=]= *[a-z_.>-]*st_uid" "$TRASH/uid.all" \
        >>"$TRASH/uid" || :
    must_be_empty "$TRASH/uid" "root-owner checks (or other uses of st_uid) outside lib/trust.c"
'

test_expect_success 'every process the agent starts is forked in agent/child.c' '
    grep -nE "\b(v?fork|clone3?|posix_spawnp?) \(" $(files "^agent/.*\.c$") |
        grep -v "^agent/child\.c:" | grep -v "^agent/preload/" >"$TRASH/fork" || :
    must_be_empty "$TRASH/fork" "forks outside agent/child.c"
'

test_expect_success 'per-user paths in SharedStateDir only in lib/state.c' '
    grep -nE "\"users/|\"users\"" $(files "\.c$") | grep -v "^lib/state\.c:" |
        grep -vE "json_object_(get|set)|\"users\", " >"$TRASH/users" || :
    must_be_empty "$TRASH/users" "SharedStateDir paths outside lib/state.c"
'

test_expect_success 'the monotonic clock only through lib/clock.h' '
    grep -nE "clock_gettime \(CLOCK_MONOTONIC|clock_gettime \(CLOCK_BOOTTIME" \
        $(files "\.c$") | grep -v "^lib/clock\.c:" >"$TRASH/clock" || :
    must_be_empty "$TRASH/clock" "clock_gettime outside lib/clock.c"
'

test_expect_success 'each file names itself on its third line' '
    for f in $(files); do
        sed -n 3p "$f" | grep -q "^/\* ${f##*/} - " ||
            echo "$f:3: $(sed -n 3p "$f")"
    done >"$TRASH/head"
    must_be_empty "$TRASH/head" "files without their \"/* NAME - \" line"
'

test_expect_success 'no file in agent/ over 1,200 lines' '
    wc -l $(files "^agent/[^/]*\.[ch]$") | grep -v " total$" |
        awk "\$1 > 1200" >"$TRASH/long" || :
    must_be_empty "$TRASH/long" "agent files over 1,200 lines"
'

# Function bodies run from a line "{" to a line "}" (the house style
# puts both in column 0); the name is on the last line before with "(".
# Exceptions: none today.  One that reads better whole (a table, a state
# machine) is added here with its reason.
LONG_OK=""
cat >"$TRASH/funclen.awk" <<'EOF'
/^[A-Za-z_].*\(/ { if (!inb) sig = $0 }
/^\{/ {
    if (!inb) {
        inb = 1; start = FNR; name = sig; sub(/ *\(.*/, "", name)
        n = split(name, w, /[ *]+/); name = w[n]
    }
    next
}
/^\}/ {
    if (inb) {
        inb = 0
        if (FNR - start - 1 > MAX)
            printf "%s:%d: %s: %d lines\n", FILENAME, start, name, FNR - start - 1
    }
}
EOF
test_expect_success 'the length of a function is found' '
    printf "int f (void)\n{\n%s}\n" "$(for i in $(seq 120); do echo "    x ();"; done)
" >"$TRASH/long.c" &&
    awk -v MAX=110 -f "$TRASH/funclen.awk" "$TRASH/long.c" | grep -q ": f: 120 lines"
'
test_expect_success 'no function over 110 lines' '
    awk -v MAX=110 -f "$TRASH/funclen.awk" $(files "\.c$") >"$TRASH/funcs.all" &&
    { grep -vF -e "${LONG_OK:-@none@}" "$TRASH/funcs.all" >"$TRASH/funcs" || :; } &&
    must_be_empty "$TRASH/funcs" "functions over 110 lines"
'

test_expect_success 'failure labels: error: and out:, never fail: done: bad: err: cleanup:' '
    grep -nE "^\s*(fail|failed|done|bad|err|cleanup|invalid|finish|bail):\s*$" \
        $(files "\.c$") >"$TRASH/labels" || :
    must_be_empty "$TRASH/labels" "labels outside the vocabulary"
'

test_done
