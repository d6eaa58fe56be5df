#!/bin/bash
# 0142-hostile-share.t - a user who fills a shared resource of the node
# takes only a share of it.
#
# The BB replica cache (BBCapacity 2 GiB here) is one budget for every
# user of the node.  alice's job leaves two 400 MiB replicas on n2; bob
# then reads four 400 MiB files of his own there.  Room for bob's fourth
# must be made by evicting a replica: bob holds more than an equal share
# of the budget (1 GiB each of the two users), alice less, so bob's own
# least recently used replica goes, not alice's older ones (plain LRU
# would have evicted alice's).  Then the site caps a user's replicas on
# the node (BBUserMax 800 MiB): bob's next copy evicts his own replicas
# down to the cap, though the budget has room, and a file larger than
# the cap is read from the GFS.
test_description='hostile users: the BB is shared fairly between users'
. "$(dirname "$0")/../lib/tap.sh"
. "$TIER_SRCDIR/tests/lib/cluster.sh"

test_have_prereq ROOT,SLURM,FUSE,USERS || skip_all "needs root, Slurm, FUSE and users"
test_expect_success 'start the cluster (a GFS with POSIX ACLs)' 'cluster_start --gfs-opts acl'
[ -n "${CLUSTER:-}" ] || bail_out "no cluster"
H=$GFS/home/alice
HB=$GFS-backing/home/alice
BH=$GFS/home/bob
BHB=$GFS-backing/home/bob
TIERCTL="$CLUSTER/lib/tierctl -c $CLUSTER/etc/tier.conf"
LOG=$CLUSTER/log/tierd-n2.log
MIB400=419430400

# files of 400 MiB, sparse in the GFS's backing store (quick to make; the
# replicas are counted by their size)
as_user alice mkdir -p $H/share && as_user bob mkdir -p $BH/share
for f in a0 a1; do truncate -s 400M $HB/share/$f && chown alice: $HB/share/$f; done
for f in b0 b1 b2 b3; do truncate -s 400M $BHB/share/$f && chown bob: $BHB/share/$f; done
truncate -s 900M $BHB/share/big && chown bob: $BHB/share/big
CONF=$CLUSTER/etc/tier.conf
reloaded () { test "$(grep -c "reloaded $CONF" $LOG)" -gt "$1"; }
# replicas_of LIST: the sources of n2's replicas, one a line, into LIST
replicas_of () {
    $TIERCTL -N n2 replicas --json >$TRASH/rep.json &&
    python3 -c "import json,sys; [print(r[\"path\"]) for r in json.load(open(sys.argv[1]))[\"replicas\"]]" \
        $TRASH/rep.json | sort >"$1"
}
test_expect_success 'alice leaves two replicas on n2' '
    id=$(sbatch_wait alice -w n2 --tier-batch=$H/share -o $H/share.out \
         --wrap "cat $H/share/a0 $H/share/a1 | wc -c") &&
    test "$(job_state $id)" = COMPLETED && test "$(cat $H/share.out)" = $((2 * MIB400)) &&
    replicas_of $TRASH/r1 && cat $TRASH/r1 &&
    grep -qx "$H/share/a0" $TRASH/r1 && grep -qx "$H/share/a1" $TRASH/r1
'
test_expect_success 'bob reads more than his share: his own replica is evicted, not alice'"'"'s' '
    id=$(sbatch_wait bob -w n2 --tier-batch=$BH/share -o $BH/share.out \
         --wrap "for f in b0 b1 b2 b3; do wc -c <$BH/share/\$f; done") &&
    test "$(job_state $id)" = COMPLETED && cat $BH/share.out &&
    test "$(grep -cx $MIB400 $BH/share.out)" = 4 &&
    grep "evicted" $LOG &&
    grep -q "replica of $BH/share/b0 ($MIB400 bytes) evicted: BB budget" $LOG &&
    ! grep -q "replica of $H/share/.* evicted" $LOG &&
    replicas_of $TRASH/r2 && cat $TRASH/r2 &&
    grep -qx "$H/share/a0" $TRASH/r2 && grep -qx "$H/share/a1" $TRASH/r2 &&
    grep -qx "$BH/share/b3" $TRASH/r2
'
test_expect_success 'alice reads hers again: both are hits' '
    id=$(sbatch_wait alice -w n2 --tier-batch=$H/share -o $H/share2.out \
         --wrap "cat $H/share/a0 $H/share/a1 | wc -c") &&
    test "$(job_state $id)" = COMPLETED &&
    $TIERCTL -N n2 counters --job $id --json >$TRASH/c.json &&
    python3 -c "import json,sys; c=json.load(open(sys.argv[1]))[\"counters\"][\"batch\"]; print(c); assert c[\"hits\"] >= 2, c" $TRASH/c.json
'
test_expect_success 'BBUserMax: bob'"'"'s next copy evicts his own replicas down to the cap' '
    n=$(grep -c "reloaded $CONF" $LOG || :) &&
    sed -i "/^BBUserMax *=/d" $CONF && echo "BBUserMax = 800M" >>$CONF &&
    kill -HUP $(cat $CLUSTER/state/n2/tierd.pid) && wait_for 10 reloaded $n &&
    replicas_of $TRASH/r3 && cat $TRASH/r3 && test "$(grep -c "^$BH/" $TRASH/r3)" = 3 &&
    id=$(sbatch_wait bob -w n2 --tier-batch=$BH/share -o $BH/share3.out \
         --wrap "wc -c <$BH/share/b0") &&
    test "$(job_state $id)" = COMPLETED && test "$(cat $BH/share3.out)" = $MIB400 &&
    test "$(grep -c "replica of $BH/share/.* evicted: BBUserMax" $LOG)" = 2 &&
    ! grep -q "replica of $H/share/.* evicted" $LOG &&
    replicas_of $TRASH/r4 && cat $TRASH/r4 &&
    test "$(grep -c "^$BH/" $TRASH/r4)" = 2 && grep -qx "$BH/share/b0" $TRASH/r4 &&
    grep -qx "$H/share/a0" $TRASH/r4 && grep -qx "$H/share/a1" $TRASH/r4
'
test_expect_success 'BBUserMax: a file larger than the cap is read from the GFS, nothing evicted' '
    id=$(sbatch_wait bob -w n2 --tier-batch=$BH/share -o $BH/share4.out \
         --wrap "wc -c <$BH/share/big") &&
    test "$(job_state $id)" = COMPLETED && test "$(cat $BH/share4.out)" = 943718400 &&
    grep -q "uid $(id -u bob)'"'"'s copies would pass BBUserMax on node n2 (800 MiB: this one is 900 MiB" $LOG &&
    test "$(grep -c "evicted: BBUserMax" $LOG)" = 2 &&
    replicas_of $TRASH/r5 && ! grep -qx "$BH/share/big" $TRASH/r5 &&
    test "$(grep -c "^$BH/" $TRASH/r5)" = 2
'
# L5: share = world serves one replica to every user, and its name is
# the source's identity (inode, size, times), which anyone who may stat
# the source can compute.  So only a file every user may read is shared:
# one that others may read but its group (bob's) may not, and one whose
# ACL denies bob, get replicas of alice's own when she reads them under
# a share = world site policy; a plain 0644 file is shared.
WP=$GFS/wpub
WPB=$GFS-backing/wpub
key_of () {
    stat -c "%i %s %.9Y %.9Z" "$1" | awk '{
        split($3, m, "."); split($4, c, ".");
        printf "%x-%x-%s.%s-%s.%s\n", $1, $2, m[1], m[2], c[1], c[2] }'
}
test_expect_success 'share = world: a file its group or an ACL denies gets per-user replicas' '
    mkdir -p $WPB && chmod 755 $WPB &&
    for f in ok gdeny adeny; do head -c 1M /dev/urandom >$WPB/$f && chmod 644 $WPB/$f; done &&
    chgrp $(id -g bob) $WPB/gdeny && chmod 604 $WPB/gdeny &&
    setfacl -m u:bob:--- $WP/adeny && getfacl -p $WP/adeny | grep -x "user:bob:---" &&
    ! as_user bob cat $WP/adeny >/dev/null 2>&1 && ! as_user bob cat $WP/gdeny >/dev/null 2>&1 &&
    printf "{\"version\": 1, \"policies\": {\"%s\": {\"role\": \"batch\", \"share\": \"world\"}}}\n" \
        "$WP" >$CLUSTER/etc/policies.d/wpub.json &&
    id=$(cd $H && as_user alice sbatch --parsable -w n2 --tier-cache=auto -o /dev/null \
        --wrap "cat $WP/ok $WP/gdeny $WP/adeny >/dev/null") &&
    wait_for 60 job_done $id && test "$(job_state $id)" = COMPLETED &&
    BB=$CLUSTER/bb && U=$BB/replicas/u$(id -u alice) &&
    ls -l $BB/replicas/world $U &&
    test -f $BB/replicas/world/$(key_of $WP/ok) &&
    test ! -e $BB/replicas/world/$(key_of $WP/gdeny) && test -f $U/$(key_of $WP/gdeny) &&
    test ! -e $BB/replicas/world/$(key_of $WP/adeny) && test -f $U/$(key_of $WP/adeny) &&
    ! as_user bob cat $U/$(key_of $WP/adeny) >/dev/null 2>&1 &&
    rm -f $CLUSTER/etc/policies.d/wpub.json
'
# The world check runs on the agent's loop and looks at each directory
# on the way to the source.  bob's job step opens a file in a directory
# of his in a share = world tree; bob, logged in to the node, then mounts
# his own FUSE file system over that directory (tests/gfsemu/hangfs -g:
# no stat through it is ever answered; -a: allow_other, which a site
# allows with user_allow_other in /etc/fuse.conf, and without which the
# kernel refuses root's stat at once), and the step asks for a replica
# of the file with the descriptor, which is still the GFS's.  The agent
# must not look through his mount (its loop would sleep there): it stops
# at the mount point, bob gets a replica of his own, and a ping answers.
# (The step waits a second after the mount, for hangfs to take the
# kernel's INIT: before that, the old check was not caught.)
HANGFS=$TIER_BUILDDIR/tests/gfsemu/hangfs
RAW="python3 $TIER_SRCDIR/tests/lib/rawclient.py"
HM=$WP/bob/mnt
BD=$TRASH/bob && mkdir -p $BD && chown bob $BD && chmod 755 $TRASH
FUSE_MODE=$(stat -c %a /dev/fuse)
test_at_exit "chmod $FUSE_MODE /dev/fuse"
if [ -e /etc/fuse.conf ]; then
    cp -p /etc/fuse.conf $TRASH/fuse.conf && test_at_exit "cp -p $TRASH/fuse.conf /etc/fuse.conf"
else
    test_at_exit "rm -f /etc/fuse.conf"
fi
test_at_exit "touch $BD/go; kill -9 \$(cat $BD/hangfs.pid 2>/dev/null) 2>/dev/null; sleep 1; umount -l $HM 2>/dev/null"
cat >$BD/step.sh <<EOF
#!/bin/sh
# in bob's job step: open the file on the GFS, wait for the mount, ask
exec 3<"$HM/x/f"
touch $BD/opened
i=0
while [ ! -e $BD/go ]; do i=\$((i + 1)); [ \$i -lt 300 ] || exit 1; sleep 0.1; done
exec $RAW $CLUSTER/run/tier/n2/tierd.sock passfd 3 '{"op":"replica.open","path":"$HM/x/f"}'
EOF
chmod 755 $BD/step.sh
sed "/^AgentTimeout *=/d" $CONF >$TRASH/ping.conf && echo "AgentTimeout = 2s" >>$TRASH/ping.conf
chmod 644 $TRASH/ping.conf
hm_mounted () { awk -v m="$HM" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }
test_expect_success 'share = world: the agent does not look through a mount of the user'"'"'s own on the way' '
    mkdir -p $WPB/bob/mnt/x && head -c 4096 /dev/urandom >$WPB/bob/mnt/x/f &&
    chown -R bob: $WPB/bob && chmod -R a+rX $WPB/bob &&
    printf "{\"version\": 1, \"policies\": {\"%s\": {\"role\": \"batch\", \"share\": \"world\"}}}\n" \
        "$WP" >$CLUSTER/etc/policies.d/wpub.json &&
    { (cd $BH && as_user bob srun -w n2 --tier-cache=auto env -u LD_PRELOAD $BD/step.sh) \
        >$TRASH/cover.out 2>&1 & } && sp=$! &&
    wait_for 30 test -e $BD/opened &&
    chmod 0666 /dev/fuse && echo user_allow_other >>/etc/fuse.conf &&
    { as_user bob sh -c "echo \$\$ >$BD/hangfs.pid; exec $HANGFS -g -a $HM" 2>$BD/hangfs.log & } &&
    wait_for 10 hm_mounted && wait_for 10 grep -q "mounted at" $BD/hangfs.log &&
    sleep 1 && touch $BD/go &&
    { wait $sp; cat $TRASH/cover.out $BD/hangfs.log; } &&
    grep "^version=1 .*\"replica\": *\"$CLUSTER/bb/replicas/u$(id -u bob)/" $TRASH/cover.out &&
    $CLUSTER/lib/tierctl -c $TRASH/ping.conf -N n2 ping &&
    ! grep -q "getattr came\|lookup came" $BD/hangfs.log &&
    kill -9 $(cat $BD/hangfs.pid) && sleep 1 && umount -l $HM && ! hm_mounted &&
    rm -f $CLUSTER/etc/policies.d/wpub.json
'
test_expect_success 'no node was drained' 'no_drain'
test_done
