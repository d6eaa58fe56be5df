##*****************************************************************************
#  SYNOPSIS
#    X_AC_TIER_DIRS
#
#  DESCRIPTION
#    Where the configuration, the interposer and the systemd unit live once
#    installed.  Sites usually configure with --sysconfdir=/etc, so
#    tier.conf is /etc/tier/tier.conf beside /etc/slurm/slurm.conf.
##*****************************************************************************

AC_DEFUN([X_AC_TIER_DIRS], [
  tier_sysconfdir='${sysconfdir}/tier'
  AC_SUBST([tier_sysconfdir])

  # tierd.service, for sites that run the agent under systemd.  Inside the
  # prefix by default (make distcheck, DESTDIR installs); Debian 12's
  # system unit directory is /usr/lib/systemd/system, the default with
  # --prefix=/usr.
  AC_ARG_WITH([systemdsystemunitdir],
    AS_HELP_STRING([--with-systemdsystemunitdir=DIR],
      [where to install tierd.service (default PREFIX/lib/systemd/system; no: do not install it)]),
    [systemdsystemunitdir="$withval"],
    [systemdsystemunitdir='${prefix}/lib/systemd/system'])
  AS_IF([test "x$systemdsystemunitdir" = xyes],
    [systemdsystemunitdir='${prefix}/lib/systemd/system'])
  AC_MSG_CHECKING([where to install tierd.service])
  AC_MSG_RESULT([$systemdsystemunitdir])
  AC_SUBST([systemdsystemunitdir])
  AM_CONDITIONAL([HAVE_SYSTEMDSYSTEMUNITDIR],
    [test "x$systemdsystemunitdir" != xno])
])
