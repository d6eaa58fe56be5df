## tests/unit/evt.mk - extreme-value model tests (included by Makefile.am)
##
## The fixtures are data sets with reference fits by R evd::fgev and
## scipy.stats.genextreme; fixtures/evt/make-fixtures.{R,py} rebuild them.

check_PROGRAMS += test_evt

test_evt_SOURCES = test_evt.c
test_evt_CPPFLAGS = $(AM_CPPFLAGS) -DEVT_FIXTURES=\"$(abs_srcdir)/fixtures/evt\"
test_evt_CFLAGS = $(AM_CFLAGS) $(GSL_CFLAGS)
test_evt_LDFLAGS = $(AM_LDFLAGS) $(WRAP_ALLOC_FLAGS)
test_evt_LDADD = $(top_builddir)/lib/libtierevt.la $(LDADD) $(GSL_LIBS)

AM_TESTS_ENVIRONMENT += \
	TIER_EVT_FIXTURES='$(abs_srcdir)/fixtures/evt'; \
	export TIER_EVT_FIXTURES;

EXTRA_DIST += \
	fixtures/evt/README.md \
	fixtures/evt/make-fixtures.R \
	fixtures/evt/make-fixtures.py \
	fixtures/evt/table3.csv \
	fixtures/evt/reference-evd.csv \
	fixtures/evt/reference-scipy.csv \
	fixtures/evt/data/bt_c-hdd.csv \
	fixtures/evt/data/bt_c-ramdisk.csv \
	fixtures/evt/data/bt_c-ssd.csv \
	fixtures/evt/data/fallocate-hdd.csv \
	fixtures/evt/data/fallocate-ramdisk.csv \
	fixtures/evt/data/fallocate-ssd.csv \
	fixtures/evt/data/iozone-hdd.csv \
	fixtures/evt/data/iozone-ramdisk.csv \
	fixtures/evt/data/iozone-ssd.csv \
	fixtures/evt/data/pios-hdd.csv \
	fixtures/evt/data/pios-ramdisk.csv \
	fixtures/evt/data/pios-ssd.csv \
	fixtures/evt/data/gumbel.csv \
	fixtures/evt/data/frechet.csv \
	fixtures/evt/data/short.csv \
	fixtures/evt/data/offset.csv \
	fixtures/evt/data/weibull-strong.csv \
	fixtures/evt/data/rounded.csv \
	fixtures/evt/data/measured-fallocate-ramdisk.csv
# End of EXTRA_DIST (evt)
