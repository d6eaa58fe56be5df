#!/bin/bash
test_description='configure names the Debian package of a missing dependency'
. "$(dirname "$0")/../lib/tap.sh"

# A pkg-config search path holding every .pc file of the system but one.
pc_without () {
    rm -rf "$TRASH/pc" && mkdir -p "$TRASH/pc" &&
    for d in $(pkg-config --variable pc_path pkg-config | tr ':' ' '); do
        [ -d "$d" ] || continue
        for f in "$d"/*.pc; do
            [ -e "$f" ] || continue
            case "$(basename "$f")" in "$1") continue ;; esac
            ln -sf "$f" "$TRASH/pc/"
        done
    done
}

# configure needs only its own script and the aux directory to get as far
# as the dependency checks.
setup_src () {
    mkdir -p "$TRASH/src/lib" &&
    cp "$TIER_SRCDIR/configure" "$TRASH/src/" &&
    cp -r "$TIER_SRCDIR/config" "$TRASH/src/" &&
    cp "$TIER_SRCDIR/lib/conf.c" "$TRASH/src/lib/"
}

test_expect_success 'a copy of configure' 'setup_src'
for dep in jansson:libjansson-dev lmdb:liblmdb-dev libpmem:libpmem-dev \
           libcurl:libcurl4-openssl-dev gsl:libgsl-dev libcrypto:libssl-dev; do
    pc=${dep%%:*}
    pkg=${dep#*:}
    test_expect_success "without $pc.pc configure stops naming $pkg" "
        pc_without $pc.pc &&
        mkdir -p \"\$TRASH/b-$pc\" && cd \"\$TRASH/b-$pc\" &&
        ! PKG_CONFIG_LIBDIR=\"\$TRASH/pc\" PKG_CONFIG_PATH= \
            \"\$TRASH/src/configure\" >out 2>&1 &&
        tail -n 3 out &&
        grep -q \"install the Debian package $pkg\" out
    "
    cd "$TIER_BUILDDIR/tests" 2>/dev/null || cd "$TRASH"
done
test_expect_success 'without slurm/spank.h configure names libslurm-dev' '
    mkdir -p "$TRASH/b-slurm" && cd "$TRASH/b-slurm" &&
    ! "$TRASH/src/configure" --with-slurm=/nonexistent >out 2>&1 &&
    tail -n 2 out && grep -q "libslurm-dev" out
'
test_done
