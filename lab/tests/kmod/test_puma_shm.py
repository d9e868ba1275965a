# SPDX-License-Identifier: Apache-2.0
"""Puma's same-host transport: shared memory with doorbells (ivshmem).

Two real guests on one ivshmem-server, each with an ivshmem-doorbell
device and no NIC at all, so that nothing can go over TCP: the lender
says "lend over shm", the borrower "borrow over shm", with their pair key.
The borrower's pages go to the lender and come back through the rings
(guest-kmod/puma/shm.c): the data is right, the counters show hits, and a
file that changes reads back right (never stale).

A hostile "lender" (puma_shm_hostile.c, a static program in a guest
without puma.ko that writes the shared memory through sysfs) breaks the
rings three ways; the borrower must end the connection with a clear
reason, log no oops or warning, and keep reading its files from disk.
"""

import hashlib
import os
import re
import subprocess

import pytest

from puma_lab import errors
from puma_lab import ivshmem
from puma_lab import kmod
from puma_lab import paths
from puma_lab import profile
from puma_lab import vm

import test_puma

FILE_MB = 16
DEV = ivshmem.PCI_ADDR
KEY = test_puma.PAIR_KEY
stats = test_puma.stats
wait_for = test_puma.wait_for
HOSTILE_SRC = os.path.join(os.path.dirname(__file__), 'puma_shm_hostile.c')
FSTORTURE_SRC = os.path.join(paths.TOP, 'lab', 'guest', 'fstorture.c')
# The reason (docs/puma.md) each hostile case must end the connection
# with, as the borrower's peers line shows it.
HOSTILE_CASES = {
    'prod': 'bad shared memory ring index',
    'cons': 'bad shared memory ring index',
    'frame': 'bad length',
}


def start_borrower(borrower, put_buffers=1024):
    borrower.run(kmod.CRYPTO_LOAD)
    borrower.run('insmod /mnt/host/puma.ko put_buffers=%d' % put_buffers)
    borrower.run('/mnt/host/pumactl set rtt_guard_us 0 && '
                 '/mnt/host/pumactl set get_timeout_us 5000000')
    borrower.run('/mnt/host/pumactl role borrower && '
                 '/mnt/host/pumactl shm borrow %s %s' % (DEV, KEY))


def boot_pair(lab, kernel, disk, lender_mb=768):
    """(lender, borrower) guests on one ivshmem-server, booted, no NIC.

    The borrower has DISK; puma.ko is in their share, not loaded yet.
    """
    share = test_puma.share_with_module(lab, kernel)
    server = ivshmem.IvshmemServer(lab).start()
    lender = vm.Guest(lab, 'lend', kernel=kernel, mem_mb=lender_mb,
                      share=share, ivshmem=server).start()
    borrower = vm.Guest(lab, 'borr', kernel=kernel, mem_mb=320, vcpus=2,
                        share=share, disks=[disk], ivshmem=server).start()
    lender.wait_booted()
    borrower.wait_booted()
    return lender, borrower


def doorbells(g):
    """Doorbell interrupts the guest's ivshmem device received."""
    line = g.run('/mnt/host/pumactl shm').out
    return int(line.split('doorbells=')[1].split()[0])


def peers_line(g):
    return g.run('cat /sys/kernel/puma/peers').out


@pytest.mark.parametrize('kernel', paths.KERNELS[::-1])
def test_shm_hits_and_never_stale(lab, kernel, tmp_path):
    payload = tmp_path / 'payload'
    payload.mkdir()
    blob = os.urandom(FILE_MB * 1024 * 1024)
    (payload / 'f').write_bytes(blob)
    want = hashlib.sha256(blob).hexdigest()
    disk = vm.make_data_disk(lab.path('data.img'), FILE_MB + 32,
                             str(payload))
    lender, borrower = boot_pair(lab, kernel, disk)
    lender.run('insmod /mnt/host/puma.ko')
    assert DEV in lender.run('/mnt/host/pumactl shm').out
    # A pair on shm needs its own key, and a lender the lender role.
    res = lender.run('/mnt/host/pumactl shm lend %s %s' % (DEV, KEY),
                     check=False)
    assert res.rc != 0, res
    lender.run('/mnt/host/pumactl role lender && '
               '/mnt/host/pumactl shm lend %s %s' % (DEV, KEY))
    start_borrower(borrower, put_buffers=FILE_MB * 512)
    wait_for(borrower, 'grep -q "shm:%s ready" /sys/kernel/puma/peers'
             % DEV, 'borrower connects to the lender over shm')
    wait_for(lender, 'grep -q " ready" /sys/kernel/puma/peers',
             'lender sees the borrower over shm')

    borrower.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data')
    borrower.run('/mnt/host/pumactl set seq_filter 0')
    got = borrower.run('sha256sum /mnt/data/f', timeout=300).out.split()[0]
    assert got == want
    borrower.run('sync && echo 1 > /proc/sys/vm/drop_caches')
    b, lent = test_puma.settle_puts(lender, borrower)
    fs = test_puma.fs_stats(borrower, '/mnt/data')
    pages = FILE_MB * 256
    assert fs.get('puts', 0) >= pages * 0.9, (fs, b, lent)

    got = borrower.run('sha256sum /mnt/data/f', timeout=300).out.split()[0]
    assert got == want
    b2, lent2 = stats(borrower), stats(lender)
    fs2 = test_puma.fs_stats(borrower, '/mnt/data')
    hits = fs2['hits'] - fs['hits']
    print('puma shm %s: file pages %d, data-disk puts %d, hits %d, '
          'lender hits %d, doorbells lender %d borrower %d'
          % (kernel, pages, fs['puts'], hits,
             lent2['lend_hits'] - lent['lend_hits'], doorbells(lender),
             doorbells(borrower)))
    assert hits >= pages * 0.9, 'data disk %s lender %s' % (fs2, lent2)
    # Both sides slept on their MSI-X doorbell, not on timeouts alone.
    for g in (lender, borrower):
        assert doorbells(g) > 0, g.run('/mnt/host/pumactl shm').out
    assert lent2['lend_hits'] - lent['lend_hits'] == b2['hits'] - b['hits']
    assert b2['auth_failures'] == 0, b2

    # Never stale: change the file, drop caches, read back.
    borrower.run('dd if=/dev/urandom of=/tmp/chunk bs=64k count=4')
    borrower.run('dd if=/tmp/chunk of=/mnt/data/f bs=64k seek=10 '
                 'conv=notrunc')
    borrower.run('dd if=/tmp/chunk of=/mnt/data/f bs=64k seek=100 '
                 'conv=notrunc oflag=direct')
    borrower.run('sync && echo 1 > /proc/sys/vm/drop_caches')
    expect = bytearray(blob)
    chunk = bytes.fromhex(borrower.run(
        'od -An -v -tx1 /tmp/chunk | tr -d " \\n"').out.strip())
    expect[10 * 65536:14 * 65536] = chunk
    expect[100 * 65536:104 * 65536] = chunk
    got = borrower.run('sha256sum /mnt/data/f', timeout=300).out.split()[0]
    assert got == hashlib.sha256(bytes(expect)).hexdigest()
    fs3 = test_puma.fs_stats(borrower, '/mnt/data')
    assert fs3['invalidated_pages'] > fs2['invalidated_pages'], fs3
    assert fs3['hits'] > fs2['hits'], fs3

    # Ending the pairing forgets the lender's pages on both sides.
    borrower.run('/mnt/host/pumactl shm del %s' % DEV)
    assert stats(borrower)['remote_pages'] == 0
    assert 'shm:' not in peers_line(borrower)
    wait_for(lender, '/mnt/host/pumactl stats hosted_pages | '
             "awk '{ exit $1 != 0 }'", 'lender frees the pages')
    # Pairing again: a new connection (new epochs, empty rings) with the
    # lender's peer that waited; pages go and come back over it.
    borrower.run('/mnt/host/pumactl shm borrow %s %s' % (DEV, KEY))
    wait_for(borrower, 'grep -q "shm:%s ready" /sys/kernel/puma/peers'
             % DEV, 'borrower connects to the lender over shm again')
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    borrower.run('cat /mnt/data/f > /dev/null', timeout=300)
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    test_puma.settle_puts(lender, borrower)
    fs4 = test_puma.fs_stats(borrower, '/mnt/data')
    got = borrower.run('sha256sum /mnt/data/f', timeout=300).out.split()[0]
    assert got == hashlib.sha256(bytes(expect)).hexdigest()
    fs5 = test_puma.fs_stats(borrower, '/mnt/data')
    assert fs5['hits'] - fs4['hits'] >= pages * 0.9, (fs4, fs5)
    # Unload while paired.
    borrower.run('umount /mnt/data && rmmod puma')
    lender.run('rmmod puma')
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)


def build_hostile(share):
    out = os.path.join(share, 'puma_shm_hostile')
    try:
        subprocess.run(['gcc', '-static', '-O2', '-Wall', '-Werror', '-o',
                        out, HOSTILE_SRC], check=True, capture_output=True,
                       text=True)
    except subprocess.CalledProcessError as e:
        raise errors.LabError('building %s: %s' % (HOSTILE_SRC, e.stderr))
    return out


@pytest.mark.parametrize('kernel', profile.kernels('6.1'))
def test_shm_hostile_lender(lab, kernel, tmp_path):
    payload = tmp_path / 'payload'
    payload.mkdir()
    blob = os.urandom(4 * 1024 * 1024)
    (payload / 'f').write_bytes(blob)
    want = hashlib.sha256(blob).hexdigest()
    disk = vm.make_data_disk(lab.path('data.img'), 40, str(payload))
    share = test_puma.share_with_module(lab, kernel)
    build_hostile(share)
    server = ivshmem.IvshmemServer(lab).start()
    evil = vm.Guest(lab, 'evil', kernel=kernel, mem_mb=256, share=share,
                    ivshmem=server).start()
    borrower = vm.Guest(lab, 'borr', kernel=kernel, mem_mb=320, vcpus=2,
                        share=share, disks=[disk], ivshmem=server).start()
    evil.wait_booted()
    borrower.wait_booted()
    bar2 = '/sys/bus/pci/devices/%s/resource2' % DEV
    evil.run('echo 1 > /sys/bus/pci/devices/%s/enable' % DEV, check=False)
    borrower.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data')
    start_borrower(borrower)

    for case, reason in HOSTILE_CASES.items():
        count = 'disconnect_' + reason.replace(' ', '_')
        before = stats(borrower)[count]
        res = evil.run('/mnt/host/puma_shm_hostile %s %s' % (bar2, case),
                       timeout=90)
        assert res.out.strip() == 'ok', res
        wait_for(borrower, "/mnt/host/pumactl stats %s | "
                 "awk '{ exit !($1 > %d) }'" % (count, before),
                 'borrower ends the connection (%s: %s)' % (case, reason))
        line = peers_line(borrower)
        assert 'last_error=%s' % reason in line, (case, line)
        # Nothing was lent: the borrower reads its file from disk.
        borrower.run('echo 1 > /proc/sys/vm/drop_caches')
        got = borrower.run('sha256sum /mnt/data/f', timeout=120).out
        assert got.split()[0] == want, case
    dmesg = test_puma.check_dmesg(borrower)
    assert 'bad index' in dmesg, dmesg
    print('puma shm hostile %s: %s' % (
        kernel, ', '.join('%s: %s' % kv for kv in HOSTILE_CASES.items())))
    borrower.run('umount /mnt/data && rmmod puma')
    test_puma.check_dmesg(borrower)


@pytest.mark.parametrize('kernel', paths.KERNELS[::-1])
def test_shm_ring_corrupted_mid_connection(lab, kernel, tmp_path):
    """A real lender's shared memory is overwritten while pages are lent.

    The borrower ends the connection (bad index), forgets the lender's
    pages, reads right from disk, reconnects by itself (new epochs) and
    lends again.
    """
    payload = tmp_path / 'payload'
    payload.mkdir()
    blob = os.urandom(4 * 1024 * 1024)
    (payload / 'f').write_bytes(blob)
    want = hashlib.sha256(blob).hexdigest()
    disk = vm.make_data_disk(lab.path('data.img'), 40, str(payload))
    share = test_puma.share_with_module(lab, kernel)
    build_hostile(share)
    server = ivshmem.IvshmemServer(lab).start()
    lender = vm.Guest(lab, 'lend', kernel=kernel, mem_mb=512, share=share,
                      ivshmem=server).start()
    borrower = vm.Guest(lab, 'borr', kernel=kernel, mem_mb=320, vcpus=2,
                        share=share, disks=[disk], ivshmem=server).start()
    lender.wait_booted()
    borrower.wait_booted()
    lender.run('insmod /mnt/host/puma.ko && /mnt/host/pumactl role lender '
               '&& /mnt/host/pumactl shm lend %s %s' % (DEV, KEY))
    start_borrower(borrower, put_buffers=4096)
    ready = 'grep -q "shm:%s ready" /sys/kernel/puma/peers' % DEV
    wait_for(borrower, ready, 'borrower connects over shm')
    borrower.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data && '
                 '/mnt/host/pumactl set seq_filter 0')

    def lend_file():
        borrower.run('cat /mnt/data/f > /dev/null && '
                     'echo 1 > /proc/sys/vm/drop_caches')
        test_puma.settle_puts(lender, borrower)
        before = stats(borrower)['hits']
        got = borrower.run('sha256sum /mnt/data/f').out.split()[0]
        assert got == want
        return stats(borrower)['hits'] - before

    assert lend_file() >= 1024 * 0.9
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    assert stats(borrower)['remote_pages'] > 0
    count = 'disconnect_bad_shared_memory_ring_index'
    res = lender.run('/mnt/host/puma_shm_hostile '
                     '/sys/bus/pci/devices/%s/resource2 live' % DEV)
    assert res.out.strip() == 'ok', res
    wait_for(borrower, "/mnt/host/pumactl stats %s | awk '{ exit !($1 > 0) }'"
             % count, 'borrower ends the connection (bad index)')
    assert stats(borrower)['remote_pages'] == 0
    got = borrower.run('sha256sum /mnt/data/f').out.split()[0]
    assert got == want
    # Both sides start again from empty rings, and lending works again.
    wait_for(borrower, ready, 'borrower reconnects over shm')
    assert lend_file() >= 1024 * 0.9
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)


@pytest.mark.parametrize('kernel', profile.kernels('6.12'))
def test_fstorture_over_shm(lab, kernel):
    """The integrity torture with the lender on the same-host transport.

    fstorture (buffered, O_DIRECT and mmap writers, truncates, punches,
    renames; the page cache dropped every 3 s so that reads are served
    by the lender) on an ext4 with inline_data, in both modes; every 10 s
    the pairing is ended and made again (pumactl shm del / borrow) while
    files change.  No block may read back wrong.
    """
    share = test_puma.share_with_module(lab, kernel)
    subprocess.run(['gcc', '-O2', '-Wall', '-Werror', '-static', '-pthread',
                    '-o', os.path.join(share, 'fstorture'), FSTORTURE_SRC],
                   check=True)
    disk = vm.make_data_disk(lab.path('ext4.img'), 192,
                             features='inline_data')
    server = ivshmem.IvshmemServer(lab).start()
    lender = vm.Guest(lab, 'lend', kernel=kernel, mem_mb=512, share=share,
                      ivshmem=server).start()
    borrower = vm.Guest(lab, 'borr', kernel=kernel, mem_mb=384, vcpus=2,
                        share=share, disks=[disk], ivshmem=server).start()
    lender.wait_booted()
    borrower.wait_booted()
    lender.run('insmod /mnt/host/puma.ko && /mnt/host/pumactl role lender '
               '&& /mnt/host/pumactl shm lend %s %s' % (DEV, KEY))
    start_borrower(borrower, put_buffers=4096)
    ready = 'grep -q "shm:%s ready" /sys/kernel/puma/peers' % DEV
    wait_for(borrower, ready, 'borrower connects over shm')
    borrower.run('mkdir -p /mnt/ext4 && mount /dev/vdb /mnt/ext4')
    repair = ('/mnt/host/pumactl shm del {0}; sleep 1; '
              '/mnt/host/pumactl shm borrow {0} {1}'.format(DEV, KEY))
    for seed, mode in enumerate(('noninclusive', 'exclusive'), 1):
        borrower.run('/mnt/host/pumactl set mode %s' % mode)
        before = test_puma.fs_stats(borrower, '/mnt/ext4')
        res = borrower.run('/mnt/host/fstorture -d /mnt/ext4 -t 25 -f 16 '
                           '-b 512 -D 3 -X 10 -x "%s" -s %d'
                           % (repair, seed), timeout=900, check=False)
        after = test_puma.fs_stats(borrower, '/mnt/ext4')
        with open(lab.path('fstorture-shm-%s.log' % mode), 'w') as f:
            f.write(res.out + res.err)
            f.write('data disk before: %s\nafter: %s\n' % (before, after))
        assert res.rc == 0, res
        last = [ln for ln in res.out.splitlines()
                if re.match(r'fstorture: (OK|FAILED) ', ln)][-1]
        assert re.search(r'\bmismatches=0\b', last), last
        delta = {k: after.get(k, 0) - before.get(k, 0)
                 for k in ('gets', 'hits', 'misses', 'get_stale_dropped')}
        print('fstorture over shm %s %s: data disk %s, doorbells %d'
              % (kernel, mode, delta, doorbells(borrower)))
        # The lender served reads of the data disk over shared memory.
        assert delta['hits'] > 0, (before, after)
        wait_for(borrower, ready, 'borrower paired again over shm')
    test_puma.check_dmesg(borrower)
    test_puma.check_dmesg(lender)
