# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The receiving end of the service manager notification protocol.

A process started with ``NOTIFY_SOCKET`` naming a Unix datagram socket
sends it newline-separated ``KEY=VALUE`` assignments: ``READY=1`` once it
serves, ``WATCHDOG=1`` every half of ``WATCHDOG_USEC`` from its main loop
(systemd's protocol, sd_notify(3), which qemu-memory-server speaks, so
that nova-compute and a systemd unit with ``WatchdogSec=`` supervise it
alike). As systemd's ``NotifyAccess=main`` does, the receiver reads each
sender's pid from the kernel (SO_PASSCRED) instead of trusting the text,
and when it was sent from the kernel too (SO_TIMESTAMPNS): the receiver
reads what waits in the socket now and then, and a message that waited
is as old as it is, not as old as the read.
"""

import collections
import os
import socket
import struct

# struct sockaddr_un's sun_path holds 108 bytes with the final NUL.
MAX_PATH_BYTES = 107
_UCRED = struct.Struct('iII')    # struct ucred: pid, uid, gid
# SO_TIMESTAMPNS (asm-generic/socket.h; Python does not name it): the
# kernel stamps each datagram with the CLOCK_REALTIME of its sending
# (unix_dgram_sendmsg) and gives it as SCM_TIMESTAMPNS, a struct timespec.
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct('qq')
_MAX_MESSAGE = 4096

# SENT: when the kernel queued it (time.time()'s clock), or None.
Message = collections.namedtuple('Message', 'pid fields sent')


def parse(data):
    """{KEY: VALUE} of one message; lines without '=' are ignored."""
    fields = {}
    for line in data.decode('utf-8', 'replace').splitlines():
        key, sep, value = line.partition('=')
        if sep:
            fields[key] = value
    return fields


class NotifySocket(object):
    """A socket bound at PATH (replacing what was there) for one sender."""

    def __init__(self, path):
        if len(os.fsencode(path)) > MAX_PATH_BYTES:
            raise ValueError('notify socket path %r is longer than %d bytes'
                             % (path, MAX_PATH_BYTES))
        self.path = path
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self._sock = socket.socket(
            socket.AF_UNIX,
            socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            self._sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            self._sock.bind(path)
            os.chmod(path, 0o600)
        except OSError:
            self._sock.close()
            raise

    def receive(self):
        """Every message waiting, as Message(pid, {KEY: VALUE}, sent).

        The pid is None when the kernel gave no credentials, sent None
        when it gave no timestamp.
        """
        messages = []
        while True:
            try:
                data, ancdata, _flags, _addr = self._sock.recvmsg(
                    _MAX_MESSAGE, socket.CMSG_SPACE(_UCRED.size) +
                    socket.CMSG_SPACE(_TIMESPEC.size))
            except (BlockingIOError, InterruptedError):
                return messages
            pid = sent = None
            for level, kind, cmsg in ancdata:
                if level != socket.SOL_SOCKET:
                    continue
                if (kind == socket.SCM_CREDENTIALS and
                        len(cmsg) >= _UCRED.size):
                    pid = _UCRED.unpack_from(cmsg)[0]
                elif (kind == _SO_TIMESTAMPNS and
                        len(cmsg) >= _TIMESPEC.size):
                    sec, nsec = _TIMESPEC.unpack_from(cmsg)
                    sent = sec + nsec / 1e9
            messages.append(Message(pid, parse(data), sent))

    def close(self):
        """Close the socket and remove its path."""
        self._sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
