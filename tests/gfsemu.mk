## tests/gfsemu.mk - integration tests of the GFS emulator (TESTS += t/...)

TESTS += \
	t/0100-gfsemu.t

EXTRA_DIST += \
	lib/gfsemu.sh

# End of tests/gfsemu.mk
