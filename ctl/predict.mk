## ctl/predict.mk - tierctl predict (included by Makefile.am)
tierctl_SOURCES += cmd_predict.c
tierctl_CFLAGS = $(AM_CFLAGS) $(GSL_CFLAGS)
# libtierevt.la needs libtier.la's tier_errprintf, so libtier.la follows it
tierctl_LDADD += $(top_builddir)/lib/libtierevt.la \
	$(top_builddir)/lib/libtier.la $(GSL_LIBS)
