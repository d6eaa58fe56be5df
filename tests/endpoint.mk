## tests/endpoint.mk - integration tests of the endpoint library (TESTS += t/...)
##
## s3rver (npm, cached in /var/cache/tier-tests/s3rver) and nginx-light
## with WebDAV over TLS, both on loopback, driven by unit/endpoint_tool
## (0120), by stage-in on the test cluster (0125) and by stage-out
## (0126).

TESTS += \
	t/0120-endpoints.t \
	t/0125-stage-objstore.t \
	t/0126-stage-out-objstore.t

EXTRA_DIST += \
	lib/endpoints.sh \
	lib/flaky_http.py

# End of tests/endpoint.mk
