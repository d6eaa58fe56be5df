##*****************************************************************************
#  SYNOPSIS
#    X_AC_WARNINGS
#    X_AC_SANITIZE
#
#  DESCRIPTION
#    --enable-werror turns the warning set into errors (CI builds with it).
#    --enable-sanitizers builds everything with ASan and UBSan; the
#    libc-only objects loaded into other processes (tier.so and
#    libtier_preload.so) are then tested through the unit tests only.
##*****************************************************************************

AC_DEFUN([X_AC_WARNINGS], [
  AC_ARG_ENABLE([werror],
    AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors]),
    [], [enable_werror=no])
  WARNING_CFLAGS="-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wno-unused-parameter"
  AS_IF([test "x$enable_werror" = "xyes"], [WARNING_CFLAGS="$WARNING_CFLAGS -Werror"])
  AC_SUBST([WARNING_CFLAGS])
])

AC_DEFUN([X_AC_SANITIZE], [
  AC_ARG_ENABLE([sanitizers],
    AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer]),
    [], [enable_sanitizers=no])
  SANITIZE_CFLAGS=""
  SANITIZE_LDFLAGS=""
  AS_IF([test "x$enable_sanitizers" = "xyes"], [
    SANITIZE_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    SANITIZE_LDFLAGS="-fsanitize=address,undefined"
  ])
  AC_SUBST([SANITIZE_CFLAGS])
  AC_SUBST([SANITIZE_LDFLAGS])
  AM_CONDITIONAL([SANITIZE], [test "x$enable_sanitizers" = "xyes"])
])
