## lib/copy.mk - the copy engine (owned by its module; included by Makefile.am)
## libc only (pthreads are in glibc's libc): the plugin's epilog uses it to
## keep pipeline data, so it is part of the core.

CORE_SOURCES += \
	copy.c copy.h
# End of lib/copy.mk
