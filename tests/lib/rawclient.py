#!/usr/bin/env python3
# rawclient.py - speak tier's wire protocol by hand, for hostile-client tests
#
#   rawclient.py SOCKET request JSON         one request, print the reply
#   rawclient.py SOCKET version N JSON       a request with protocol version N
#   rawclient.py SOCKET garbage              random bytes, print the reply
#   rawclient.py SOCKET oversize BYTES       a header announcing BYTES
#   rawclient.py SOCKET half                 half a message, then silence;
#                                            print what arrives and when
#   rawclient.py SOCKET fd FILE JSON         a request carrying a read-only
#                                            descriptor of FILE (SCM_RIGHTS)
#
# Frame: magic "TIR1", u16 version, u16 type (1 request, 2 response),
# u32 id, u32 length, host byte order; then the JSON body.
import os
import socket
import struct
import sys
import time

MAGIC = 0x31524954
HDR = struct.Struct("=IHHII")


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    return s


def read_reply(s):
    hdr = b""
    while len(hdr) < HDR.size:
        chunk = s.recv(HDR.size - len(hdr))
        if not chunk:
            return None
        hdr += chunk
    magic, version, mtype, mid, length = HDR.unpack(hdr)
    body = b""
    while len(body) < length:
        chunk = s.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    return version, mtype, mid, body.decode("utf-8", "replace")


def main():
    path, what = sys.argv[1], sys.argv[2]
    s = connect(path)
    t0 = time.monotonic()
    if what in ("request", "version"):
        version = 1 if what == "request" else int(sys.argv[3])
        body = sys.argv[-1].encode()
        s.sendall(HDR.pack(MAGIC, version, 1, 7, len(body)) + body)
    elif what == "garbage":
        s.sendall(os.urandom(4096))
    elif what == "oversize":
        s.sendall(HDR.pack(MAGIC, 1, 1, 7, int(sys.argv[3])) + b"{")
    elif what == "fd":
        body = sys.argv[4].encode()
        fd = os.open(sys.argv[3], os.O_RDONLY)
        socket.send_fds(s, [HDR.pack(MAGIC, 1, 1, 7, len(body)) + body], [fd])
        os.close(fd)
    elif what == "half":
        body = b'{"op":"ping"}'
        s.sendall(HDR.pack(MAGIC, 1, 1, 7, len(body)) + body[:5])
    else:
        sys.exit("unknown mode " + what)
    try:
        r = read_reply(s)
    except socket.timeout:
        print("timeout")
        sys.exit(3)
    dt = time.monotonic() - t0
    if r is None:
        print("closed after %.1fs" % dt)
        sys.exit(0)
    version, mtype, mid, body = r
    print("version=%d type=%d id=%d after=%.1fs body=%s"
          % (version, mtype, mid, dt, body))


if __name__ == "__main__":
    main()
