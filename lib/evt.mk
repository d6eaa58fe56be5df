## lib/evt.mk - the extreme-value model (included by Makefile.am)
