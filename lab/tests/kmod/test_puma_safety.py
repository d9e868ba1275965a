# SPDX-License-Identifier: Apache-2.0
"""Puma stays safe when a connection fails or a role ends (both kernels).

Each test starts the lender and borrower guests of test_puma.py and drives
one of the failure paths of docs/puma-never-stale.md, with the module's
test-only fault parameters (/sys/module/puma/parameters/fault_*) where the
window is too narrow to hit by chance.
"""

import hashlib
import os

import pytest

from puma_lab import paths
from puma_lab import vm

import test_puma

PARAMS = '/sys/module/puma/parameters/'


def data_disk(lab, tmp_path, size):
    payload = tmp_path / 'payload'
    payload.mkdir()
    blob = os.urandom(size)
    (payload / 'f').write_bytes(blob)
    return blob, vm.make_data_disk(lab.path('data.img'), 64, str(payload))


def lend_file(lender, borrower):
    """Read /mnt/data/f cold, drop it: its pages go to the lender."""
    borrower.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data')
    borrower.run('/mnt/host/pumactl set seq_filter 0')
    borrower.run('cat /mnt/data/f > /dev/null')
    borrower.run('sync && echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    fs = test_puma.fs_stats(borrower, '/mnt/data')
    assert fs.get('remote_pages', 0) > 0, fs
    return fs


def sha(g, cmd):
    return g.run(cmd + ' | sha256sum', timeout=120).out.split()[0]


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_send_error_never_serves_stale(lab, kernel, tmp_path):
    """A send error drops queued messages: nothing may be sent after.

    Page 0 of the file is at the lender.  It is overwritten (an INVAL is
    queued), written back and evicted (a PUT of the new data is queued
    behind).  fault_inval_error_ms makes that INVAL fail as a send error
    after 8 s, and the connection be shut down 8 s after that; the PUT is
    dropped with it.  A read of the page in between must not get the
    lender's old copy: the connection must be shut before anything else
    can be sent on it.
    """
    blob, disk = data_disk(lab, tmp_path, 256 * 1024)
    share = test_puma.share_with_module(lab, kernel)
    lender, borrower = test_puma.start_pair(lab, kernel, share,
                                            disks=[disk])
    lend_file(lender, borrower)
    borrower.run('head -c 4096 /dev/urandom > /tmp/new')
    new = bytes.fromhex(borrower.run(
        'od -An -v -tx1 /tmp/new | tr -d " \\n"').out.strip())
    borrower.run('echo 8000 > %sfault_inval_error_ms && '
                 'dd if=/tmp/new of=/mnt/data/f bs=4096 count=1 '
                 'conv=notrunc status=none && sync && '
                 'echo 1 > /proc/sys/vm/drop_caches' % PARAMS)
    test_puma.wait_for(borrower, 'dmesg | grep -q "test: INVAL send failed"',
                       'the injected send error')
    want = hashlib.sha256(new + blob[4096:65536]).hexdigest()
    got = sha(borrower, 'dd if=/mnt/data/f bs=64k count=1 status=none')
    assert got == want, 'page 0 read back stale: %s' % test_puma.stats(
        borrower)
    # The connection ends, comes back, and lends again.
    test_puma.wait_for(borrower, '/mnt/host/pumactl stats disconnects | '
                       'grep -qvx 0', 'the connection shut down')
    test_puma.wait_for(borrower, 'grep -q " ready" /sys/kernel/puma/peers',
                       'reconnected')
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    want = hashlib.sha256(new + blob[4096:]).hexdigest()
    assert sha(borrower, 'cat /mnt/data/f') == want
    borrower.run('rmmod puma')
    lender.run('rmmod puma')
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)
