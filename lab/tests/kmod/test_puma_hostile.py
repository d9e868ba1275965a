# SPDX-License-Identifier: Apache-2.0
"""A hostile peer cannot hurt a Puma lender (real guests, both kernels).

puma_hostile.py runs on the host, in the lab's network namespace, and
sends malformed, truncated, oversized, out-of-phase, replayed and
unauthenticated messages to a lender guest.  Each connection must be closed
with its reason in the kernel log and counted; a well-formed exchange on a
new connection must still work; the module must unload cleanly.

test_lender_gives_unauthenticated_peers_nothing checks what protocol
version 2 added (issue 18): a client with a wrong AUTH gets nothing keyed
back, a message with a wrong tag is refused, clients that never finish the
handshake neither lock a borrower out nor stay, a trickled handshake is
cut off in time, and a lender's key for one borrower is that pair's own.
"""

import hashlib
import os
import subprocess
import sys

import pytest

from puma_lab import kmod
from puma_lab import netns
from puma_lab import profile
from puma_lab import vm

import puma_hostile
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
# Issue 18 (protocol version 2): case -> reason the lender must log.
AUTH_CASES = {
    'silent_on_bad_auth': 'authentication failed',
    'forged_tag': 'bad message tag',
    'tampered_payload': 'bad message tag',
    'slow_handshake': 'handshake not finished in time',
    'preauth_flood': 'too many unauthenticated connections',
}
PAIR_KEY = 'lab-pair-key-for-10.77.0.250'
HOST_IP = '10.77.0.250'


def start_lender(lab, kernel):
    share = test_puma.share_with_module(lab, kernel)
    lender = vm.Guest(lab, 'lend', kernel=kernel, mem_mb=512, nics=1,
                      share=share).start().wait_booted()
    lender.run('insmod /mnt/host/puma.ko')
    lender.run('/mnt/host/pumactl key %s' % test_puma.KEY)
    lender.run('/mnt/host/pumactl role lender')
    netns.set_addr(lab.ns, 'br0', HOST_IP + '/24')
    return lender


def wait_reason(lender, reason, before, case):
    """Wait until the lender logged REASON once more than BEFORE times."""
    for _ in range(40):
        log = lender.run('dmesg').out
        if log.count('disconnected: ' + reason) > before:
            return
        lender.run('sleep 0.5')
    raise AssertionError('%s: no "%s" in the lender log:\n%s'
                         % (case, reason, log[-3000:]))


@pytest.mark.parametrize('kernel', profile.kernels('6.1'))
def test_hostile_peer_is_disconnected(lab, kernel):
    lender = start_lender(lab, kernel)
    ip = lender.addrs[0].split('/')[0]

    def hostile(case):
        return netns.run(sys.executable, HOSTILE, ip, str(test_puma.PORT),
                         test_puma.KEY, case, ns=lab.ns, timeout=120)

    for case, reason in CASES.items():
        before = lender.run('dmesg').out.count('disconnected: ' + reason)
        hostile(case)
        wait_reason(lender, reason, before, case)
    st = test_puma.stats(lender)
    assert st['disconnects'] >= len(CASES), st
    assert st['disconnect_authentication_failed'] >= 2, st
    # Still serving: a well-formed put and get on a new connection.
    hostile('valid')
    st = test_puma.stats(lender)
    assert st['lend_puts'] >= 1 and st['lend_hits'] >= 1, st
    # Files chosen to share one bucket of an unkeyed hash: with the
    # lender's keyed hash their 2048 entries spread over its 4096 buckets
    # (a handful per bucket at most; they all shared one before).
    before = st['lend_puts']
    hostile('hash_flood')
    st = test_puma.stats(lender)
    assert st['lend_puts'] - before == puma_hostile.FLOOD_FILES, st
    assert st['lend_max_chain'] <= 16, st
    # A borrower's pages die with its connection.
    test_puma.wait_for(lender, '/mnt/host/pumactl stats hosted_pages | '
                       'grep -qx 0', 'pages freed with the connection')
    # Capacity per borrower.
    lender.run('/mnt/host/pumactl set capacity_pages 2')
    hostile('capacity')
    assert test_puma.stats(lender)['lend_drop_capacity'] == 1
    lender.run('rmmod puma')
    test_puma.check_dmesg(lender)


@pytest.mark.parametrize('kernel', profile.kernels('6.12'))
def test_lender_gives_unauthenticated_peers_nothing(lab, kernel):
    """Issue 18: authentication first, tagged messages, pre-auth limits.

    Each case runs even if one before it failed, and the failures are
    reported together:
    - silent_on_bad_auth: after a wrong AUTH the lender sends nothing but
      the close (no HMAC of its own to test key guesses against);
    - forged_tag, tampered_payload: after a good handshake, a message
      whose tag is wrong closes the connection as "bad message tag";
    - slow_handshake: a handshake trickled a byte at a time is closed
      within the handshake timeout (5 s) of its start;
    - preauth_flood: 40 connections that stop after HELLO (more than the
      31 peer slots); a borrower with the key then gets in at once, the
      flood is evicted down to 4 and the rest is gone after the timeout;
    - per-pair key: with a key of its own for this host's address, the
      lender refuses the default key (wrong_key) and takes the pair's.
    """
    lender = start_lender(lab, kernel)
    ip = lender.addrs[0].split('/')[0]
    failures = {}

    def hostile(case, key=test_puma.KEY):
        return netns.run(sys.executable, HOSTILE, ip, str(test_puma.PORT),
                         key, case, ns=lab.ns, timeout=120)

    def attempt(name, reason, key=test_puma.KEY):
        try:
            before = lender.run('dmesg').out.count('disconnected: ' +
                                                   reason)
            hostile(name, key)
            wait_reason(lender, reason, before, name)
            print('%s: ok' % name)
        except Exception as e:
            failures[name] = '%s: %s' % (type(e).__name__, e)
            print('%s: FAILED: %s' % (name, failures[name]))

    for case, reason in AUTH_CASES.items():
        attempt(case, reason)
    try:
        lender.run('/mnt/host/pumactl borrower add %s %s'
                   % (HOST_IP, PAIR_KEY))
        assert lender.run('/mnt/host/pumactl borrowers').out.split() == \
            [HOST_IP]
        attempt('wrong_key', 'authentication failed')
        hostile('valid', PAIR_KEY)
        lender.run('/mnt/host/pumactl borrower del %s' % HOST_IP)
        hostile('valid')
        print('per-pair key: ok')
    except Exception as e:
        failures['per-pair key'] = '%s: %s' % (type(e).__name__, e)
        print('per-pair key: FAILED: %s' % failures['per-pair key'])
    st = test_puma.stats(lender)
    print({k: v for k, v in st.items() if k.startswith('disconnect')})
    assert not failures, '\n'.join('%s: %s' % kv for kv in failures.items())
    assert st['disconnect_bad_message_tag'] >= 2, st
    assert st['disconnect_too_many_unauthenticated_connections'] >= \
        40 - 4, st
    assert st['disconnect_handshake_not_finished_in_time'] >= 1, st
    lender.run('rmmod puma')
    test_puma.check_dmesg(lender)


# What the kernel prints for a use after free or a broken list, besides
# test_puma.BAD_DMESG.
CORRUPTION = ('Poison overwritten', 'list_del corruption',
              'list_add corruption', 'kernel BUG', 'BUG ')


@pytest.mark.parametrize('kernel', profile.kernels('6.1'))
def test_gets_time_out_while_lender_goes(lab, kernel, tmp_path):
    """Gets that time out while their connection is being torn down.

    A hostile lender takes the borrower's puts, never answers a get, and
    closes the connection 50 ms after the first one.  The module's
    fault_down_delay_ms makes puma_peer_down() wait 2 s before it fails
    each pending get, so every one of them times out meanwhile (timeout
    100 ms) and its reader goes on and frees the request.  The borrower
    boots with SLUB poisoning of kmalloc caches: a request touched after
    it was freed shows as a list corruption, a protection fault or
    overwritten poison in the kernel log.  Several rounds; every read
    returns the right data; the module unloads.
    """
    payload = tmp_path / 'payload'
    payload.mkdir()
    want = {}
    for i in range(4):
        blob = os.urandom(512 * 1024)
        (payload / ('f%d' % i)).write_bytes(blob)
        want['/mnt/data/f%d' % i] = hashlib.sha256(blob).hexdigest()
    disk = vm.make_data_disk(lab.path('data.img'), 64, str(payload))
    share = test_puma.share_with_module(lab, kernel)
    borrower = vm.Guest(lab, 'borr', kernel=kernel, mem_mb=384, vcpus=2,
                        nics=1, share=share, disks=[disk],
                        append='slub_debug=FZP,kmalloc-*').start()
    netns.set_addr(lab.ns, 'br0', HOST_IP + '/24')
    log = open(lab.path('hostile-lender.log'), 'w')
    srv = subprocess.Popen(['ip', 'netns', 'exec', lab.ns, sys.executable,
                            HOSTILE, '--lender', str(test_puma.PORT),
                            test_puma.KEY, '0.05'],
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        borrower.wait_booted()
        borrower.run(kmod.CRYPTO_LOAD)
        borrower.run('insmod /mnt/host/puma.ko fault_down_delay_ms=2000')
        borrower.run('/mnt/host/pumactl key %s && '
                     '/mnt/host/pumactl set rtt_guard_us 0 && '
                     '/mnt/host/pumactl set get_timeout_us 100000 && '
                     '/mnt/host/pumactl set seq_filter 0 && '
                     '/mnt/host/pumactl role borrower && '
                     '/mnt/host/pumactl peer add 10.77.0.250:%d'
                     % (test_puma.KEY, test_puma.PORT))
        borrower.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data')
        borrower.run('cat /mnt/data/f* > /dev/null')
        for _ in range(4):
            before = test_puma.stats(borrower)['disconnects']
            test_puma.wait_for(borrower,
                               'grep -q " ready" /sys/kernel/puma/peers',
                               'borrower connects to the lender')
            borrower.run('sync && echo 1 > /proc/sys/vm/drop_caches')
            test_puma.wait_for(borrower,
                               'grep -q "queued=0" /sys/kernel/puma/peers',
                               'puts sent')
            out = borrower.run('for f in /mnt/data/f*; do '
                               'sha256sum $f & done; wait', timeout=120).out
            got = dict(reversed(ln.split()) for ln in out.splitlines())
            assert got == want, out
            test_puma.wait_for(borrower,
                               '/mnt/host/pumactl stats disconnects | '
                               'grep -qvx %d' % before,
                               'the lender closes the connection')
            dmesg = borrower.run('dmesg').out
            for bad in test_puma.BAD_DMESG + CORRUPTION:
                assert bad not in dmesg, dmesg[-6000:]
        st = test_puma.stats(borrower)
        assert st['get_timeouts'] >= 4, st
        borrower.run('rmmod puma', timeout=120)
        dmesg = test_puma.check_dmesg(borrower)
        for bad in CORRUPTION:
            assert bad not in dmesg, dmesg[-6000:]
    finally:
        srv.kill()
        srv.wait()
        log.close()
