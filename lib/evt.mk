## lib/evt.mk - the extreme-value model (included by Makefile.am)
##
## libtierevt.la: block maxima, GEV fit, return levels and predictions.
## It uses tier_errprintf: link it before libtier.la.

noinst_LTLIBRARIES += libtierevt.la

libtierevt_la_SOURCES = \
	evt.c \
	evt_csv.c \
	evt.h
# End of libtierevt_la_SOURCES
libtierevt_la_CFLAGS = $(AM_CFLAGS) $(SANITIZE_CFLAGS) $(GSL_CFLAGS)
libtierevt_la_LIBADD = $(GSL_LIBS) -lm
