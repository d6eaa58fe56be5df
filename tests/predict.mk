## tests/predict.mk - shell tests of tierctl predict (TESTS += t/...)
TESTS += t/0110-predict.t
