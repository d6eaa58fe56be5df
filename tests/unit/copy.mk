## tests/unit/copy.mk - copy engine tests (included by Makefile.am)
