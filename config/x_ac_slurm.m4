##*****************************************************************************
#  SYNOPSIS
#    X_AC_SLURM
#
#  DESCRIPTION
#    Find the Slurm SPANK header (--with-slurm=DIR) and the directory where
#    Slurm loads its plugins (--with-slurm-plugindir=DIR).  The plugin is
#    loaded into srun, sbatch and slurmstepd, which provide the spank_*
#    symbols: nothing is linked against libslurm.
##*****************************************************************************

AC_DEFUN([X_AC_SLURM], [
  AC_ARG_WITH([slurm],
    AS_HELP_STRING([--with-slurm=DIR], [Slurm installation prefix (DIR/include/slurm/spank.h)]),
    [x_ac_slurm_dirs="$withval"], [x_ac_slurm_dirs="/usr /usr/local /opt/slurm"])

  AC_MSG_CHECKING([for the Slurm SPANK header])
  x_ac_slurm_dir=""
  for d in $x_ac_slurm_dirs; do
    if test -f "$d/include/slurm/spank.h"; then
      x_ac_slurm_dir="$d"
      break
    fi
  done
  AS_IF([test -z "$x_ac_slurm_dir"], [
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([slurm/spank.h not found in $x_ac_slurm_dirs: install the Debian package libslurm-dev or pass --with-slurm=DIR])
  ])
  AC_MSG_RESULT([$x_ac_slurm_dir/include/slurm/spank.h])
  AS_IF([test "$x_ac_slurm_dir" = "/usr"], [SLURM_CPPFLAGS=""],
        [SLURM_CPPFLAGS="-I$x_ac_slurm_dir/include"])
  AC_SUBST([SLURM_CPPFLAGS])

  x_ac_save_CPPFLAGS="$CPPFLAGS"
  CPPFLAGS="$CPPFLAGS $SLURM_CPPFLAGS"
  AC_CHECK_DECL([spank_option_register], [],
    [AC_MSG_ERROR([slurm/spank.h lacks spank_option_register: Slurm 22.05 or newer is needed])],
    [[#include <slurm/spank.h>]])
  CPPFLAGS="$x_ac_save_CPPFLAGS"

  # tierd (our own program, never loaded into Slurm's) asks slurmctld
  # about jobs it missed through libslurm.
  x_ac_save_LIBS="$LIBS"
  x_ac_save_LDFLAGS="$LDFLAGS"
  AS_IF([test "$x_ac_slurm_dir" != "/usr"],
        [SLURM_LDFLAGS="-L$x_ac_slurm_dir/lib -L$x_ac_slurm_dir/lib64"],
        [SLURM_LDFLAGS=""])
  LDFLAGS="$LDFLAGS $SLURM_LDFLAGS"
  AC_CHECK_LIB([slurm], [slurm_load_job], [SLURM_LIBS="$SLURM_LDFLAGS -lslurm"],
    [AC_MSG_ERROR([libslurm not found: install the Debian package libslurm-dev or pass --with-slurm=DIR])])
  LIBS="$x_ac_save_LIBS"
  LDFLAGS="$x_ac_save_LDFLAGS"
  AC_SUBST([SLURM_LIBS])

  AC_ARG_WITH([slurm-plugindir],
    AS_HELP_STRING([--with-slurm-plugindir=DIR], [where to install tier.so (default: the installed Slurm's PluginDir)]),
    [slurm_plugindir="$withval"], [slurm_plugindir=""])
  AC_MSG_CHECKING([for the Slurm plugin directory])
  AS_IF([test -z "$slurm_plugindir"], [
    for d in "$x_ac_slurm_dir/lib/$host_cpu-$host_os/slurm-wlm" \
             "$x_ac_slurm_dir/lib/x86_64-linux-gnu/slurm-wlm" \
             "$x_ac_slurm_dir/lib/aarch64-linux-gnu/slurm-wlm" \
             "$x_ac_slurm_dir/lib64/slurm" "$x_ac_slurm_dir/lib/slurm"; do
      if test -f "$d/auth_munge.so" || test -f "$d/select_cons_tres.so"; then
        slurm_plugindir="$d"
        break
      fi
    done
  ])
  AS_IF([test -z "$slurm_plugindir"], [slurm_plugindir='${libdir}/slurm'])
  AC_MSG_RESULT([$slurm_plugindir])
  AC_SUBST([slurm_plugindir])
])
