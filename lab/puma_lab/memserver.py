# SPDX-License-Identifier: Apache-2.0
"""The memory server of split migration, run on an emulated host.

``qemu-memory-server`` (contrib/memory-server in our QEMU series) holds the
cold pages of split-migrated guests.  :class:`MemoryServer` starts it in a
host's namespace, waits for its ``listening on`` line, stops it with
SIGTERM (a clean exit is part of its contract) or kills it, and reads its
counters with the protocol's STATS request
(include/qemu/memory-server-proto.h) or from the line it prints on
SIGUSR1.  :func:`put` and :func:`get` store and fetch whole pages, as a
client would, from inside a host's namespace.
"""

import json
import os
import re
import signal
import socket
import struct
import time

from puma_lab import daemon
from puma_lab import errors
from puma_lab import netns
from puma_lab import paths

READY_TIMEOUT = 30
MAGIC = 0x31534d50
VERSION = 1
PAGE_SIZE = 4096
OP_HELLO, OP_PUT, OP_GET, OP_STATS, OP_DROP, OP_BYE = 1, 2, 3, 5, 6, 7
HEADER = struct.Struct('<IHHII')
BATCH = struct.Struct('<II')
STATS_FIELDS = ('vm_pages', 'total_pages', 'limit_pages', 'puts', 'gets',
                'discards', 'errors', 'connections')
# The namespace the lab's STATS probe says hello with; dropped after.
PROBE_VM = 'puma-lab-stats-probe'


class MemoryServer(daemon.Daemon):
    """One ``qemu-memory-server`` process on HOST, port PORT."""

    def __init__(self, host, port=7800, max_mb=2048, name=None, also=(),
                 psk_dir=None, x509_dir=None, vm=None):
        self.host = host
        self.port = port
        self.max_mb = max_mb
        # TLS only, with the PSK keys (keys.psk, one VM per line) of
        # this directory: see write_psk().
        self.psk_dir = psk_dir
        # Or TLS only, with the x509 server certificate of this directory
        # (tls.Authority.host_dir), clients must show one of the same CA.
        self.x509_dir = x509_dir
        # The one VM (its id: the guest's UUID) the server may serve
        # (--vm); a server with x509 credentials needs it, since a host's
        # certificate says nothing of which VM it may use.
        self.vm = vm
        if x509_dir and not vm:
            raise errors.LabError('a memory server with x509 credentials '
                                  'serves one VM: give vm=')
        # More HOST:PORT to listen on (--listen repeated).
        self.also = tuple(also)
        name = name or 'memsrv-%s-%d' % (host.name, port)
        self.dir = host.lab.path(name)
        super().__init__(name, os.path.join(self.dir, 'memsrv.log'))
        self.pidfile = os.path.join(self.dir, 'memsrv.pid')

    @property
    def uri(self):
        return 'tcp:%s:%d' % (self.host.addr, self.port)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        argv = [paths.memory_server(), '--listen',
                '%s:%d' % (self.host.addr, self.port),
                '--max-memory', '%dM' % self.max_mb,
                '--pidfile', self.pidfile]
        for addr in self.also:
            argv += ['--listen', addr]
        if self.psk_dir:
            argv += ['--object', 'tls-creds-psk,id=tls0,endpoint=server,'
                     'dir=%s' % self.psk_dir, '--tls-creds', 'tls0']
        elif self.x509_dir:
            argv += ['--object', 'tls-creds-x509,id=tls0,endpoint=server,'
                     'verify-peer=on,dir=%s' % self.x509_dir,
                     '--tls-creds', 'tls0']
        else:
            # The lab's hosts are namespaces of this machine alone.
            argv += ['--insecure']
        if self.vm:
            argv += ['--vm', self.vm]
        self.spawn(['ip', 'netns', 'exec', self.host.ns] + argv)
        self.host.lab.register(self, 'guest')
        addrs = ['%s:%d' % (self.host.addr, self.port)] + list(self.also)
        wants = ['memory-server: listening on %s' % a for a in addrs]
        return self.wait_ready(
            lambda: all(w in self.output() for w in wants),
            'listening on %s' % ', '.join(addrs), READY_TIMEOUT)

    def listening(self):
        """The HOST:PORT of each 'listening on' line, in order."""
        return re.findall(r'^memory-server: listening on (\S+)'
                          r'(?: \(TLS\))?$', self.output(), re.M)

    def signal_stats(self, timeout=10):
        """SIGUSR1; the counters of the stats line it prints, as a dict."""
        pattern = re.compile(r'^memory-server: stats: (.*)$', re.M)
        seen = len(pattern.findall(self.output()))
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = pattern.findall(self.output())
            if len(lines) > seen:
                return {k: int(v) for k, v in
                        (f.split('=', 1) for f in lines[seen].split())}
            time.sleep(0.1)
        raise errors.LabError('%s printed no stats line within %ds of '
                              'SIGUSR1: %s' % (self.name, timeout,
                                               self.output()))

    def stop(self, timeout=15):
        """SIGTERM; its exit status (None if it was not running).

        :raises daemon.Lingered: it ignored SIGTERM (it is killed).
        """
        return self.terminate(timeout)

    def refuse(self, on=True):
        """Make the server unreachable (ON) or reachable again, alive.

        An nftables rule in its host answers every packet to its port
        with a TCP reset: open connections break and new ones are
        refused at once, while the process keeps what it holds, as in a
        network partition that the client sees quickly.
        """
        table = 'puma_refuse_%d' % self.port
        if on:
            netns.run('nft', '-f', '-', ns=self.host.ns, input=(
                'table inet %s {\n'
                ' chain input {\n'
                '  type filter hook input priority 0;\n'
                '  tcp dport %d reject with tcp reset\n'
                ' }\n'
                '}\n' % (table, self.port)))
        else:
            netns.run('nft', 'delete', 'table', 'inet', table,
                      ns=self.host.ns)

    def stats(self, timeout=10):
        """The server's counters (pages), as a dict.

        From a STATS request, or, from a TLS server (whose namespaces the
        lab's plain probe cannot open), from the line SIGUSR1 prints:
        ``puts``, ``gets``, ``discards``, ``errors`` and ``connections``
        are in both.
        """
        if self.psk_dir or self.x509_dir:
            return self.signal_stats(timeout)
        return stats(self.host, self.port, timeout)


def _request(sock, op, seq, payload=b''):
    sock.sendall(HEADER.pack(MAGIC, op, 0, seq, len(payload)) + payload)
    head = _recv(sock, HEADER.size)
    magic, rop, status, rseq, length = HEADER.unpack(head)
    if magic != MAGIC or rop != op or rseq != seq:
        raise errors.LabError('memory server: bad reply header %r' % (head,))
    return status, _recv(sock, length)


def _recv(sock, n):
    buf = b''
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise errors.LabError('memory server closed the connection')
        buf += chunk
    return buf


def _in_ns(host, call, timeout):
    """memserver.CALL run inside HOST's namespace; its JSON result."""
    script = ('import json, sys; sys.path.insert(0, %r); '
              'from puma_lab import memserver; '
              'print(json.dumps(memserver.%s))'
              % (os.path.dirname(os.path.dirname(__file__)), call))
    out = netns.run('python3', '-c', script, ns=host.ns, timeout=timeout + 5)
    return json.loads(out)


def write_psk(directory, identity):
    """A fresh PSK key of IDENTITY (a VM id) in DIRECTORY/keys.psk.

    The format of GnuTLS's psktool, read by QEMU's tls-creds-psk objects
    on both ends: the server's line of each VM, and a client's own.
    """
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, 'keys.psk')
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, 'w') as f:
        f.write('%s:%s\n' % (identity, os.urandom(32).hex()))
    return path


def stats(host, port, timeout=10, addr=None, vm=None):
    """STATS from the server at ADDR:PORT, from inside HOST's namespace.

    ADDR defaults to the host's address.  The probe says hello with its
    own VM id, so ``total_pages`` is what the server holds for real
    guests; its empty namespace is dropped.  A server bound to one VM
    (``--vm``, as Nova's driver starts them) refuses any other: VM says
    hello as that VM instead, whose pages are left alone.
    """
    out = _in_ns(host, 'local_stats(%r, %d, %r, %r)'
                 % (addr or host.addr, port, float(timeout), vm), timeout)
    return dict(zip(STATS_FIELDS, (int(v) for v in out.split())))


def put(host, addr, port, vm_id, fills, timeout=10):
    """Store one page per key of FILLS, each page all FILLS[key] bytes."""
    _in_ns(host, 'local_put(%r, %d, %r, %r, %r)'
           % (addr, port, vm_id, dict(fills), float(timeout)), timeout)


def get(host, addr, port, vm_id, keys, timeout=10):
    """{key: the byte a fetched page is filled with, or None if absent}.

    A page that is not one byte repeated is an error.
    """
    out = _in_ns(host, 'local_get(%r, %d, %r, %r, %r)'
                 % (addr, port, vm_id, list(keys), float(timeout)), timeout)
    return {int(k): v for k, v in out.items()}


def _hello(sock, vm_id):
    vm_id = vm_id.encode()
    status, _ = _request(sock, OP_HELLO, 1,
                         struct.pack('<HHI', VERSION, len(vm_id),
                                     PAGE_SIZE) + vm_id)
    if status:
        raise errors.LabError('memory server refused HELLO: status %d'
                              % status)


def local_put(addr, port, vm_id, fills, timeout):
    keys = sorted(int(k) for k in fills)
    payload = (BATCH.pack(len(keys), 0) +
               struct.pack('<%dQ' % len(keys), *keys) +
               b''.join(bytes([fills[k]]) * PAGE_SIZE for k in keys))
    with socket.create_connection((addr, port), timeout=timeout) as s:
        _hello(s, vm_id)
        status, _ = _request(s, OP_PUT, 2, payload)
        if status:
            raise errors.LabError('memory server refused PUT: status %d'
                                  % status)
        _request(s, OP_BYE, 3)


def local_get(addr, port, vm_id, keys, timeout):
    with socket.create_connection((addr, port), timeout=timeout) as s:
        _hello(s, vm_id)
        status, body = _request(s, OP_GET, 2,
                                BATCH.pack(len(keys), 0) +
                                struct.pack('<%dQ' % len(keys), *keys))
        if status:
            raise errors.LabError('memory server refused GET: status %d'
                                  % status)
        _request(s, OP_BYE, 3)
    n, _ = BATCH.unpack(body[:BATCH.size])
    present = body[BATCH.size:BATCH.size + n]
    at = BATCH.size + (n + 7) // 8 * 8
    found = {}
    for key, here in zip(keys, present):
        if not here:
            found[key] = None
            continue
        page = body[at:at + PAGE_SIZE]
        at += PAGE_SIZE
        if page != bytes([page[0]]) * PAGE_SIZE:
            raise errors.LabError('page %d is not what was put' % key)
        found[key] = page[0]
    return found


def local_stats(addr, port, timeout, vm=None):
    """STATS over a connection from this process's namespace."""
    with socket.create_connection((addr, port), timeout=timeout) as s:
        _hello(s, vm or PROBE_VM)
        status, body = _request(s, OP_STATS, 2)
        if status:
            raise errors.LabError('memory server refused STATS: status %d'
                                  % status)
        values = struct.unpack('<%dQ' % len(STATS_FIELDS),
                               body[:8 * len(STATS_FIELDS)])
        if not vm:
            _request(s, OP_DROP, 3)
        _request(s, OP_BYE, 4)
    return ' '.join(str(v) for v in values)
