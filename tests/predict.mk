## tests/predict.mk - shell tests of tierctl predict (TESTS += t/...)
