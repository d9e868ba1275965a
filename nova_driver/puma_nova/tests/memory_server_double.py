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

"""Test double of QEMU's qemu-memory-server (not a memory server).

It only accepts the same command line (``--listen HOST:PORT --max-memory
SIZE``, optionally ``--object PROPS`` (repeated), ``--tls-creds ID`` and
``--tls-authz ID``, which it records in its output and otherwise
ignores), listens on the address
and accepts connections until SIGTERM, so tests can exercise how the Puma
driver runs and stops memory servers while the real daemon is not built.
``--fail`` makes it exit at once with an error, like a daemon that cannot
start. With ``NOTIFY_SOCKET`` it says ``READY=1`` and then ``WATCHDOG=1``
every half of ``WATCHDOG_USEC`` as the daemon does, unless
``MEMORY_SERVER_DOUBLE_SILENT`` is set (a daemon that does not speak the
protocol); each ``WATCHDOG=1`` comes with ``STATUS=`` and the text of
``MEMORY_SERVER_DOUBLE_STATUS`` (counters as the daemon says them), when
set.
"""

import argparse
import os
import signal
import socket
import sys
import time


def _notify(state):
    path = os.environ.get('NOTIFY_SOCKET')
    if not path or os.environ.get('MEMORY_SERVER_DOUBLE_SILENT'):
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        try:
            s.sendto(state.encode(), path)
        except OSError:
            pass


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument('--listen', required=True)
    parser.add_argument('--max-memory', required=True)
    parser.add_argument('--object', action='append', default=[])
    parser.add_argument('--tls-creds')
    parser.add_argument('--tls-authz')
    parser.add_argument('--insecure', action='store_true')
    parser.add_argument('--vm')
    parser.add_argument('--fail', action='store_true')
    args = parser.parse_args(argv)
    if args.fail:
        print('memory server double: asked to fail', file=sys.stderr)
        return 1
    host, _, port = args.listen.rpartition(':')
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(8)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    print('memory server double on %s, %s%s'
          % (args.listen, args.max_memory,
             ', TLS %s authz %s with %s' % (args.tls_creds, args.tls_authz,
                                            ' '.join(args.object))
             if args.tls_creds else ''), flush=True)
    print('memory server double serves vm %s%s'
          % (args.vm, ', insecure' if args.insecure else ''), flush=True)
    interval = int(os.environ.get('WATCHDOG_USEC', '0')) / 2e6 or None
    _notify('READY=1\nSTATUS=listening')
    last = 0
    sock.settimeout(interval)
    while True:
        if interval and time.monotonic() - last >= interval:
            status = os.environ.get('MEMORY_SERVER_DOUBLE_STATUS')
            _notify('WATCHDOG=1' + ('\nSTATUS=' + status if status else ''))
            last = time.monotonic()
        try:
            conn, _ = sock.accept()
        except socket.timeout:
            continue
        conn.close()


if __name__ == '__main__':
    sys.exit(main())
