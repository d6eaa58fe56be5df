#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# mkcorpus.py - write the seed corpora under tests/fuzz/corpus/ (run once
# after changing a target's input format; the outputs are committed)
import os
import struct

top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(name, seeds):
    d = os.path.join(top, name)
    os.makedirs(d, exist_ok=True)
    for i, s in enumerate(seeds):
        with open(os.path.join(d, "seed-%02d" % i), "wb") as f:
            f.write(s)


put("tjson", [
    b'{}',
    b'{"op":"ping"}',
    b'{"errno": 13, "error": "job 42 belongs to another user"}',
    b'{"a":[1,-2,3.5e-3,true,false,null,"x",{"b":[[]]}],"e":"\\u00e9"}',
    b'{"s":"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\ud83d\\ude00","\xc3\xa9":1}',
    b'{"a":1,"a":2,"\\u0061":3}',
    b'{"big":18446744073709551615,"huge":1e400,"neg":-9223372036854775808}',
    b'{"nul":"x\\u0000y"}',
    b'{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}',
    b'{"a":1,}',
    b'{"a":"\\ud800"}',
    b'\x10k\x00v\x00\xff\x00\xc3\xa9\x00"\\\x01',
    # Jansson's json_loadb skips a raw NUL after a number; we refuse it
    b'{"errlo": 8\x00, "error": "job 42 belongs to another user"}',
])


def msg(type_, id_, body, version=1, magic=0x31524954):
    return struct.pack("=IHHII", magic, version, type_, id_, len(body)) + body


def chunks(flags, parts):
    # parts: (nfds code 0..3, bytes); split into <= 63-byte chunks
    out = bytes([flags])
    for code, data in parts:
        first = True
        while data or first:
            c, data = data[:63], data[63:]
            out += bytes([(code << 6 if first else 0) | len(c)]) + c
            first = False
    return out


m1 = msg(1, 1, b'{"op":"ping"}')
m2 = msg(2, 2, b'{"ok":true}')
m3 = msg(1, 3, b'')
put("msgreader", [
    chunks(0, [(0, m1)]),
    chunks(0, [(1, m1), (2, m2), (0, m3)]),
    chunks(1, [(1, m1), (0, m2)]),
    chunks(2, [(0, m1 + m2)]),
    chunks(2, [(0, m1[:20])]),
    chunks(0, [(3, m1)]),
    chunks(0, [(0, msg(1, 4, b'{}', version=7))]),
    chunks(0, [(0, msg(1, 5, b'{}', magic=0x50545448))]),
    chunks(0, [(0, msg(9, 6, b'{}'))]),
    chunks(4 << 2, [(0, msg(1, 7, b'x' * 65))]),
    chunks(3, [(1, m1), (0, m2[:5])]),
    # more small packets than the socket buffer holds, unread
    bytes([1]) + b"\x41\x00" * 2000,
])

put("conf", [
    b"# a full configuration\nSocketDir = /run/tier/%n   # per node\n"
    b"statedir=/var/lib/tier/%n/\nSharedStateDir = /gfs/.tier\n"
    b"LogFile = /var/log/tier-%n.log\nLogLevel = debug\n"
    b"NvdimmDir = /dev/shm/tier/%n\nNvdimmCapacity = 4G\nBBDir = /bb/%u\n"
    b"BBCapacity = 100G\nAllowedRoots = /gfs , /scratch//x/\n"
    b"TierdPath = /opt/tier/sbin/tierd\nSlurmUser = slurm\nEnabled = no\n"
    b"AgentTimeout = 5s\n\n   \t\n",
    b"\x00SocketDir = /a/./b\nAllowedRoots = /\n",
    b"AgentTimeout = 1h30m\nBBCapacity = 16MiB\nLogLevel = error\n",
    b"SocketDir = /a\nsocketdir = /b\n",
    b"SocketDir = /run/%x\n",
    b"Enabled = maybe\nBogus = 1\n",
    b"AllowedRoots = /gfs,,/x\n",
])

put("opts", [
    b"\x00\x40/gfs/in/%A_%3a.dat,/gfs/b\x00alice\x00job\x00n1",
    b"\x06\xff/scratch/x:16G,/tmp/y:1M\x00bob",
    b"\x01\x10auto\x00--array=1-4\x00script.sh",
    b"\x02\x20on-failure\x00-a1-4\x00--wrap=true",
    b"\x00\x00#!/bin/bash\n#SBATCH -N 2\n#SBATCH --array=1-3\necho hi\n",
    b"\x05\x05conf=/etc/tier/tier.conf\x00default=auto\x00preload=/x.so",
    b"\x07\x07/a/../b,%%,%j%u%x%N%n%10A\\x\x00..\x00\x00/",
    b"\x03\x80required\x00--\x00-N\x002\x00--arr=2",
    b"\x05\x30s3://bkt/in/q%a.txt=/gfs/in/q%a.txt,/gfs/x\x00alice",
    b"\x04\x08https://u:p@[::1]:8443/dav/a%%20b?sig=1=/gfs/y\x00bob",
    b"\x04\x40http://h/x=/gfs/a=/b,s3://Bad_b/k=/g\x00\x00job",
])

put("names", [
    b"\x10slurmstepd: [12.batch]",
    b"\x03slurmstepd: [4294967295.extern]",
    b"\x20slurmstepd: [7.0+1]",
    b"\x20slurmstepd: [0.batch]",
    b"\x01alice",
    b"\x01..",
    b"\x01info",
    b"\x01batch",
])

put("evt", [
    b"run,node,seconds\nr1,n1,10.5\nr1,n2,11\n\"r2\",\"n1\",3e1\n",
    b"# comment\nNODE,Seconds,Run,extra\nn1,1,a,x\n\nn2,2,a,y\n",
    b"run,node,seconds\nr1,n1,-1\nr1,n1,nan\n",
    b"run,node\nr1,n1\n",
])

# fuzz_policy: a first byte picks the parser (D document as site or user
# layer, F frozen set, O job options), the rest is the text
put("policy", [
    b'D' + open(os.path.join(os.path.dirname(top), "..", "..", "policies",
                             "presets", "blast.json"), "rb").read(),
    b'D' + open(os.path.join(os.path.dirname(top), "..", "..", "policies",
                             "presets", "site-example.json"), "rb").read(),
    b'D{"version":1,"policies":{"/a/b":{"role":"batch","ttl":"7d",'
    b'"revalidate":0},"/a/b/tmp/":{"role":"none"},"//a//bc":{"role":'
    b'"pipeline","size":"16M","keep":"always"}}}',
    b'D{"version":1,"policies":{"/g":{"role":"endpoint","window":"64M",'
    b'"block":"1M","prefetch":"stride","tier":"nvdimm"},"/g/in":{"role":'
    b'"batch"},"/x/../y":{"role":"none"}}}',
    b'D{"version":1,"policies":{"/s":{"role":"none","locked":true},'
    b'"/s/u":{"role":"batch","share":"world","comment":"\\u00e9"}}}',
    b'D{"version":2,"policies":{"rel":{"role":"x"}},"extra":1}',
    b'F[{"dir":"/a","layer":"site","source":"/etc/tier/policies.d/a.json",'
    b'"role":"pipeline","locked":true},{"dir":"/a/b","layer":"user",'
    b'"source":"s","role":"batch","ttl":"1h30m"},{"dir":"/a/b/c","layer":'
    b'"job","source":"--tier-batch","role":"batch"}]',
    b'O{"cache":"auto","keep":"on-failure","scratch":"/gfs/run:16M,'
    b'/gfs/r2","batch":"/gfs/db,/gfs/db/x","stage_out":"/gfs/o,/gfs/o%a"}',
])

# fuzz_rpc: requests separated by 0x1e; each starts with a byte whose
# bits 0-1 pick the caller (0 root, 1 SlurmUser, 2 a user, 3 nobody),
# bits 2-3 how many descriptors go with it, bits 4-5 which, bits 6-7 what
# a child it starts does (0 ends at once unable to set up, 1 ends at once
# with 0, 2 is killed at once, 3 is a real fork that does its work)
ROOT, SLURM, USER, NOBODY = 0, 1, 2, 3
CHILD_OK, CHILD_KILLED, CHILD_REAL = 0x40, 0x80, 0xc0


def rpc(*reqs):
    return b"\x1e".join(bytes([ctl]) + body for ctl, body in reqs)


REG = (b'{"op":"job.register","job_id":5,"restart":0,"batch_id":4,'
       b'"array_task_id":1,"uid":4242,"gid":4242,"user":"alice",'
       b'"groups":[4242,100],"options":{"cache":"auto","scratch":"/gfs/run:16M",'
       b'"batch":"/gfs/db","stage_out":"/gfs/out","keep":"on-failure"},'
       b'"scratch_reserve":16777216}')
REG_NOBODY = (b'{"op":"job.register","job_id":9,"uid":65534,"gid":65534,'
              b'"user":"nobody","groups":[],'
              b'"options":{"cache":"required"}}')
put("rpc", [
    rpc((ROOT, b'{"op":"ping"}'), (USER, b'{"op":"status"}')),
    rpc((ROOT, REG), (USER, b'{"op":"jobs"}'),
        (USER, b'{"op":"job.show","job_id":5}'),
        (NOBODY, b'{"op":"job.show","job_id":5,"restart":0}'),
        (USER, b'{"op":"counters","scope":"job","id":5}'),
        (USER, b'{"op":"counters","scope":"batch","id":4}'),
        (ROOT, b'{"op":"counters","scope":"node"}'),
        (USER, b'{"op":"job.policy","job_id":5}'),
        (ROOT, b'{"op":"job.end","job_id":5,"scratch_files":2,'
               b'"scratch_bytes":4096,"copyups":1,"copyup_bytes":10,'
               b'"kept_bytes":0}'),
        (USER, b'{"op":"jobs"}')),
    rpc((ROOT, REG_NOBODY),
        (ROOT, b'{"op":"job.stage_in","job_id":9,"uid":65534,"gid":65534,'
               b'"user":"nobody","items":["/gfs/in/a","/gfs/in/b"]}'),
        (ROOT, b'{"op":"job.stage_restart","job_id":9,"part":0,'
               b'"pid":2}'),
        (ROOT, b'{"op":"job.stageout","job_id":9,"restart":0,'
               b'"dirs":["/gfs/out"]}'),
        (NOBODY, b'{"op":"job.stageout_sync","job_id":9,"timeout_ms":10,'
                 b'"wait":false}'),
        (NOBODY, b'{"op":"job.outputs","job_id":9}'),
        (ROOT, b'{"op":"job.end","job_id":9}')),
    rpc((USER | 4, b'{"op":"replica.open","path":"/gfs/data"}'),
        (USER, b'{"op":"replica.report","cached":3,"cached_bytes":100}'),
        (USER | 4, b'{"op":"replica.prefetch","path":"/gfs/data"}'),
        (USER, b'{"op":"replica.evict","path":"/gfs"}'),
        (USER, b'{"op":"replica.list"}'),
        (USER, b'{"op":"replica.mirror","path":"/gfs/db"}')),
    rpc((USER, b'{"op":"whoami"}'),
        (USER, b'{"op":"replica.report","cached":5,'
               b'"cached_bytes":4096}'),
        (USER, b'{"op":"user.ensure"}'),
        (USER, b'{"op":"node.enable","enable":false}'),
        (SLURM, b'{"op":"node.enable","enable":false}'),
        (ROOT, b'{"op":"ping"}'),
        (ROOT, b'{"op":"node.enable","enable":true}')),
    rpc((ROOT, b'[1,2]'), (ROOT, b'{"op":1}'), (ROOT, b'{}'),
        (ROOT, b'{"op":"frobnicate"}'), (ROOT, b'{"op":"ping"\x00}'),
        (ROOT, b'{"op":"ping","op":"jobs"}'),
        (ROOT, b'{"op":"job.show","job_id":"x"}'),
        (ROOT, b'{"op":"job.register","job_id":4294967295,"uid":0,'
               b'"gid":0,"user":"../x"}'),
        (ROOT, b'{"op":"job.register","job_id":6,"uid":4242,"gid":4242,'
               b'"user":"alice","groups":[4294967295,-1,"x"]}'),
        (USER | 0x3c, b'{"op":"ping"}')),
    # the stage-in and stage-out above with children that do their work
    # (as nobody, whose uid they can take), end with 0, or are killed
    rpc((ROOT | CHILD_REAL, REG_NOBODY),
        (ROOT | CHILD_REAL, b'{"op":"job.stage_in","job_id":9,"uid":65534,'
                            b'"gid":65534,"user":"nobody",'
                            b'"items":["/gfs/in/a","/gfs/data"]}'),
        (ROOT | CHILD_OK, b'{"op":"job.stageout","job_id":9,"restart":0,'
                          b'"dirs":["/gfs/out"]}'),
        (NOBODY | CHILD_KILLED, b'{"op":"job.stageout_sync","job_id":9,'
                                b'"timeout_ms":10,"wait":false}'),
        (ROOT | CHILD_REAL, b'{"op":"job.end","job_id":9}')),
])
