## doc/endpoints.mk - documentation of the endpoint library (EXTRA_DIST += ...)
EXTRA_DIST += endpoints.md
