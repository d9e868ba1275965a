# SPDX-License-Identifier: Apache-2.0
"""Puma policies in real guests: sequential filter, exclusive mode, the
lender's activity detector, and unloading with traffic flowing."""

import hashlib
import os

import pytest

from puma_lab import profile
from puma_lab import vm

import test_puma

FILE_MB = 16


def read_sum(g):
    return g.run('sha256sum /mnt/data/f', timeout=300).out.split()[0]


@pytest.mark.parametrize('kernel', profile.kernels('6.12'))
def test_policies_and_unload_under_traffic(lab, kernel, tmp_path):
    payload = tmp_path / 'payload'
    payload.mkdir()
    blob = os.urandom(FILE_MB << 20)
    (payload / 'f').write_bytes(blob)
    want = hashlib.sha256(blob).hexdigest()
    disk = vm.make_data_disk(lab.path('data.img'), FILE_MB + 32,
                             str(payload))
    share = test_puma.share_with_module(lab, kernel)
    lender, borrower = test_puma.start_pair(lab, kernel, share, disks=[disk],
                                            put_buffers=FILE_MB * 512)
    pages = FILE_MB * 256
    borrower.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data')

    # Sequential filter (default on): a streaming read is not put.
    assert borrower.run('/mnt/host/pumactl get seq_filter').out.strip() == \
        '1'
    s0 = test_puma.stats(borrower)
    assert read_sum(borrower) == want
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    s1 = test_puma.stats(borrower)
    assert s1['drop_sequential'] - s0['drop_sequential'] >= pages // 2, s1

    # Exclusive mode: a hit takes the page away from the lender.
    borrower.run('/mnt/host/pumactl set seq_filter 0 && '
                 '/mnt/host/pumactl set mode exclusive')
    assert read_sum(borrower) == want
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    l1 = test_puma.stats(lender)
    b1 = test_puma.stats(borrower)
    assert read_sum(borrower) == want
    l2 = test_puma.stats(lender)
    b2 = test_puma.stats(borrower)
    hits = b2['hits'] - b1['hits']
    assert hits >= pages * 0.8, b2
    assert l1['hosted_pages'] - l2['hosted_pages'] == hits, (l1, l2)

    # RTT guard: with a bound no get can meet, gets are skipped (but for
    # the 1-in-32 probes) and the disk serves the reads.
    borrower.run('/mnt/host/pumactl set mode noninclusive && '
                 '/mnt/host/pumactl set rtt_guard_us 1')
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    b3 = test_puma.stats(borrower)
    assert read_sum(borrower) == want
    b4 = test_puma.stats(borrower)
    skipped = b4['gets_skipped_rtt'] - b3['gets_skipped_rtt']
    assert skipped >= pages // 2, b4
    assert b4['hits'] - b3['hits'] < pages // 8, b4
    borrower.run('/mnt/host/pumactl set rtt_guard_us 0')

    # Activity detector: a memory-hungry lender stops lending and frees
    # what it hosts; the borrower is told (SUSPEND).
    borrower.run('/mnt/host/pumactl set mode noninclusive')
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    assert test_puma.stats(lender)['hosted_pages'] > 0
    lender.run('/mnt/host/pumactl set quiet_ms 2000')
    lender.run('setsid stress-ng --vm 2 --vm-bytes 90%% --vm-keep '
               '--timeout 20s >/dev/null 2>&1 < /dev/null &')
    test_puma.wait_for(lender, 'pgrep stress-ng', 'stress-ng runs')
    test_puma.wait_for(lender, '/mnt/host/pumactl stats lender_busy | '
                       'grep -qx 1', 'lender detects its own activity')
    test_puma.wait_for(lender, '/mnt/host/pumactl stats hosted_pages | '
                       'grep -qx 0', 'busy lender frees hosted pages')
    test_puma.wait_for(borrower, 'grep -q suspended /sys/kernel/puma/peers',
                       'borrower told to stop putting')
    assert test_puma.stats(borrower)['remote_pages'] == 0
    test_puma.wait_for(lender, '/mnt/host/pumactl stats lender_busy | '
                       'grep -qx 0', 'lender lends again once quiet',
                       tries=240)
    test_puma.wait_for(borrower,
                       '! grep -q suspended /sys/kernel/puma/peers',
                       'borrower resumes puts')

    # Link cut: gets time out, the RTT guard stops asking, reads stay
    # right, the connection ends with its remote pages; it comes back.
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    borrower.run('/mnt/host/pumactl set get_timeout_us 200000 && '
                 '/mnt/host/pumactl set rtt_guard_us 50000')
    lender.run('ip link set eth0 down')
    assert read_sum(borrower) == want
    test_puma.wait_for(borrower, '! grep -q " ready" /sys/kernel/puma/peers',
                       'a cut link ends the connection')
    assert test_puma.stats(borrower)['remote_pages'] == 0
    lender.run('ip link set eth0 up')
    test_puma.wait_for(borrower, 'grep -q " ready" /sys/kernel/puma/peers',
                       'the borrower reconnects')
    assert read_sum(borrower) == want

    # Unload with traffic flowing: reads, evictions and gets in flight.
    borrower.run('(while :; do cat /mnt/data/f >/dev/null; '
                 'echo 1 > /proc/sys/vm/drop_caches; done) '
                 '>/dev/null 2>&1 & echo $! > /tmp/loop')
    borrower.run('sleep 5')
    lender.run('rmmod puma')
    borrower.run('sleep 3')
    borrower.run('rmmod puma')
    borrower.run('kill $(cat /tmp/loop)')
    assert read_sum(borrower) == want
    borrower.run('insmod /mnt/host/puma.ko && rmmod puma')
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)
