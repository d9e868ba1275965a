#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A memory server that answers one GET with the reply to an older GET.

Runs in front of a real ``qemu-memory-server``: every connection accepted
on --listen is relayed to --to, byte for byte, while both directions are
parsed (docs/interop/memory-server.rst in the QEMU series: 16-byte
header, then the payload; a GET request is a batch of keys, its reply
the batch count, one ``present`` byte per key padded to 8, and the data
of the present pages).  Once --after GET replies went through on one
connection, the next GET whose keys differ from those of an earlier GET
that asked for as many pages, all of which were present, is answered
with that earlier reply, header and all (so with the earlier request's
sequence number), and the server's real reply is dropped.  This happens
once per run; later connections are relayed unchanged.  With --armed-by
SIGUSR1 the GETs are counted only from the first SIGUSR1 on, so that a
test can say when.

It is what a server out of step (one that answered twice, or mixed up
two clients' replies) or a replaying man in the middle on a plain
connection would send.  A client that takes replies by position, not by
sequence number, copies the data of the earlier pages into the ones it
asked for.  Each relayed connection and the one replay are logged on
stdout (``msreplay: ...``).
"""

import argparse
import os
import signal
import socket
import sys
import threading

# The wire format as the lab's own client speaks it (puma_lab.memserver).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from puma_lab.memserver import BATCH  # noqa: E402
from puma_lab.memserver import HEADER  # noqa: E402  magic op status seq len
from puma_lab.memserver import MAGIC  # noqa: E402
from puma_lab.memserver import OP_GET  # noqa: E402

done = threading.Event()
armed = threading.Event()
lock = threading.Lock()


def log(msg):
    with lock:
        print('msreplay: ' + msg, flush=True)


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_message(sock):
    """(header fields, raw bytes) of the next message, or None at EOF."""
    head = recv_exact(sock, HEADER.size)
    if head is None:
        return None
    fields = HEADER.unpack(head)
    payload = recv_exact(sock, fields[4]) if fields[4] else b''
    if payload is None:
        return None
    return fields, head + payload


class Connection:
    def __init__(self, client, server, args, number):
        self.client = client
        self.server = server
        self.args = args
        self.number = number
        self.keys = {}       # seq of a GET request -> its keys
        self.lock = threading.Lock()

    def requests(self):
        """Client to server: relayed, and the keys of each GET noted."""
        try:
            while True:
                msg = read_message(self.client)
                if msg is None:
                    break
                (_magic, op, _st, seq, length), raw = msg
                if op == OP_GET and length >= BATCH.size:
                    count = BATCH.unpack_from(raw, HEADER.size)[0]
                    keys = raw[HEADER.size + BATCH.size:
                               HEADER.size + BATCH.size + 8 * count]
                    with self.lock:
                        self.keys[seq] = keys
                self.server.sendall(raw)
        except OSError:
            pass
        self.close()

    def replies(self):
        """Server to client: relayed, but for the one replay."""
        gets = 0
        earlier = {}     # count -> (seq, keys, raw) of a full GET reply
        try:
            while True:
                msg = read_message(self.server)
                if msg is None:
                    break
                (magic, op, status, seq, length), raw = msg
                if magic != MAGIC or op != OP_GET or status or \
                        length < BATCH.size:
                    self.client.sendall(raw)
                    continue
                count = BATCH.unpack_from(raw, HEADER.size)[0]
                present = raw[HEADER.size + BATCH.size:
                              HEADER.size + BATCH.size + count]
                with self.lock:
                    keys = self.keys.pop(seq, None)
                if armed.is_set():
                    gets += 1
                old = earlier.get(count)
                if (gets > self.args.after and old and old[1] != keys and
                        not done.is_set()):
                    done.set()
                    self.client.sendall(old[2])
                    log('connection %d: answered GET seq %d (%d pages) '
                        'with the reply to GET seq %d'
                        % (self.number, seq, count, old[0]))
                    continue
                if keys is not None and present == b'\x01' * count:
                    earlier[count] = (seq, keys, raw)
                self.client.sendall(raw)
        except OSError:
            pass
        self.close()

    def close(self):
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def address(text):
    host, _, port = text.rpartition(':')
    return host, int(port)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--listen', required=True, type=address)
    ap.add_argument('--to', required=True, type=address)
    ap.add_argument('--after', type=int, default=50,
                    help='GET replies relayed on a connection before the '
                    'replay (default 50)')
    ap.add_argument('--armed-by', choices=['SIGUSR1'],
                    help='count GETs only once this signal came')
    args = ap.parse_args()
    if args.armed_by:
        signal.signal(signal.SIGUSR1, lambda *_: (armed.set(),
                                                  log('armed')))
    else:
        armed.set()
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(args.listen)
    lsock.listen(16)
    log('listening on %s:%d, relaying to %s:%d'
        % (args.listen + args.to))
    number = 0
    while True:
        client, peer = lsock.accept()
        number += 1
        try:
            server = socket.create_connection(args.to, timeout=10)
        except OSError as e:
            log('connection %d from %s: upstream refused: %s'
                % (number, peer[0], e))
            client.close()
            continue
        server.settimeout(None)
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        log('connection %d from %s:%d' % ((number,) + peer[:2]))
        conn = Connection(client, server, args, number)
        for fn in (conn.requests, conn.replies):
            threading.Thread(target=fn, daemon=True).start()


if __name__ == '__main__':
    sys.exit(main())
