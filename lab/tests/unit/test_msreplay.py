# SPDX-License-Identifier: Apache-2.0
"""lab/inject/msreplay.py replays exactly one older GET reply.

The relay runs on loopback in front of a small stand-in for the memory
server (it answers each GET with pages whose bytes name the key); the
client here is a stand-in for QEMU.  The lab test that uses the relay
(test_split.py, test_reply_to_an_older_get_is_refused) relies on what
this checks: nothing changes before the relay is armed, then one GET is
answered with the reply to an earlier GET of as many pages (its header
and sequence number too), and everything after is relayed unchanged,
on later connections too.
"""

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from puma_lab.memserver import HEADER
from puma_lab.memserver import MAGIC
from puma_lab.memserver import OP_GET
from puma_lab.memserver import PAGE_SIZE as PAGE
from puma_lab import paths

SCRIPT = os.path.join(paths.TOP, 'lab', 'inject', 'msreplay.py')


def recv_exact(sock, n):
    buf = b''
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, 'connection closed'
        buf += chunk
    return buf


def page_of(key):
    return struct.pack('<Q', key) * (PAGE // 8)


def serve(lsock):
    """Answer GETs with every page present, its bytes its key; PUTs OK."""
    while True:
        try:
            conn, _ = lsock.accept()
        except OSError:
            return
        threading.Thread(target=answer, args=(conn,), daemon=True).start()


def answer(conn):
    try:
        while True:
            head = conn.recv(HEADER.size, socket.MSG_WAITALL)
            if len(head) < HEADER.size:
                return
            _magic, op, _st, seq, length = HEADER.unpack(head)
            payload = recv_exact(conn, length) if length else b''
            body = b''
            if op == OP_GET:
                count = struct.unpack_from('<I', payload)[0]
                keys = struct.unpack_from('<%dQ' % count, payload, 8)
                present = b'\x01' * count + b'\x00' * (-count % 8)
                body = (struct.pack('<II', count, 0) + present +
                        b''.join(page_of(k) for k in keys))
            conn.sendall(HEADER.pack(MAGIC, op, 0, seq, len(body)) + body)
    except OSError:
        pass


def get(sock, seq, keys):
    payload = struct.pack('<II', len(keys), 0) + \
        struct.pack('<%dQ' % len(keys), *keys)
    sock.sendall(HEADER.pack(MAGIC, OP_GET, 0, seq, len(payload)) + payload)
    _magic, op, status, rseq, length = HEADER.unpack(
        recv_exact(sock, HEADER.size))
    body = recv_exact(sock, length)
    count = struct.unpack_from('<I', body)[0]
    off = 8 + count + (-count % 8)
    pages = [body[off + i * PAGE:off + (i + 1) * PAGE] for i in range(count)]
    return op, status, rseq, pages


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def relay():
    upstream = socket.socket()
    upstream.bind(('127.0.0.1', 0))
    upstream.listen(4)
    threading.Thread(target=serve, args=(upstream,), daemon=True).start()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, '--listen', '127.0.0.1:%d' % port,
         '--to', '127.0.0.1:%d' % upstream.getsockname()[1],
         '--after', '2', '--armed-by', 'SIGUSR1'],
        stdout=subprocess.PIPE, text=True)
    assert 'listening on' in proc.stdout.readline()
    yield proc, port
    proc.kill()
    proc.wait()
    upstream.close()


def connect(port):
    deadline = time.monotonic() + 10
    while True:
        try:
            return socket.create_connection(('127.0.0.1', port), timeout=10)
        except ConnectionRefusedError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_one_older_reply_after_arming(relay):
    proc, port = relay
    c = connect(port)
    assert 'connection 1' in proc.stdout.readline()
    # Not armed: any number of GETs, each answered with its own pages.
    for seq in range(1, 6):
        keys = [seq * 100 + i for i in range(4)]
        assert get(c, seq, keys) == (OP_GET, 0, seq,
                                     [page_of(k) for k in keys])
    proc.send_signal(signal.SIGUSR1)
    assert proc.stdout.readline().strip() == 'msreplay: armed'
    # Two GETs counted, then the third of four pages gets the reply to
    # the last full GET of four pages before it: seq 7's.
    for seq in (6, 7):
        keys = [seq * 100 + i for i in range(4)]
        assert get(c, seq, keys)[2:] == (seq, [page_of(k) for k in keys])
    op, status, rseq, pages = get(c, 8, [800, 801, 802, 803])
    assert (op, status, rseq) == (OP_GET, 0, 7)
    assert pages == [page_of(700 + i) for i in range(4)]
    assert proc.stdout.readline().strip() == (
        'msreplay: connection 1: answered GET seq 8 (4 pages) with the '
        'reply to GET seq 7')
    # Once only: the server's real reply to seq 8 was dropped, and what
    # follows, here and on a new connection, is relayed unchanged.
    keys = [900, 901, 902, 903]
    assert get(c, 9, keys)[2:] == (9, [page_of(k) for k in keys])
    c2 = connect(port)
    for seq in range(1, 5):
        keys = [5000 + seq * 10 + i for i in range(4)]
        assert get(c2, seq, keys)[2:] == (seq, [page_of(k) for k in keys])
    c.close()
    c2.close()
