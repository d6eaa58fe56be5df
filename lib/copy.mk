## lib/copy.mk - the copy engine (owned by its module; included by Makefile.am)
