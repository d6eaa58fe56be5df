## tests/gfsemu.mk - integration tests of the GFS emulator (TESTS += t/...)
