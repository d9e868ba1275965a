# SPDX-License-Identifier: Apache-2.0
"""Write a seed corpus of valid Puma message streams for the fuzzer.

Protocol version 2: after HELLO and AUTH, each message is followed by a
16-byte tag (zeros here: the harness does not verify tags).
"""

import os
import struct
import sys

MAGIC = 0x414d5550
VERSION = 2
# The message tag the fuzz target skips (it checks no HMAC).
TAG = bytes(16)
# A sealed page: 4096 bytes of ciphertext and its 16-byte AES-GCM tag
# (PUMA_BLOB_BYTES in proto.h).
BLOB = 4096 + 16


def msg(t, seq, payload, flags=0, req=0):
    """One message; those after the handshake (seq >= 2) carry a tag."""
    return struct.pack('<IHHIIQ', MAGIC, t, flags, len(payload), seq,
                       req) + payload + (TAG if seq >= 2 else b'')


def hello(role):
    return struct.pack('<IHHHH', MAGIC, VERSION, VERSION, role, 0) + bytes(32)


def key(i):
    return struct.pack('<QQIIQ', 7, 12, 3, 0, i)


def main(out):
    os.makedirs(out, exist_ok=True)
    hs = msg(1, 0, hello(1)) + msg(2, 1, bytes(32))
    put = struct.pack('<II', 2, 0) + key(1) + bytes(BLOB) + key(2) + \
        bytes(BLOB)
    get = struct.pack('<II', 2, 0) + key(1) + key(2)
    inval = struct.pack('<QQIIQQ', 7, 12, 3, 0, 0, 9)
    # Receiver is a lender (first byte odd): borrower messages.
    seeds = {
        'lender_put_get': b'\x01' + hs + msg(3, 2, put) + msg(4, 3, get, 1),
        'lender_inval': b'\x01' + hs + msg(6, 2, inval) + msg(9, 3, b''),
    }
    hs_l = msg(1, 0, hello(2)) + msg(2, 1, bytes(32))
    reply = struct.pack('<II', 2, 1) + key(1) + key(2) + bytes(BLOB)
    seeds['borrower_reply'] = b'\x00' + hs_l + msg(5, 2, reply, req=1) + \
        msg(7, 3, b'') + msg(8, 4, b'') + msg(10, 5, b'', req=1)
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main(sys.argv[1])
