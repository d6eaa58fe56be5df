## tests/unit/endpoint.mk - endpoint library tests (included by Makefile.am)
##
## fixtures/sigv4 holds cases of AWS's SigV4 test suite (see its README.md).

REMOTE_LDADD = $(top_builddir)/lib/libtier_remote.la $(LDADD) \
	$(CURL_LIBS) $(CRYPTO_LIBS)

check_PROGRAMS += test_sigv4

test_sigv4_CPPFLAGS = $(AM_CPPFLAGS) \
	-DSIGV4_FIXTURES=\"$(abs_srcdir)/fixtures/sigv4\"
test_sigv4_LDFLAGS = $(AM_LDFLAGS) $(WRAP_ALLOC_FLAGS)
test_sigv4_LDADD = $(REMOTE_LDADD)

check_PROGRAMS += test_endpoint

test_endpoint_LDFLAGS = $(AM_LDFLAGS) $(WRAP_ALLOC_FLAGS)
test_endpoint_LDADD = $(REMOTE_LDADD)

AM_TESTS_ENVIRONMENT += \
	TIER_SIGV4_FIXTURES='$(abs_srcdir)/fixtures/sigv4'; \
	export TIER_SIGV4_FIXTURES;

EXTRA_DIST += \
	fixtures/sigv4
# End of EXTRA_DIST (endpoint)

# The integration tests' client (tests/t/0120-endpoints.t; never installed).
noinst_PROGRAMS += endpoint_tool
endpoint_tool_LDADD = $(REMOTE_LDADD)
