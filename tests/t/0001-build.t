#!/bin/bash
test_description='what was built: code loaded into other processes links only libc'
. "$(dirname "$0")/../lib/tap.sh"

PLUGIN=$TIER_BUILDDIR/spank_plugin/.libs/tier.so
PRELOAD=$TIER_BUILDDIR/agent/preload/.libs/libtier_preload.so

# needed FILE: the NEEDED entries of FILE, one per line
needed () {
    readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
}

only_libc () {
    needed "$1" >"$TRASH/needed"
    cat "$TRASH/needed"
    test -s "$TRASH/needed" || return 1
    ! grep -v -E '^(libc\.so\.6|ld-linux[-a-z0-9_]*\.so\.[0-9]+)$' "$TRASH/needed"
}

test_expect_success 'tier.so is built' 'test -f "$PLUGIN"'
test_expect_success 'tier.so needs only libc' 'only_libc "$PLUGIN"'
test_expect_success 'tier.so exports only SPANK symbols' '
    nm -D --defined-only "$PLUGIN" | awk "{print \$3}" >"$TRASH/syms" &&
    cat "$TRASH/syms" &&
    grep -q "^slurm_spank_init$" "$TRASH/syms" &&
    ! grep -v -E "^(slurm_spank_[a-z_]+|plugin_(name|type|version)|spank_plugin_version)$" "$TRASH/syms"
'
test_expect_success 'libtier_preload.so is built' 'test -f "$PRELOAD"'
test_expect_success 'libtier_preload.so needs only libc' 'only_libc "$PRELOAD"'
test_expect_success 'tierd and tierctl run' '
    "$TIER_BUILDDIR/agent/tierd" --version &&
    "$TIER_BUILDDIR/ctl/tierctl" version
'
test_expect_code 2 'tierctl: unknown command is a usage error' \
    '"$TIER_BUILDDIR/ctl/tierctl" frobnicate'
test_expect_success 'tierctl help lists commands' '
    "$TIER_BUILDDIR/ctl/tierctl" help >"$TRASH/help" &&
    grep -q "^  predict" "$TRASH/help"
'
test_done
