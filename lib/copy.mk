## lib/copy.mk - the copy engine (owned by its module; included by Makefile.am)

libtier_la_SOURCES += \
	copy.c copy.h
# End of lib/copy.mk
