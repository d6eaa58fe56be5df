## tests/unit/copy.mk - copy engine tests (included by Makefile.am)

check_PROGRAMS += test_copy

# The wrappers force the fallbacks and failures of the engine; the
# clock can be made virtual for the rate limit's accounting.
test_copy_LDFLAGS = $(AM_LDFLAGS) \
	-Wl,--wrap=copy_file_range,--wrap=sendfile \
	-Wl,--wrap=renameat2,--wrap=fsync \
	-Wl,--wrap=clock_gettime,--wrap=clock_nanosleep
# End of tests/unit/copy.mk
