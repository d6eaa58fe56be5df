## tests/unit/evt.mk - extreme-value model tests (included by Makefile.am)
