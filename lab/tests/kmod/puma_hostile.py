# SPDX-License-Identifier: Apache-2.0
"""A hostile Puma peer: sends one kind of bad input to a lender.

Usage: puma_hostile.py HOST PORT KEY CASE; prints "ok" or raises.  Run in
the lab's network namespace by test_puma_hostile.py; the lender must log
the reason and close the connection, and survive.

puma_hostile.py --lender PORT KEY DELAY is a lender that never answers a
GET: it takes a borrower's puts (and forgets them), and DELAY seconds
after the first GET of a connection it closes that connection, with the
borrower's gets still pending.  One line per connection on stdout.

puma_hostile.py --store PORT KEY MODE DUMP is a lender that keeps what it
is given and answers gets (non-inclusive: a get removes nothing), but in
its own way (MODE):
  honest  keeps the latest blob of each key, drops what INVALs name
  flip    the same, but flips one byte of each blob it returns
  swap    answers a get of page i with the blob of page i ^ 1 of the
          same file, when it has one
  replay  keeps the first blob of each key for good: later puts and
          INVALs are ignored, a get returns the oldest copy
Every blob it receives is appended to the file DUMP (what a curious
lender could read).  One line per connection on stdout.  The blob size
is taken from the puts, so it serves any version of the module.
"""

import hashlib
import hmac
import os
import socket
import struct
import sys
import time

MAGIC = 0x414d5550
HELLO, AUTH, PUT, GET, GET_REPLY, INVAL, SUSPEND, RESUME, PING, PONG = \
    range(1, 11)
BORROWER, LENDER = 1, 2
HDR = struct.Struct('<IHHIIQ')
KEY = struct.Struct('<QQIIQ')
# A sealed page as a borrower puts it: ciphertext and tag (proto.h).
BLOB = 4096 + 16


class Peer:
    def __init__(self, host, port):
        self.s = socket.create_connection((host, port), timeout=20)
        self.seq = 0

    def send(self, t, payload=b'', flags=0, req=0, seq=None, magic=MAGIC,
             length=None):
        seq = self.seq if seq is None else seq
        self.s.sendall(HDR.pack(magic, t, flags,
                                len(payload) if length is None else length,
                                seq, req) + payload)
        self.seq += 1

    def recv_exact(self, n):
        buf = b''
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise EOFError('closed after %d of %d bytes' % (len(buf), n))
            buf += chunk
        return buf

    def recv(self):
        magic, t, flags, length, seq, req = HDR.unpack(self.recv_exact(24))
        assert magic == MAGIC
        return t, req, self.recv_exact(length)

    def closed_by_peer(self):
        """True once the lender closed the connection."""
        try:
            while True:
                if not self.s.recv(65536):
                    return True
        except (ConnectionResetError, socket.timeout):
            return False

    def hello(self):
        nonce = os.urandom(16)
        self.send(HELLO, struct.pack('<IHHHH', MAGIC, 1, 1, BORROWER, 0) +
                  nonce + b'hostile'.ljust(16, b'\0'))
        t, _, p = self.recv()
        assert t == HELLO
        return nonce, p[12:28]

    def handshake(self, key):
        mine, theirs = self.hello()
        mac = hmac.new(key, b'puma1-borrower' + mine + theirs,
                       hashlib.sha256).digest()
        self.send(AUTH, mac)
        t, _, p = self.recv()
        assert t == AUTH
        want = hmac.new(key, b'puma1-lender' + theirs + mine,
                        hashlib.sha256).digest()
        assert hmac.compare_digest(p, want), 'lender proof wrong'


def key(index):
    return struct.pack('<QQIIQ', 1, 2, 3, 0, index)


def batch(count, hits=0):
    return struct.pack('<II', count, hits)


def run(host, port, secret, case):
    p = Peer(host, port)
    if case == 'bad_magic':
        p.send(HELLO, bytes(44), magic=0xdeadbeef)
    elif case == 'oversized':
        p.send(HELLO, b'', length=1 << 30)
    elif case == 'wrong_phase':
        p.send(PUT, batch(1) + key(0))
    elif case == 'bad_auth':
        p.hello()
        p.send(AUTH, bytes(32))
    elif case == 'replayed_handshake':
        # A recorded, valid opening replayed on a new connection: the
        # lender's fresh nonce makes the recorded proof worthless.
        rec = Peer(host, port)
        mine, theirs = rec.hello()
        mac = hmac.new(secret, b'puma1-borrower' + mine + theirs,
                       hashlib.sha256).digest()
        rec.s.close()
        p.send(HELLO, struct.pack('<IHHHH', MAGIC, 1, 1, BORROWER, 0) +
               mine + bytes(16))
        p.recv()
        p.send(AUTH, mac)
    else:
        p.handshake(secret)
        if case == 'replayed_seq':
            p.send(PING, req=1)
            assert p.recv()[0] == PONG
            p.send(PING, req=2, seq=p.seq - 1)
        elif case == 'truncated':
            p.s.sendall(HDR.pack(MAGIC, PUT, 0, 8 + 32 + BLOB, p.seq, 0) +
                        batch(1) + key(0) + bytes(100))
            p.s.shutdown(socket.SHUT_WR)
        elif case == 'zero_count':
            p.send(PUT, batch(0) + key(0))
        elif case == 'count_mismatch':
            p.send(PUT, batch(2) + key(0) + bytes(BLOB))
        elif case == 'wrong_role':
            p.send(GET_REPLY, batch(1) + key(0))
        elif case == 'reserved_bits':
            p.send(GET, batch(1) + key(0), flags=0x80)
        elif case == 'valid':
            page = os.urandom(BLOB)
            p.send(PUT, batch(1) + key(7) + page)
            p.send(GET, batch(2) + key(7) + key(8), req=42)
            t, req, r = p.recv()
            assert (t, req) == (GET_REPLY, 42), (t, req)
            count, hits = struct.unpack('<II', r[:8])
            assert (count, hits) == (2, 1), (count, hits)
            assert r[8:8 + 64] == key(7) + key(8)
            assert r[72:] == page, 'lender returned other data'
            p.s.close()
            return 'ok'
        elif case == 'capacity':
            # The lender was set to host 2 pages per borrower.
            pages = [os.urandom(BLOB) for _ in range(3)]
            p.send(PUT, batch(3) + b''.join(key(20 + i) + pages[i]
                                            for i in range(3)))
            p.send(GET, batch(3) + key(20) + key(21) + key(22), req=7)
            t, req, r = p.recv()
            count, hits = struct.unpack('<II', r[:8])
            assert (t, req, count, hits) == (GET_REPLY, 7, 3, 0b011), \
                (t, req, count, hits)
            assert r[8 + 96:] == pages[0] + pages[1]
            p.s.close()
            return 'ok'
        else:
            raise SystemExit('unknown case ' + case)
    assert p.closed_by_peer(), 'lender kept the connection open'
    return 'ok'


def lender_handshake(c, secret):
    """The lender's side of the handshake on the accepted socket C."""
    p = Peer.__new__(Peer)
    p.s, p.seq = c, 0
    nonce = os.urandom(16)
    p.send(HELLO, struct.pack('<IHHHH', MAGIC, 1, 1, LENDER, 0) +
           nonce + b'hostile'.ljust(16, b'\0'))
    t, _, hello = p.recv()
    assert t == HELLO, t
    theirs = hello[12:28]
    p.send(AUTH, hmac.new(secret, b'puma1-lender' + nonce + theirs,
                          hashlib.sha256).digest())
    t, _, _ = p.recv()
    assert t == AUTH, t
    return p


def serve_lender(port, secret, delay):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('0.0.0.0', port))
    ls.listen(4)
    n = 0
    while True:
        c, addr = ls.accept()
        n += 1
        puts = gets = 0
        try:
            p = lender_handshake(c, secret)
            while True:
                t, _, body = p.recv()
                if t == PUT:
                    puts += struct.unpack('<I', body[:4])[0]
                elif t == GET:
                    gets += 1
                    break
            time.sleep(delay)
        except (EOFError, OSError, AssertionError) as e:
            print('connection %d: %r' % (n, e), flush=True)
        c.close()
        print('connection %d closed: %d puts, %d gets' % (n, puts, gets),
              flush=True)


class Store:
    """What a storing lender holds: blob by key, in its own MODE."""

    def __init__(self, mode, dump):
        self.mode = mode
        self.dump = dump
        self.blobs = {}
        self.stats = dict.fromkeys(('puts', 'gets', 'hits', 'tampered',
                                    'invals'), 0)

    def put(self, body):
        count = struct.unpack('<I', body[:4])[0]
        item = (len(body) - 8) // count
        for i in range(count):
            rec = body[8 + i * item:8 + (i + 1) * item]
            k, blob = KEY.unpack(rec[:KEY.size]), rec[KEY.size:]
            self.dump.write(blob)
            self.stats['puts'] += 1
            if self.mode == 'replay' and k in self.blobs:
                continue
            self.blobs[k] = blob

    def inval(self, body):
        pool, ino, gen, kind, start, end = struct.unpack('<QQIIQQ', body)
        self.stats['invals'] += 1
        if self.mode == 'replay':
            return
        for k in list(self.blobs):
            if k[0] != pool:
                continue
            if kind == 2 or (k[1:3] == (ino, gen) and
                             (kind == 1 or start <= k[4] <= end)):
                del self.blobs[k]

    def get(self, body):
        count = struct.unpack('<I', body[:4])[0]
        keys = body[8:8 + count * KEY.size]
        hits, data = 0, b''
        for i in range(count):
            k = KEY.unpack(keys[i * KEY.size:(i + 1) * KEY.size])
            self.stats['gets'] += 1
            blob = self.blobs.get(k)
            if blob is None:
                continue
            if self.mode == 'flip':
                blob = blob[:100] + bytes([blob[100] ^ 0x01]) + blob[101:]
                self.stats['tampered'] += 1
            elif self.mode == 'swap':
                other = self.blobs.get(k[:4] + (k[4] ^ 1,))
                if other is not None:
                    blob = other
                    self.stats['tampered'] += 1
            hits |= 1 << i
            data += blob
            self.stats['hits'] += 1
        return batch(count, hits) + keys + data


def serve_store(port, secret, mode, dump_path):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('0.0.0.0', port))
    ls.listen(4)
    n = 0
    with open(dump_path, 'wb') as dump:
        while True:
            c, addr = ls.accept()
            n += 1
            store = Store(mode, dump)
            try:
                p = lender_handshake(c, secret)
                print('connection %d: %s lender ready' % (n, mode),
                      flush=True)
                while True:
                    t, req, body = p.recv()
                    if t == PUT:
                        store.put(body)
                        dump.flush()
                    elif t == INVAL:
                        store.inval(body)
                    elif t == GET:
                        p.send(GET_REPLY, store.get(body), req=req)
                    elif t == PING:
                        p.send(PONG, req=req)
            except (EOFError, OSError, AssertionError) as e:
                print('connection %d: %r' % (n, e), flush=True)
            c.close()
            print('connection %d closed: %r' % (n, store.stats), flush=True)


if __name__ == '__main__':
    if sys.argv[1] == '--lender':
        serve_lender(int(sys.argv[2]), sys.argv[3].encode(),
                     float(sys.argv[4]))
    if sys.argv[1] == '--store':
        serve_store(int(sys.argv[2]), sys.argv[3].encode(), sys.argv[4],
                    sys.argv[5])
    print(run(sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(),
              sys.argv[4]))
