# SPDX-License-Identifier: Apache-2.0
"""Round trip of a memory-server GET: plain TCP against TLS, and a request
sent in three writes (header, batch, keys: QEMU's client before patch 33)
against one write (after).

The real ``qemu-memory-server`` of the lab's build listens on loopback,
plain or with x509 TLS credentials (a CA and a server certificate made
with openssl for the run; the client is not asked for one).  The client
is this process (Python's ``ssl``, i.e. OpenSSL, where QEMU's client uses
GnuTLS): it stores PAGES pages, then times REQUESTS GETs of them one
after the other.  Figures are per combination: p50 and p99 of each run,
and the median and spread (min-max) of the p50s over the runs.  What it
leaves out: the fault path around a GET in QEMU (userfaultfd, the pager
thread), and vCPUs competing for the cores (``./lab/bench split`` has
both).
"""

import argparse
import os
import re
import socket
import ssl
import statistics
import struct
import subprocess
import tempfile
import time

from puma_lab import errors
from puma_lab.memserver import BATCH
from puma_lab.memserver import HEADER
from puma_lab.memserver import MAGIC
from puma_lab.memserver import OP_GET
from puma_lab.memserver import OP_HELLO
from puma_lab.memserver import OP_PUT
from puma_lab.memserver import PAGE_SIZE
from puma_lab.memserver import VERSION
from puma_lab import paths


def make_pki(d):
    """A CA and a server certificate for 127.0.0.1 in D (QEMU's names)."""
    def ossl(*args):
        subprocess.run(('openssl',) + args, cwd=d, check=True,
                       capture_output=True, timeout=120)
    ossl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1',
         '-keyout', 'ca-key.pem', '-out', 'ca-cert.pem', '-subj', '/CN=ca')
    ossl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout',
         'server-key.pem', '-out', 'server.csr', '-subj', '/CN=127.0.0.1')
    with open(os.path.join(d, 'ext.cnf'), 'w') as f:
        f.write('subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n'
                'extendedKeyUsage=serverAuth\n')
    ossl('x509', '-req', '-in', 'server.csr', '-CA', 'ca-cert.pem',
         '-CAkey', 'ca-key.pem', '-CAcreateserial', '-days', '1',
         '-out', 'server-cert.pem', '-extfile', 'ext.cnf')


class Server:
    def __init__(self, pki=None):
        argv = [paths.memory_server(), '--listen', '127.0.0.1:0',
                '--max-memory', '256M']
        if pki:
            argv += ['--object', 'tls-creds-x509,id=tls0,endpoint=server,'
                     'dir=%s,verify-peer=off' % pki, '--tls-creds', 'tls0',
                     '--vm', 'rtt']
        else:
            argv += ['--insecure']
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r'listening on 127\.0\.0\.1:(\d+)', line)
            if m:
                self.port = int(m.group(1))
                return
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise errors.LabError('memory server did not start: %s' % line)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


class Client:
    def __init__(self, port, pki=None):
        s = socket.create_connection(('127.0.0.1', port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if pki:
            ctx = ssl.create_default_context(
                cafile=os.path.join(pki, 'ca-cert.pem'))
            s = ctx.wrap_socket(s, server_hostname='127.0.0.1')
        self.sock = s
        self.seq = 0

    def request(self, op, parts, one_write=True):
        self.seq += 1
        payload = b''.join(parts)
        head = HEADER.pack(MAGIC, op, 0, self.seq, len(payload))
        if one_write:
            self.sock.sendall(head + payload)
        else:
            self.sock.sendall(head)
            for p in parts:
                self.sock.sendall(p)
        reply = self._recv(HEADER.size)
        _, rop, status, seq, length = HEADER.unpack(reply)
        self._recv(length)
        if (rop, status, seq) != (op, 0, self.seq):
            raise errors.LabError('memory server answered op %d status %d '
                                  'seq %d to op %d seq %d'
                                  % (rop, status, seq, op, self.seq))

    def _recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise errors.LabError('memory server closed the connection')
            buf += chunk
        return bytes(buf)

    def close(self):
        self.sock.close()


def measure(pki, pages, one_write, requests):
    """(p50, p99) in us of REQUESTS GETs of PAGES pages."""
    server = Server(pki)
    try:
        c = Client(server.port, pki)
        vm = b'rtt'
        c.request(OP_HELLO, [struct.pack('<HHI', VERSION, len(vm),
                                         PAGE_SIZE), vm])
        keys = struct.pack('<%dQ' % pages, *range(pages))
        batch = BATCH.pack(pages, 0)
        c.request(OP_PUT, [batch, keys, os.urandom(PAGE_SIZE * pages)])
        lat = []
        for _ in range(requests):
            t = time.perf_counter()
            c.request(OP_GET, [batch, keys], one_write)
            lat.append((time.perf_counter() - t) * 1e6)
        c.close()
    finally:
        server.stop()
    lat.sort()
    return lat[len(lat) // 2], lat[int(len(lat) * 0.99)]


def run(argv):
    ap = argparse.ArgumentParser(prog='lab/bench memserver_rtt')
    ap.add_argument('--requests', type=int, default=2000)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--pages', default='1,17',
                    help='pages per GET (17: a fault and its prefetch)')
    args = ap.parse_args(argv)
    out = {'requests': args.requests, 'runs': args.runs,
           'server': paths.memory_server()}
    with tempfile.TemporaryDirectory(prefix='puma-rtt-') as pki:
        make_pki(pki)
        for pages in [int(p) for p in args.pages.split(',')]:
            for tls in (False, True):
                for one in (False, True):
                    key = 'p%d_%s_%s' % (pages, 'tls' if tls else 'tcp',
                                         'one' if one else 'three')
                    runs = [measure(pki if tls else None, pages, one,
                                    args.requests)
                            for _ in range(args.runs)]
                    p50s = [r[0] for r in runs]
                    out[key + '_p50_us'] = round(statistics.median(p50s))
                    out[key + '_p50_spread_us'] = [round(min(p50s)),
                                                   round(max(p50s))]
                    out[key + '_p99_us'] = [round(r[1]) for r in runs]
    big = max(int(p) for p in args.pages.split(','))

    def ratio(a, b):
        a, b = out.get(a), out.get(b)
        return round(a / b, 2) if a and b else None

    p = 'p%d_' % big
    out['tls_x_tcp'] = ratio(p + 'tls_one_p50_us', p + 'tcp_one_p50_us')
    out['one_x_three_tcp'] = ratio(p + 'tcp_one_p50_us',
                                   p + 'tcp_three_p50_us')
    out['one_x_three_tls'] = ratio(p + 'tls_one_p50_us',
                                   p + 'tls_three_p50_us')
    return out
