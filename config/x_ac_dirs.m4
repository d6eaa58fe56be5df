##*****************************************************************************
#  SYNOPSIS
#    X_AC_TIER_DIRS
#
#  DESCRIPTION
#    Where the configuration and the interposer live once installed.  Sites
#    usually configure with --sysconfdir=/etc, so tier.conf is
#    /etc/tier/tier.conf beside /etc/slurm/slurm.conf.
##*****************************************************************************

AC_DEFUN([X_AC_TIER_DIRS], [
  tier_sysconfdir='${sysconfdir}/tier'
  AC_SUBST([tier_sysconfdir])
])
