# SPDX-License-Identifier: Apache-2.0
"""qemu-memory-server as the operator runs it (docs/split-migration.md).

``--listen`` may be repeated, SIGUSR1 prints the counters, SIGTERM ends
it cleanly.  The server runs on an emulated host; the clients speak the
protocol from inside that host's namespace (puma_lab.memserver).
"""

import os
import time

from puma_lab import host as host_mod
from puma_lab import memserver
from puma_lab import paths

PORT = 7800
LOCAL = '127.0.0.1:7801'
MAX_MB = 64
PAGES = {1: 0x11, 2: 0x22, 3: 0x33}


def server(lab, require):
    binary = paths.memory_server()
    require('the memory server', None if os.access(binary, os.X_OK) else
            'no memory server at %s' % binary)
    c = host_mod.Host(lab, 'c', libvirtd=False).start()
    return c, memserver.MemoryServer(c, PORT, max_mb=MAX_MB,
                                     also=[LOCAL]).start()


def test_every_listener_serves_one_store(lab, require):
    c, srv = server(lab, require)
    assert srv.listening() == ['%s:%d' % (c.addr, PORT), LOCAL]
    # Put through the host's address, fetched through loopback.
    memserver.put(c, c.addr, PORT, 'vm-a', PAGES)
    got = memserver.get(c, '127.0.0.1', 7801, 'vm-a', [1, 2, 3, 4])
    assert got == {1: 0x11, 2: 0x22, 3: 0x33, 4: None}
    # Another VM's namespace is another: same keys, nothing there.
    assert memserver.get(c, c.addr, PORT, 'vm-b', [1, 2, 3]) == {
        1: None, 2: None, 3: None}
    via_host = srv.stats()
    via_lo = memserver.stats(c, 7801, addr='127.0.0.1')
    for field in ('total_pages', 'limit_pages', 'puts', 'gets'):
        assert via_host[field] == via_lo[field], (via_host, via_lo)
    assert via_host['total_pages'] == len(PAGES)
    assert srv.stop() == 0


def test_sigusr1_prints_the_counters(lab, require):
    c, srv = server(lab, require)
    memserver.put(c, c.addr, PORT, 'vm-a', PAGES)
    memserver.get(c, '127.0.0.1', 7801, 'vm-a', [1, 2, 3, 4])
    want = {'namespaces': 1, 'pages': len(PAGES),
            'limit': MAX_MB * 1024 * 1024 // memserver.PAGE_SIZE,
            'puts': len(PAGES), 'gets': 4, 'discards': 0, 'errors': 0,
            'connections': 0}
    # The server closes a connection after its BYE reply: wait for it.
    deadline = time.monotonic() + 30
    line = srv.signal_stats()
    while line != want and time.monotonic() < deadline:
        time.sleep(0.5)
        line = srv.signal_stats()
    assert line == want, line
    # The same figures as STATS (whose probe is one more connection and
    # namespace while it asks), and the server goes on serving.
    st = srv.stats()
    assert (st['total_pages'], st['limit_pages'], st['puts'], st['gets'],
            st['discards'], st['errors']) == (
        want['pages'], want['limit'], want['puts'], want['gets'], 0, 0), st
    assert srv.alive()
    assert srv.stop() == 0
    assert 'memory-server: shutting down' in srv.output()
