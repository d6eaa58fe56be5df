## lib/copy.mk - the copy engine (owned by its module; included by Makefile.am)
## libc only (pthreads are in glibc's libc): the plugin's epilog uses it to
## keep pipeline data, so it is part of the core.  The interposer does not
## call it, and --gc-sections leaves it out there (tests/t/0001-build.t).

CORE_SOURCES += \
	copy.c copy.h
# End of lib/copy.mk
