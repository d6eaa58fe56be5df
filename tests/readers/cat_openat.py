#!/usr/bin/env python3
# cat_openat.py DIR NAME - copy DIR/NAME to stdout, opening NAME relative to
# a descriptor of DIR (openat), as Python programs with dir_fd do
import os
import sys

d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fd = os.open(sys.argv[2], os.O_RDONLY, dir_fd=d)
with os.fdopen(fd, "rb") as f:
    while True:
        b = f.read(1 << 16)
        if not b:
            break
        sys.stdout.buffer.write(b)
