## tests/endpoint.mk - integration tests of the endpoint library (TESTS += t/...)
##
## s3rver (npm, cached in /var/cache/tier-tests/s3rver) and nginx-light
## with WebDAV over TLS, both on loopback, driven by unit/endpoint_tool.

TESTS += \
	t/0120-endpoints.t

EXTRA_DIST += \
	lib/endpoints.sh \
	lib/flaky_http.py

# End of tests/endpoint.mk
