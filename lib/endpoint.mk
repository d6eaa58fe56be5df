## lib/endpoint.mk - object-store and HTTP endpoints (included by Makefile.am)
##
## libtier_remote.la: credentials, SigV4 signing and the s3 and
## http(s)/WebDAV back-ends over libcurl.  Only our own programs (tierd,
## test helpers) link it: never tier.so or the interposer, which link
## nothing but libc.  It uses the URL parser (url.c, in libtiercore so
## that the plugin checks URLs at submit with it), tier_errprintf and
## jansson from libtier.la: link it before libtier.la.

noinst_LTLIBRARIES += libtier_remote.la

libtier_remote_la_SOURCES = \
	strbuf.c strbuf.h \
	sigv4.c sigv4.h \
	endpoint.c endpoint.h endpoint_int.h \
	endpoint_creds.c \
	endpoint_s3.c \
	endpoint_http.c
# End of libtier_remote_la_SOURCES
libtier_remote_la_CFLAGS = $(AM_CFLAGS) $(SANITIZE_CFLAGS) \
	$(CURL_CFLAGS) $(CRYPTO_CFLAGS) $(JANSSON_CFLAGS)
libtier_remote_la_LIBADD = $(CURL_LIBS) $(CRYPTO_LIBS) $(JANSSON_LIBS)
# End of lib/endpoint.mk
