# SPDX-License-Identifier: Apache-2.0
"""A hostile Puma peer: sends one kind of bad input to a lender.

Usage: puma_hostile.py HOST PORT KEY CASE; prints "ok" or raises.  Run in
the lab's network namespace by test_puma_hostile.py; the lender must log
the reason and close the connection, and survive.  It speaks protocol
version 2 (docs/puma-protocol.md): the borrower proves first, then each
message after the handshake carries a tag under a per-direction key,
and a page travels as a sealed blob of 4096 + 16 bytes.

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
lender could read).  One line per connection on stdout.  Both lenders
speak version 2 as a lender does (the borrower proves first, tags on
every message).  The blob size is taken from the puts.
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
VERSION = 2
HDR = struct.Struct('<IHHIIQ')
TAG_LEN = 16
KEY = struct.Struct('<QQIIQ')
# A sealed page as a borrower puts it: ciphertext and its AES-GCM tag
# (PUMA_BLOB_BYTES in proto.h); the lender stores it as it is.
BLOB = 4096 + 16
# The lender's limits (module parameters handshake_timeout_ms, preauth_max).
HANDSHAKE_TIMEOUT = 5.0
PREAUTH_MAX = 4


def mac(k, *parts):
    return hmac.new(k, b''.join(parts), hashlib.sha256).digest()


def hello_payload(role, nonce, versions=(VERSION, VERSION)):
    return (struct.pack('<IHHHH', MAGIC, versions[0], versions[1], role, 0) +
            nonce + b'hostile'.ljust(16, b'\0'))


def session_keys(secret, hello_b, hello_l):
    """(borrower->lender, lender->borrower) keys: HKDF-SHA256."""
    prk = mac(hello_b[12:28] + hello_l[12:28], secret)
    return (mac(prk, b'puma2 borrower->lender\x01'),
            mac(prk, b'puma2 lender->borrower\x01'))


class Peer:
    def __init__(self, host, port):
        self.s = socket.create_connection((host, port), timeout=20)
        self.seq = 0
        self.rseq = 0
        self.tx = self.rx = None    # session keys, once authenticated

    def send(self, t, payload=b'', flags=0, req=0, seq=None, magic=MAGIC,
             length=None, tag=None):
        """Send a message; TAG: what to send instead of the right tag."""
        seq = self.seq if seq is None else seq
        msg = HDR.pack(magic, t, flags,
                       len(payload) if length is None else length,
                       seq, req) + payload
        if self.tx and tag is None:
            tag = mac(self.tx, struct.pack('<Q', seq), msg)[:TAG_LEN]
        self.s.sendall(msg + (tag or b''))
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
        hdr = self.recv_exact(24)
        magic, t, flags, length, seq, req = HDR.unpack(hdr)
        assert magic == MAGIC
        assert seq == self.rseq & 0xffffffff, (seq, self.rseq)
        payload = self.recv_exact(length)
        if self.rx:
            tag = self.recv_exact(TAG_LEN)
            want = mac(self.rx, struct.pack('<Q', self.rseq), hdr,
                       payload)[:TAG_LEN]
            assert hmac.compare_digest(tag, want), 'bad tag from lender'
        self.rseq += 1
        return t, req, payload

    def closed_by_peer(self):
        """True once the lender closed the connection."""
        try:
            while True:
                if not self.s.recv(65536):
                    return True
        except (ConnectionResetError, socket.timeout):
            return False

    def received_after_close(self):
        """Every byte the lender still sends until it closes."""
        got = b''
        while True:
            chunk = self.s.recv(65536)
            if not chunk:
                return got
            got += chunk

    def hello(self, versions=(VERSION, VERSION), mine=None):
        """Send our HELLO; return (our HELLO, the lender's) payloads."""
        mine = mine or hello_payload(BORROWER, os.urandom(16), versions)
        self.send(HELLO, mine)
        t, _, p = self.recv()
        assert t == HELLO
        return mine, p

    def handshake(self, key):
        mine, theirs = self.hello()
        self.send(AUTH, mac(key, b'puma2-borrower', mine, theirs))
        t, _, p = self.recv()
        assert t == AUTH
        want = mac(key, b'puma2-lender', mine, theirs)
        assert hmac.compare_digest(p, want), 'lender proof wrong'
        self.tx, self.rx = session_keys(key, mine, theirs)


# Files a hash-flooding borrower puts (one page each).
FLOOD_FILES = 2048


def key(index):
    return struct.pack('<QQIIQ', 1, 2, 3, 0, index)


def batch(count, hits=0):
    return struct.pack('<II', count, hits)


def silent_on_bad_auth(host, port):
    """A wrong AUTH gets nothing back but the close: no keyed answer.

    Our HELLO offers versions 1 to 2, so that a version 1 lender (which
    answered with its own AUTH before checking ours) is caught too.
    """
    p = Peer(host, port)
    p.hello(versions=(1, VERSION))
    p.send(AUTH, bytes(32))
    try:
        extra = p.received_after_close()
    except ConnectionResetError:
        extra = b''
    assert extra == b'', ('lender sent %d bytes after its HELLO to a '
                          'client with a wrong AUTH: %s'
                          % (len(extra), extra[:64].hex()))
    return 'ok'


def slow_handshake(host, port):
    """A client trickles its handshake a byte at a time: cut off in time.

    One byte every 0.25 s of a HELLO and an AUTH (124 bytes, 31 s); the
    lender must close the connection handshake_timeout_ms after it
    accepted it, whatever trickles in meanwhile.
    """
    s = socket.create_connection((host, port), timeout=20)
    t0 = time.monotonic()
    data = (HDR.pack(MAGIC, HELLO, 0, 44, 0, 0) +
            hello_payload(BORROWER, os.urandom(16), (1, VERSION)) +
            HDR.pack(MAGIC, AUTH, 0, 32, 1, 0) + bytes(32))
    s.settimeout(0.25)
    closed = False
    for i in range(len(data)):
        try:
            s.sendall(data[i:i + 1])
            while True:
                if not s.recv(4096):
                    closed = True
                    break
        except socket.timeout:
            pass
        except OSError:
            closed = True
        if closed:
            break
    took = time.monotonic() - t0
    assert closed, 'lender kept a trickling handshake open for %.1f s' % took
    assert took < HANDSHAKE_TIMEOUT + 2.5, \
        'lender closed a trickling handshake only after %.1f s' % took
    return 'ok'


def preauth_flood(host, port, secret, flood=40):
    """FLOOD connections that stop after HELLO; a borrower still gets in.

    FLOOD is more than the lender's 31 peer slots.  Each sends a valid
    HELLO (versions 1 to 2, which a version 1 lender takes too) and then
    nothing.  A borrower with the key must then finish a
    handshake and a put and get at once; the flood connections must all
    be closed by the lender, the older ones evicted at once to keep at
    most PREAUTH_MAX in the handshake, the rest within the handshake
    timeout.
    """
    held = []
    for _ in range(flood):
        c = Peer(host, port)
        c.send(HELLO, hello_payload(BORROWER, os.urandom(16), (1, VERSION)))
        held.append(c)
    t_last = time.monotonic()
    try:
        valid(Peer(host, port), secret)
    except (EOFError, ConnectionResetError) as e:
        raise AssertionError('the lender closed a borrower with the key '
                             'after %d unauthenticated connections: %s'
                             % (flood, e))
    # Evicted at once: all but the newest PREAUTH_MAX (the borrower's
    # handshake evicted one more).
    time.sleep(1)
    still = [c for c in held if not closed_now(c.s)]
    assert len(still) <= PREAUTH_MAX, \
        '%d of %d unauthenticated connections still open' % (len(still),
                                                             flood)
    # The rest time out (their accept may lag our connect on a busy host).
    while still and time.monotonic() < t_last + HANDSHAKE_TIMEOUT + 8:
        time.sleep(0.5)
        still = [c for c in still if not closed_now(c.s)]
    assert not still, '%d unauthenticated connections outlived the ' \
        'handshake timeout' % len(still)
    for c in held:
        c.s.close()
    return 'ok'


def closed_now(s):
    """True if the other side closed S (what it sent before is skipped)."""
    s.settimeout(0.05)
    try:
        while True:
            if not s.recv(65536):
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def valid(p, secret):
    """A borrower with the key: handshake, put, get; checks the reply."""
    p.handshake(secret)
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


def run(host, port, secret, case):
    if case == 'silent_on_bad_auth':
        return silent_on_bad_auth(host, port)
    if case == 'slow_handshake':
        return slow_handshake(host, port)
    if case == 'preauth_flood':
        return preauth_flood(host, port, secret)
    p = Peer(host, port)
    if case == 'valid':
        return valid(p, secret)
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
        proof = mac(secret, b'puma2-borrower', mine, theirs)
        rec.s.close()
        p.hello(mine=mine)
        p.send(AUTH, proof)
    elif case == 'wrong_key':
        # The lender has a key of its own for this borrower's address:
        # the default key no longer opens it.
        mine, theirs = p.hello()
        p.send(AUTH, mac(secret, b'puma2-borrower', mine, theirs))
    else:
        p.handshake(secret)
        if case == 'forged_tag':
            # A right message with a made-up tag.
            p.send(PING, req=1)
            assert p.recv()[0] == PONG
            p.send(PING, req=2, tag=os.urandom(TAG_LEN))
        elif case == 'tampered_payload':
            # A put changed on the way: its tag no longer matches.
            msg = HDR.pack(MAGIC, PUT, 0, 8 + 32 + BLOB, p.seq, 0) + \
                batch(1) + key(9) + os.urandom(BLOB)
            tag = mac(p.tx, struct.pack('<Q', p.seq), msg)[:TAG_LEN]
            msg = msg[:-1] + bytes([msg[-1] ^ 1])
            p.s.sendall(msg + tag)
        elif case == 'replayed_seq':
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
        elif case == 'hash_flood':
            # Files whose identities all hashed to one bucket of the
            # lender's unkeyed hash_64(session ^ pool ^ ino) before it
            # became SipHash with a key of its own (pool ^ ino == 0).
            for first in range(0, FLOOD_FILES, 32):
                files = range(first, first + 32)
                p.send(PUT, batch(32) + b''.join(
                    struct.pack('<QQIIQ', f, f, 0, 0, 0) + bytes(BLOB)
                    for f in files))
            # Answered after every put before it was stored.
            p.send(PING, req=1)
            assert p.recv()[0] == PONG
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
    p.s, p.seq, p.rseq, p.tx, p.rx = c, 0, 0, None, None
    mine = hello_payload(LENDER, os.urandom(16))
    p.send(HELLO, mine)
    t, _, theirs = p.recv()
    assert t == HELLO, t
    t, _, proof = p.recv()
    assert t == AUTH, t
    assert hmac.compare_digest(proof, mac(secret, b'puma2-borrower',
                                          theirs, mine)), 'borrower proof'
    p.send(AUTH, mac(secret, b'puma2-lender', theirs, mine))
    p.rx, p.tx = session_keys(secret, theirs, mine)
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
