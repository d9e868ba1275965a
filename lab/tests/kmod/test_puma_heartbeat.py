# SPDX-License-Identifier: Apache-2.0
"""Heartbeats: an idle pair stays up, a peer that went silent is closed.

Over the same-host transport (shared memory), where nothing below Puma
notices a peer whose VM stopped: TCP's keepalive ends such a connection
(guest-kmod/puma/peer.c), a ring in shared memory does not.  Two real
guests on one ivshmem-server, heartbeat_ms 500 and peer_timeout_ms 3000
on both:

- idle for three times the timeout, the pair stays connected and the
  borrower's PINGs are counted;
- the borrower's VM stopped (QMP stop): its lender closes the connection
  as "peer silent" and frees every page it hosted for it; the borrower
  runs again and pairs again;
- the lender's VM stopped: the borrower closes it as "peer silent" and
  forgets its remote pages, so its reads go to the disk (right data,
  no get waits for the stopped lender); the lender runs again and the
  pair connects again.

Without the heartbeats (before guest-kmod/puma/heartbeat.c) both
stopped peers kept their connection, and the lender its pages.
"""

import hashlib
import os

import pytest

from puma_lab import profile
from puma_lab import vm

import test_puma
import test_puma_shm

FILE_MB = 8
DEV = test_puma_shm.DEV
KEY = test_puma_shm.KEY
stats = test_puma.stats
wait_for = test_puma.wait_for
HEARTBEAT = ('/mnt/host/pumactl set heartbeat_ms 500 && '
             '/mnt/host/pumactl set peer_timeout_ms 3000')
SILENT = 'disconnect_peer_silent'


def _ready(g, what):
    wait_for(g, 'grep -q " ready" /sys/kernel/puma/peers', what)


def _grows(g, counter, before, what):
    """Wait until G's counter COUNTER is no longer BEFORE."""
    wait_for(g, '/mnt/host/pumactl stats %s | grep -qvx %d'
             % (counter, before), what)


def _put_file(lender, borrower):
    """The borrower reads its file, drops it: the lender hosts it."""
    borrower.run('cat /mnt/data/f > /dev/null', timeout=300)
    borrower.run('sync && echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    assert stats(lender)['hosted_pages'] >= FILE_MB * 256 * 0.9
    assert stats(borrower)['remote_pages'] >= FILE_MB * 256 * 0.9


@pytest.mark.parametrize('kernel', profile.kernels('6.12'))
def test_silent_peer_is_closed_idle_pair_stays(lab, kernel, tmp_path):
    payload = tmp_path / 'payload'
    payload.mkdir()
    blob = os.urandom(FILE_MB * 1024 * 1024)
    (payload / 'f').write_bytes(blob)
    want = hashlib.sha256(blob).hexdigest()
    disk = vm.make_data_disk(lab.path('data.img'), FILE_MB + 32,
                             str(payload))
    lender, borrower = test_puma_shm.boot_pair(lab, kernel, disk,
                                               lender_mb=512)
    lender.run('insmod /mnt/host/puma.ko && ' + HEARTBEAT)
    lender.run('/mnt/host/pumactl role lender && '
               '/mnt/host/pumactl shm lend %s %s' % (DEV, KEY))
    test_puma_shm.start_borrower(borrower, put_buffers=FILE_MB * 512)
    borrower.run(HEARTBEAT)
    _ready(borrower, 'borrower connects to the lender over shm')
    _ready(lender, 'lender sees the borrower over shm')
    borrower.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data && '
                 '/mnt/host/pumactl set seq_filter 0')
    _put_file(lender, borrower)

    # Idle for three timeouts: the PINGs keep both sides' view alive.
    pings = stats(borrower)['pings']
    borrower.run('sleep 9', timeout=60)
    b, lent = stats(borrower), stats(lender)
    assert b['pings'] - pings >= 3, b
    assert (b['disconnects'], lent['disconnects']) == (0, 0), (b, lent)
    assert 'shm:%s ready' % DEV in test_puma_shm.peers_line(borrower)

    # The borrower's VM stops: its lender frees what it hosted for it.
    silent, down = stats(lender)[SILENT], stats(borrower)['disconnects']
    borrower.qmp('stop')
    try:
        _grows(lender, SILENT, silent, 'the lender closes the silent borrower')
        wait_for(lender, '/mnt/host/pumactl stats hosted_pages | '
                 "awk '{ exit $1 != 0 }'", 'the lender frees its pages')
    finally:
        borrower.qmp('cont')
    # The borrower sees its connection ended (the lender's epoch), forgets
    # the pages and pairs again.
    _grows(borrower, 'disconnects', down, 'the borrower sees the end')
    _ready(borrower, 'the borrower pairs again after it ran again')
    _ready(lender, 'the lender takes the borrower again')
    assert stats(borrower)['remote_pages'] == 0
    _put_file(lender, borrower)

    # The lender's VM stops: the borrower forgets its remote pages and
    # reads from the disk instead of waiting for the lender.
    b = stats(borrower)
    lender.qmp('stop')
    try:
        _grows(borrower, SILENT, b[SILENT],
               'the borrower closes the silent lender')
        assert stats(borrower)['remote_pages'] == 0
        got = borrower.run('sha256sum /mnt/data/f', timeout=300).out.split()
        assert got[0] == want
        assert stats(borrower)['get_timeouts'] == b['get_timeouts']
    finally:
        lender.qmp('cont')
    _ready(borrower, 'the borrower pairs again once the lender runs')
    dmesg = borrower.run('dmesg').out
    assert 'disconnected: peer silent' in dmesg, dmesg[-3000:]
    borrower.run('umount /mnt/data && rmmod puma')
    lender.run('rmmod puma', timeout=120)
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)
