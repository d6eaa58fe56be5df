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
#   rawclient.py SOCKET passfd N JSON        a request carrying descriptor N,
#                                            which the caller opened (a file
#                                            whose path has changed since)
#   rawclient.py SOCKET flood N GOFILE       send N pings without reading
#                                            the replies; print whether the
#                                            agent stopped reading (no
#                                            progress for 3 s); once GOFILE
#                                            exists, send the rest and read
#                                            every reply, checking their ids
#   rawclient.py SOCKET hold N GOFILE        open N silent connections and
#                                            reopen every one the agent
#                                            closes (at once after a
#                                            timeout, 1 s after a refusal)
#                                            until GOFILE exists; then wait
#                                            until the agent has closed the
#                                            rest; print why they closed
#   rawclient.py SOCKET hostile FILE GOFILE  pass a descriptor of FILE
#                                            four ways (a replica.open
#                                            request with 4 copies of
#                                            it; one byte, then
#                                            gone; the request again; on
#                                            a connection's second
#                                            message), print each reply,
#                                            then keep the descriptor
#                                            until GOFILE exists (its own
#                                            close may hang: FUSE flush)
#   rawclient.py SOCKET fetches FILE...      a replica.open for each FILE,
#                                            each on its own connection
#                                            with its descriptor, all sent
#                                            before any reply is read; then
#                                            1 s for replies; print one
#                                            line a FILE: "deferred" (no
#                                            reply: a fetch queued), or
#                                            the reply's body; then close
#   rawclient.py SOCKET opens N FILE GOFILE  N replica.open requests for
#                                            FILE, each on a connection of
#                                            its own with a descriptor of
#                                            it, as fast as the agent takes
#                                            them (1024 connections at a
#                                            time, one reopened for each the
#                                            agent closes); print "sent N",
#                                            with how many are waiting for
#                                            an answer and how the others
#                                            ended; then keep them, and the
#                                            attempts going, until GOFILE
#                                            exists
#
# Frame: magic "TIR1", u16 version, u16 type (1 request, 2 response),
# u32 id, u32 length, host byte order; then the JSON body.
import os
import select
import socket
import struct
import sys
import time

MAGIC = 0x31524954
HDR = struct.Struct("=IHHII")


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    deadline = time.monotonic() + 30
    while True:
        try:
            s.connect(path)
            return s
        except BlockingIOError:
            # a full listen backlog: AF_UNIX says EAGAIN, it does not wait
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


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


def flood(s, n, gofile):
    body = b'{"op":"ping"}'
    data = b"".join(HDR.pack(MAGIC, 1, 1, i, len(body)) + body
                    for i in range(1, n + 1))
    size = HDR.size + len(body)
    s.setblocking(False)
    sent = 0
    while sent < len(data):
        try:
            sent += s.send(data[sent:sent + 65536])
            continue
        except BlockingIOError:
            pass
        if not select.select([], [s], [], 3)[1]:
            break
    if sent < len(data):
        print("stalled after %d of %d requests" % (sent // size, n),
              flush=True)
    else:
        print("sent all %d requests without stalling" % n, flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(gofile):
        if time.monotonic() > deadline:
            sys.exit("no " + gofile)
        time.sleep(0.1)
    buf = b""
    want = 1
    while want <= n:
        w = [s] if sent < len(data) else []
        r, w, _ = select.select([s], w, [], 30)
        if not r and not w:
            sys.exit("timeout waiting for reply %d" % want)
        if w:
            try:
                sent += s.send(data[sent:sent + 65536])
            except BlockingIOError:
                pass
        if r:
            chunk = s.recv(1 << 20)
            if not chunk:
                sys.exit("closed before reply %d" % want)
            buf += chunk
            while len(buf) >= HDR.size:
                magic, version, mtype, mid, length = HDR.unpack_from(buf)
                if len(buf) < HDR.size + length:
                    break
                reply = buf[HDR.size:HDR.size + length]
                buf = buf[HDR.size + length:]
                if mid != want or mtype != 2 or b'"errno"' in reply:
                    sys.exit("reply %d: id %d type %d %r"
                             % (want, mid, mtype, reply[:200]))
                want += 1
    print("%d replies in order" % n)


def pipeline(s, n, body):
    """n requests of body sent at once on one connection (ids 1..n), then
    every reply read: prints how many came, and how many were errors."""
    body = body.encode()
    s.settimeout(600)
    s.sendall(b"".join(HDR.pack(MAGIC, 1, 1, i, len(body)) + body
                       for i in range(1, n + 1)))
    print("sent %d requests" % n, flush=True)
    got, errors, ids = 0, 0, set()
    while got < n:
        r = read_reply(s)
        if r is None:
            sys.exit("closed after %d replies" % got)
        got += 1
        ids.add(r[2])
        if '"errno"' in r[3]:
            errors += 1
            print("error: " + r[3][:200])
    print("%d replies, %d errors, %d ids" % (got, errors, len(ids)))


def close_reason(data):
    """What the agent said when it closed a connection (its error reply)."""
    if len(data) < HDR.size:
        return "closed without a reply"
    body = data[HDR.size:].decode("utf-8", "replace")
    if "ClientsPerUser" in body:
        return "per-user-cap"
    if "to make room for another user" in body:
        return "room-for-others"
    if "kept for root and SlurmUser" in body:
        return "user-pool"
    if "no whole request" in body:
        return "first-request-timeout"
    return "other: " + body[:200]


def hold(path, n, gofile):
    import resource
    import selectors
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n + 64, hard), hard))
    sel = selectors.DefaultSelector()
    reasons = {}
    reopen = []                         # times at which to open one more

    def open_one():
        s = connect(path)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, b"")

    for _ in range(n):
        open_one()
    print("holding %d" % n, flush=True)
    stop = None
    while True:
        now = time.monotonic()
        if stop is None and os.path.exists(gofile):
            stop = now
            print("stopped reopening with %d open" % len(sel.get_map()),
                  flush=True)
        if stop is not None:
            if not sel.get_map():
                break
            if now - stop > 120:
                print("still open after 120 s: %d" % len(sel.get_map()))
                sys.exit(1)
        else:
            due = [t for t in reopen if t <= now]
            reopen = [t for t in reopen if t > now]
            for _ in due:
                open_one()
        for key, _ in sel.select(timeout=0.2):
            s, data = key.fileobj, key.data
            try:
                chunk = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                chunk = b""
            data += chunk
            if chunk and len(data) < HDR.size + (
                    HDR.unpack_from(data)[4] if len(data) >= HDR.size
                    else 0):
                sel.modify(s, selectors.EVENT_READ, data)
                continue
            why = close_reason(data)
            reasons[why] = reasons.get(why, 0) + 1
            sel.unregister(s)
            s.close()
            if stop is None:
                reopen.append(now + (0 if why == "first-request-timeout"
                                     else 1))
    print("all closed by the agent")
    for why in sorted(reasons):
        print("reason %s: %d" % (why, reasons[why]))


def hostile(path, file, gofile):
    fd = os.open(file, os.O_RDONLY)
    body = ('{"op":"replica.open","path":"%s"}' % file).encode()
    request = HDR.pack(MAGIC, 1, 1, 7, len(body)) + body
    ping = b'{"op":"ping"}'
    ping = HDR.pack(MAGIC, 1, 1, 8, len(ping)) + ping

    def show(what, s):
        try:
            r = read_reply(s)
        except socket.timeout:
            print("%s: timeout" % what, flush=True)
            return
        print("%s: %s" % (what, r[3] if r else "closed"), flush=True)

    s = connect(path)
    socket.send_fds(s, [request], [fd] * 4)     # four, each closed alone
    show("open", s)
    s.close()
    s = connect(path)
    socket.send_fds(s, [b"T"], [fd])
    s.close()
    print("byte: sent", flush=True)
    s = connect(path)
    socket.send_fds(s, [request], [fd])
    show("again", s)
    s.close()
    s = connect(path)
    s.sendall(ping)
    show("first", s)
    socket.send_fds(s, [request], [fd])
    show("later", s)
    s.close()
    print("done", flush=True)
    while not os.path.exists(gofile):
        time.sleep(0.2)
    os._exit(0)


def fetches(path, files):
    conns = []
    for f in files:
        s = connect(path)
        body = ('{"op":"replica.open","path":"%s"}' % f).encode()
        fd = os.open(f, os.O_RDONLY)
        socket.send_fds(s, [HDR.pack(MAGIC, 1, 1, 7, len(body)) + body], [fd])
        os.close(fd)
        conns.append(s)
    deadline = time.monotonic() + 1.0
    for f, s in zip(files, conns):
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            r = read_reply(s)
            print("%s: %s" % (f, "closed" if r is None else r[3]))
        except socket.timeout:
            print("%s: deferred" % f)
        s.close()


def opens(path, n, file, gofile):
    import resource
    import selectors
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    fd = os.open(file, os.O_RDONLY)
    body = ('{"op":"replica.open","path":"%s"}' % file).encode()
    request = HDR.pack(MAGIC, 1, 1, 7, len(body)) + body
    sel = selectors.DefaultSelector()
    ended = {}
    sent = 0

    def send_one():
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            socket.send_fds(s, [request], [fd])
        except OSError as e:
            ended["connect: " + e.strerror] = ended.get(
                "connect: " + e.strerror, 0) + 1
            s.close()
            return
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, b"")

    def poll(timeout):
        for key, _ in sel.select(timeout=timeout):
            s, data = key.fileobj, key.data
            try:
                chunk = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                chunk = b""
            data += chunk
            if chunk and len(data) < HDR.size + (
                    HDR.unpack_from(data)[4] if len(data) >= HDR.size
                    else 0):
                sel.modify(s, selectors.EVENT_READ, data)
                continue
            why = close_reason(data) if data else "closed"
            if len(data) > HDR.size and b"fallthrough" in data:
                why = "fallthrough"
            elif len(data) > HDR.size and b'"replica"' in data:
                why = "replica"
            ended[why] = ended.get(why, 0) + 1
            sel.unregister(s)
            s.close()

    while sent < n:
        while sent < n and len(sel.get_map()) < 1024:
            send_one()
            sent += 1
        poll(0.01 if len(sel.get_map()) < 1024 else 0.2)
    poll(1.0)
    print("sent %d, %d waiting; %s" % (sent, len(sel.get_map()), ", ".join(
        "%s %d" % (k, v) for k, v in sorted(ended.items()))), flush=True)
    while not os.path.exists(gofile):
        if len(sel.get_map()) < 1024:
            send_one()
            sent += 1
        poll(0.05)
    print("stopped after %d, %d waiting" % (sent, len(sel.get_map())),
          flush=True)
    os._exit(0)


def main():
    path, what = sys.argv[1], sys.argv[2]
    if what == "opens":
        opens(path, int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    if what == "fetches":
        fetches(path, sys.argv[3:])
        return
    if what == "hold":
        hold(path, int(sys.argv[3]), sys.argv[4])
        return
    if what == "hostile":
        hostile(path, sys.argv[3], sys.argv[4])
        return
    s = connect(path)
    if what == "flood":
        flood(s, int(sys.argv[3]), sys.argv[4])
        return
    if what == "pipeline":
        pipeline(s, int(sys.argv[3]), sys.argv[4])
        return
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
    elif what == "passfd":
        body = sys.argv[4].encode()
        socket.send_fds(s, [HDR.pack(MAGIC, 1, 1, 7, len(body)) + body],
                        [int(sys.argv[3])])
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
