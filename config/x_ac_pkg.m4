##*****************************************************************************
#  SYNOPSIS
#    X_AC_TIER_PKG(VARIABLE, MODULE, DEBIAN-PACKAGE)
#
#  DESCRIPTION
#    A required dependency found through pkg-config.  When it is missing,
#    configure stops with a message naming the Debian package to install.
##*****************************************************************************

AC_DEFUN([X_AC_TIER_PKG], [
  PKG_CHECK_MODULES([$1], [$2], [],
    [AC_MSG_ERROR([$2 was not found: install the Debian package $3 (or set $1_CFLAGS and $1_LIBS)])])
])

##*****************************************************************************
#  SYNOPSIS
#    AX_PTHREAD_SIMPLE
#
#  DESCRIPTION
#    glibc 2.34 and newer have pthreads in libc; -pthread keeps older ones
#    working and sets the right preprocessor flags.
##*****************************************************************************

AC_DEFUN([AX_PTHREAD_SIMPLE], [
  PTHREAD_CFLAGS="-pthread"
  PTHREAD_LIBS="-pthread"
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])
