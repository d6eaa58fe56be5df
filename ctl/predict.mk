## ctl/predict.mk - tierctl predict (included by Makefile.am)
tierctl_SOURCES += cmd_predict.c
