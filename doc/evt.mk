## doc/evt.mk - documentation of the extreme-value model (EXTRA_DIST += ...)
EXTRA_DIST += evt.md
