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
from puma_lab import profile
from puma_lab import vm

import test_puma

PARAMS = '/sys/module/puma/parameters/'
FILE_PAGES = 64


def pair(lab, kernel, tmp_path):
    """The two guests, the borrower with the file on its data disk."""
    payload = tmp_path / 'payload'
    payload.mkdir()
    blob = os.urandom(FILE_PAGES * 4096)
    (payload / 'f').write_bytes(blob)
    disk = vm.make_data_disk(lab.path('data.img'), 64, str(payload))
    share = test_puma.share_with_module(lab, kernel)
    # drop_caches evicts the root file system's pages too: buffers for
    # all of them, or the file's puts may be dropped (drop_no_buffer).
    lender, borrower = test_puma.start_pair(lab, kernel, share,
                                            disks=[disk], put_buffers=8192)
    return blob, lender, borrower


def lend_file(lender, borrower):
    """Read /mnt/data/f cold, drop it: its pages go to the lender."""
    borrower.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data')
    borrower.run('/mnt/host/pumactl set seq_filter 0')
    borrower.run('cat /mnt/data/f > /dev/null')
    borrower.run('sync && echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    fs = test_puma.fs_stats(borrower, '/mnt/data')
    assert fs.get('remote_pages', 0) >= FILE_PAGES, fs
    return fs


def sha(g, cmd):
    return g.run(cmd + ' | sha256sum', timeout=120).out.split()[0]


@pytest.mark.parametrize('kernel', profile.kernels('6.12'))
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
    blob, lender, borrower = pair(lab, kernel, tmp_path)
    # While the worker holds the send mutex, gets of the root file
    # system's pages (the shell's own binaries) wait for their timeout:
    # keep it short so that the page is written and evicted (its PUT
    # queued) well within the first 8 s.
    borrower.run('/mnt/host/pumactl set get_timeout_us 200000')
    borrower.run('head -c 4096 /dev/urandom > /tmp/new')
    new = bytes.fromhex(borrower.run(
        'od -An -v -tx1 /tmp/new | tr -d " \\n"').out.strip())
    fs = lend_file(lender, borrower)
    # dd's nocache is fadvise(DONTNEED): unlike drop_caches, it drains the
    # per-CPU LRU batches that may still hold the page just written.
    borrower.run('echo 8000 > %sfault_inval_error_ms && '
                 'dd if=/tmp/new of=/mnt/data/f bs=4096 count=1 '
                 'conv=notrunc status=none && sync && '
                 'dd if=/mnt/data/f iflag=nocache count=0 status=none'
                 % PARAMS)
    test_puma.wait_for(borrower, 'dmesg | grep -q "test: INVAL send failed"',
                       'the injected send error')
    fs2 = test_puma.fs_stats(borrower, '/mnt/data')
    assert fs2['puts'] > fs['puts'], 'new data not put: %s %s' % (fs, fs2)
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


def peers(g):
    return g.run('cat /sys/kernel/puma/peers').out


@pytest.mark.parametrize('kernel', profile.kernels('6.1'))
def test_role_off_ends_sessions(lab, kernel, tmp_path):
    """Role off ends lending and borrowing, and what they left behind.

    The borrower's role off removes its lender (no connection, no remote
    page in its index, nothing asked of the lender any more); the lender
    frees the borrower's pages with the connection.  Then the same from
    the lender's side: its role off closes the borrower's session, frees
    the pages, and the borrower forgets them.
    """
    blob, lender, borrower = pair(lab, kernel, tmp_path)
    want = hashlib.sha256(blob).hexdigest()
    lend_file(lender, borrower)
    borrower.run('/mnt/host/pumactl role off')
    assert peers(borrower) == '', peers(borrower)
    assert test_puma.stats(borrower)['remote_pages'] == 0
    assert test_puma.fs_stats(borrower, '/mnt/data')['remote_pages'] == 0
    test_puma.wait_for(lender, 'test -z "$(cat /sys/kernel/puma/peers)"',
                       'the lender sees the borrower go')
    assert test_puma.stats(lender)['hosted_pages'] == 0
    gets = test_puma.stats(borrower)['gets']
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    assert sha(borrower, 'cat /mnt/data/f') == want
    assert test_puma.stats(borrower)['gets'] == gets

    # The lender gives up its role.
    lender_ip = lender.addrs[0].split('/')[0]
    borrower.run('/mnt/host/pumactl role borrower && '
                 '/mnt/host/pumactl peer add %s:%d %s'
                 % (lender_ip, test_puma.PORT, test_puma.PAIR_KEY))
    test_puma.wait_for(borrower, 'grep -q " ready" /sys/kernel/puma/peers',
                       'the borrower connects again')
    borrower.run('sync && echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    assert test_puma.fs_stats(borrower, '/mnt/data')['remote_pages'] > 0
    lender.run('/mnt/host/pumactl role off')
    assert peers(lender) == '', peers(lender)
    assert test_puma.stats(lender)['hosted_pages'] == 0
    test_puma.wait_for(borrower, '/mnt/host/pumactl stats remote_pages | '
                       'grep -qx 0', 'the borrower forgets the pages')
    assert ' ready' not in peers(borrower), peers(borrower)
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    assert sha(borrower, 'cat /mnt/data/f') == want
    borrower.run('rmmod puma')
    lender.run('rmmod puma')
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)


@pytest.mark.parametrize('kernel', profile.kernels('6.12'))
def test_miss_forgets_the_entry(lab, kernel, tmp_path):
    """A page the lender no longer has is not asked for again.

    The lender hosts nothing (capacity_pages 0: every put is dropped
    there, as its shrinker or a full budget would), yet the borrower's
    index lists the pages it put.  The first read misses on each; the
    misses must remove those entries (misses_forgotten), so that the
    pages are read from the disk with no further get.
    """
    blob, lender, borrower = pair(lab, kernel, tmp_path)
    want = hashlib.sha256(blob).hexdigest()
    lender.run('/mnt/host/pumactl set capacity_pages 0')
    fs = lend_file(lender, borrower)
    assert test_puma.stats(lender)['hosted_pages'] == 0
    pages = fs['remote_pages']
    assert sha(borrower, 'cat /mnt/data/f') == want
    fs2 = test_puma.fs_stats(borrower, '/mnt/data')
    missed = fs2['misses'] - fs.get('misses', 0)
    assert missed >= pages, (fs, fs2)
    assert fs2['remote_pages'] == 0, fs2
    assert test_puma.stats(borrower)['misses_forgotten'] >= pages
    # Evicted again, the pages are put again (a listed page would be
    # taken as already at the lender and not sent), and read back right.
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    fs3 = test_puma.fs_stats(borrower, '/mnt/data')
    assert fs3['puts'] - fs2['puts'] >= pages, (fs2, fs3)
    assert sha(borrower, 'cat /mnt/data/f') == want
    assert test_puma.fs_stats(borrower, '/mnt/data')['remote_pages'] == 0
    borrower.run('rmmod puma')
    lender.run('rmmod puma')
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_unhooked_change_is_never_stale(lab, kernel):
    """A change no hook sees: the change cookie catches it at the get.

    On ext4 with inline_data a file of a few bytes lives in its inode,
    and a write to it (ext4_write_inline_data_end()) clears the folio's
    dirty flag itself: writeback_dirty_folio never fires, no invalidation
    happens, and a non-inclusive re-eviction of the (clean) page sends
    nothing.  The lender still has the old content; the file's change
    cookie (i_version, mtime, ctime, size) must keep it from being used.
    """
    disk = vm.Disk(lab.path('inline.img'))
    with open(disk.path, 'wb') as f:
        f.truncate(64 << 20)
    share = test_puma.share_with_module(lab, kernel)
    lender, borrower = test_puma.start_pair(lab, kernel, share,
                                            disks=[disk], put_buffers=8192)
    borrower.run('mkfs.ext4 -q -O inline_data /dev/vdb && '
                 'mkdir -p /mnt/data && mount /dev/vdb /mnt/data',
                 timeout=120)
    borrower.run('/mnt/host/pumactl set seq_filter 0')
    old = 'old-content-' + '0' * 28
    new = 'NEW'
    borrower.run('printf %s > /mnt/data/f && sync' % old)
    # The data is inline: lsattr's "N" flag.
    assert 'N' in borrower.run('lsattr /mnt/data/f').out.split()[0]
    borrower.run('dd if=/mnt/data/f iflag=nocache count=0 status=none')
    test_puma.settle_puts(lender, borrower)
    fs = test_puma.fs_stats(borrower, '/mnt/data')
    assert fs.get('remote_pages') == 1, fs
    # A hit while nothing changed.
    assert borrower.run('cat /mnt/data/f').out == old
    fs2 = test_puma.fs_stats(borrower, '/mnt/data')
    assert fs2['hits'] == fs['hits'] + 1, (fs, fs2)
    # Overwrite in place (no truncate: that hook would see it), evict.
    borrower.run('sleep 1; printf %s | dd of=/mnt/data/f conv=notrunc '
                 'status=none && sync' % new)
    borrower.run('dd if=/mnt/data/f iflag=nocache count=0 status=none')
    test_puma.settle_puts(lender, borrower)
    got = borrower.run('cat /mnt/data/f').out
    assert got == new + old[len(new):], (got, test_puma.stats(borrower))
    assert test_puma.stats(borrower)['cookie_changes'] >= 1
    borrower.run('umount /mnt/data && rmmod puma')
    lender.run('rmmod puma')
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)


@pytest.mark.parametrize('kernel', profile.kernels('6.1'))
def test_put_during_an_unhooked_write_is_never_stale(lab, kernel):
    """A page put while a write no hook sees is half done.

    ext4's write updates the file's time stamps (its change cookie)
    before it copies the data.  ufdwrite stops a write to an inline-data
    file right there (its buffer faults through userfaultfd), the page
    is evicted then, and the write completes without any hook.  Before
    the module refused puts while the file's i_rwsem is held, that put
    paired the old data with the new cookie, and the next get served
    the old content.
    """
    disk = vm.Disk(lab.path('inline.img'))
    with open(disk.path, 'wb') as f:
        f.truncate(64 << 20)
    share = test_puma.share_with_module(lab, kernel)
    lender, borrower = test_puma.start_pair(lab, kernel, share,
                                            disks=[disk], put_buffers=8192)
    borrower.run('mkfs.ext4 -q -O inline_data /dev/vdb && '
                 'mkdir -p /mnt/data && mount /dev/vdb /mnt/data',
                 timeout=120)
    borrower.run('/mnt/host/pumactl set seq_filter 0')
    old = 'old-content-' + '0' * 28
    new = 'NEW'
    borrower.run('printf %s > /mnt/data/f && sync' % old)
    assert 'N' in borrower.run('lsattr /mnt/data/f').out.split()[0]
    borrower.run('dd if=/mnt/data/f iflag=nocache count=0 status=none')
    test_puma.settle_puts(lender, borrower)
    assert test_puma.fs_stats(borrower, '/mnt/data')['remote_pages'] == 1
    # A new second for the time stamps, then the write that stops.
    borrower.run('sleep 1; rm -f /tmp/go; setsid ufdwrite /mnt/data/f %s '
                 '/tmp/go >/tmp/ufd.out 2>&1 </dev/null &' % new)
    for _ in range(100):
        if 'blocked' in borrower.run('cat /tmp/ufd.out').out:
            break
        borrower.run('sleep 0.1')
    else:
        pytest.fail(borrower.run('cat /tmp/ufd.out').out)
    before = test_puma.stats(borrower)
    # The page is read in (a hit) and evicted while the write waits.
    assert borrower.run('cat /mnt/data/f').out == old
    borrower.run('dd if=/mnt/data/f iflag=nocache count=0 status=none')
    test_puma.settle_puts(lender, borrower)
    during = test_puma.stats(borrower)
    borrower.run('touch /tmp/go')
    for _ in range(100):
        if 'wrote' in borrower.run('cat /tmp/ufd.out').out:
            break
        borrower.run('sleep 0.1')
    assert 'wrote %d' % len(new) in borrower.run('cat /tmp/ufd.out').out
    borrower.run('sync')
    # The page now holds the new data, clean: evict it, read it back.
    borrower.run('dd if=/mnt/data/f iflag=nocache count=0 status=none')
    test_puma.settle_puts(lender, borrower)
    got = borrower.run('cat /mnt/data/f').out
    after = test_puma.stats(borrower)
    assert got == new + old[len(new):], (got, before, during, after)
    assert during['drop_writing'] > before['drop_writing'], (before, during)
    borrower.run('umount /mnt/data && rmmod puma')
    lender.run('rmmod puma')
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)
