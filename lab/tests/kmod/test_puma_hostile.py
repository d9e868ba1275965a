# SPDX-License-Identifier: Apache-2.0
"""A hostile peer cannot hurt a Puma lender (real guests, both kernels).

puma_hostile.py runs on the host, in the lab's network namespace, and
sends malformed, truncated, oversized, out-of-phase, replayed and
unauthenticated messages to a lender guest.  Each connection must be closed
with its reason in the kernel log and counted; a well-formed exchange on a
new connection must still work; the module must unload cleanly.
"""

import os
import sys

import pytest

from puma_lab import netns
from puma_lab import paths
from puma_lab import vm

import test_puma

HOSTILE = os.path.join(os.path.dirname(__file__), 'puma_hostile.py')
# case -> reason the lender must log
CASES = {
    'bad_magic': 'bad magic',
    'oversized': 'bad length',
    'wrong_phase': 'message not allowed in this phase',
    'bad_auth': 'authentication failed',
    'replayed_handshake': 'authentication failed',
    'replayed_seq': 'out-of-order or replayed sequence number',
    'truncated': 'connection error',
    'zero_count': 'bad batch count',
    'count_mismatch': 'bad length',
    'wrong_role': 'message not allowed for this role',
    'reserved_bits': 'reserved field not zero',
}


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_hostile_peer_is_disconnected(lab, kernel):
    share = test_puma.share_with_module(lab, kernel)
    lender = vm.Guest(lab, 'lend', kernel=kernel, mem_mb=512, nics=1,
                      share=share).start().wait_booted()
    lender.run('insmod /mnt/host/puma.ko')
    lender.run('/mnt/host/pumactl key %s' % test_puma.KEY)
    lender.run('/mnt/host/pumactl role lender')
    netns.set_addr(lab.ns, 'br0', '10.77.0.250/24')
    ip = lender.addrs[0].split('/')[0]

    def hostile(case):
        return netns.run(sys.executable, HOSTILE, ip, str(test_puma.PORT),
                         test_puma.KEY, case, ns=lab.ns, timeout=120)

    for case, reason in CASES.items():
        before = lender.run('dmesg').out.count('disconnected: ' + reason)
        hostile(case)
        for _ in range(40):
            log = lender.run('dmesg').out
            if log.count('disconnected: ' + reason) > before:
                break
            lender.run('sleep 0.5')
        else:
            raise AssertionError('%s: no "%s" in the lender log:\n%s'
                                 % (case, reason, log[-3000:]))
    st = test_puma.stats(lender)
    assert st['disconnects'] >= len(CASES), st
    assert st['disconnect_authentication_failed'] >= 2, st
    # Still serving: a well-formed put and get on a new connection.
    hostile('valid')
    st = test_puma.stats(lender)
    assert st['lend_puts'] >= 1 and st['lend_hits'] >= 1, st
    # A borrower's pages die with its connection.
    test_puma.wait_for(lender, '/mnt/host/pumactl stats hosted_pages | '
                       'grep -qx 0', 'pages freed with the connection')
    # Capacity per borrower.
    lender.run('/mnt/host/pumactl set capacity_pages 2')
    hostile('capacity')
    assert test_puma.stats(lender)['lend_drop_capacity'] == 1
    lender.run('rmmod puma')
    test_puma.check_dmesg(lender)
