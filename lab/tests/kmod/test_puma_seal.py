# SPDX-License-Identifier: Apache-2.0
"""A lender can neither read nor alter what it holds (both kernels).

The lender is another tenant's VM.  Here it is puma_hostile.py --store on
the host, in the lab's network namespace: a lender that keeps the blobs a
borrower guest puts, writes every one of them to a dump file, and answers
gets honestly or not:

- honest: the dump holds no byte pattern of the pages put (a marker text
  that fills a file), and the pages come back as hits, right;
- flip (one byte of each blob changed), swap (page i answered with page
  i ^ 1 of the same file), replay (the first copy of each page kept and
  returned after the file changed and was put again): each page asked
  for is a miss, read from the disk, counted in auth_failures; the file
  reads back right.

Every outcome is printed and collected, and the test fails at the end
with all of them, so that a run on a module without sealing shows each
failure it gets to (flip and swap come last: an unsealed module may run
a tampered binary of the root file system, which is lent too).
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

import test_puma

HOSTILE = os.path.join(os.path.dirname(__file__), 'puma_hostile.py')
HOST_IP = '10.77.0.250'
FILE_PAGES = 64
MARKER = b'PUMA-SEAL-MARKER-'


def marker_pages(n):
    """N pages of text anyone would recognise, each page different."""
    out = b''
    for i in range(n):
        line = MARKER + b'page-%04d-' % i
        out += (line * (4096 // len(line) + 1))[:4096]
    return out


class Lender:
    """puma_hostile.py --store MODE on PORT, dumping into the lab dir."""

    def __init__(self, lab, mode, port):
        self.mode, self.port = mode, port
        self.dump = lab.path('dump-%s.bin' % mode)
        self.log_path = lab.path('store-%s.log' % mode)
        self.log = open(self.log_path, 'w')
        self.proc = subprocess.Popen(
            ['ip', 'netns', 'exec', lab.ns, sys.executable, HOSTILE,
             '--store', str(port), test_puma.KEY, mode, self.dump],
            stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        with open(self.log_path) as f:
            return f.read()


def attach(borrower, lender):
    borrower.run('/mnt/host/pumactl peer add %s:%d' % (HOST_IP, lender.port))
    test_puma.wait_for(borrower, 'grep -q " ready" /sys/kernel/puma/peers',
                       'borrower connects to the %s lender' % lender.mode)


def detach(borrower, lender):
    borrower.run('/mnt/host/pumactl peer del %s:%d' % (HOST_IP, lender.port))
    return lender.stop()


def lend(borrower, path):
    """Read PATH cold and evict it: its pages are put."""
    borrower.run('cat %s > /dev/null && sync && '
                 'echo 1 > /proc/sys/vm/drop_caches' % path, timeout=120)
    test_puma.wait_for(borrower, 'grep -q "queued=0" /sys/kernel/puma/peers',
                       'puts sent')


def sha(borrower, path):
    return borrower.run('sha256sum %s' % path,
                        timeout=300).out.split()[0]


def counters(borrower):
    """All counters, and those of the data disk."""
    return (test_puma.stats(borrower),
            test_puma.fs_stats(borrower, '/mnt/data'))


def delta(after, before, name):
    return after.get(name, 0) - before.get(name, 0)


def read_through(borrower, lender, path, mode):
    """Read PATH with LENDER attached; (checksum, gets, hits, failures)."""
    st0, fs0 = counters(borrower)
    got = sha(borrower, path)
    st1, fs1 = counters(borrower)
    log = detach(borrower, lender)
    gets, hits = delta(fs1, fs0, 'gets'), delta(fs1, fs0, 'hits')
    bad = delta(st1, st0, 'auth_failures')
    print('%s lender: data-disk gets %d, hits %d, auth_failures %d; %s'
          % (mode, gets, hits, bad, log.strip().splitlines()[-1:]))
    return got, gets, hits, bad


@pytest.mark.parametrize('kernel', profile.kernels('6.1'))
def test_lender_cannot_read_or_alter_pages(lab, kernel, tmp_path):
    payload = tmp_path / 'payload'
    payload.mkdir()
    old = os.urandom(FILE_PAGES * 4096)
    new = os.urandom(FILE_PAGES * 4096)
    marks = marker_pages(16)
    (payload / 'f').write_bytes(old)
    (payload / 'g').write_bytes(new)
    (payload / 'm').write_bytes(marks)
    want = {name: hashlib.sha256(data).hexdigest()
            for name, data in (('f', old), ('g', new), ('m', marks))}
    disk = vm.make_data_disk(lab.path('data.img'), 64, str(payload))
    share = test_puma.share_with_module(lab, kernel)
    borrower = vm.Guest(lab, 'borr', kernel=kernel, mem_mb=384, vcpus=2,
                        nics=1, share=share, disks=[disk]).start()
    netns.set_addr(lab.ns, 'br0', HOST_IP + '/24')
    problems = []

    def problem(text):
        print('PROBLEM: ' + text)
        problems.append(text)
    borrower.wait_booted()
    # drop_caches evicts the root file system's pages too: buffers for all.
    borrower.run(kmod.CRYPTO_LOAD)
    borrower.run('insmod /mnt/host/puma.ko put_buffers=8192')
    borrower.run('/mnt/host/pumactl key %s && '
                 '/mnt/host/pumactl set rtt_guard_us 0 && '
                 '/mnt/host/pumactl set get_timeout_us 5000000 && '
                 '/mnt/host/pumactl set seq_filter 0 && '
                 '/mnt/host/pumactl role borrower' % test_puma.KEY)
    borrower.run('mkdir -p /mnt/data && mount /dev/vdb /mnt/data')
    # Evict the root file system's cache with no lender yet: later drops
    # put little more than the test's files.
    borrower.run('sync && echo 3 > /proc/sys/vm/drop_caches')

    # Honest: what the lender holds is not the page; hits still work.
    lender = Lender(lab, 'honest', test_puma.PORT + 1)
    attach(borrower, lender)
    lend(borrower, '/mnt/data/m')
    st0, fs0 = counters(borrower)
    got = sha(borrower, '/mnt/data/m')
    st1, fs1 = counters(borrower)
    log = detach(borrower, lender)
    with open(lender.dump, 'rb') as f:
        dump = f.read()
    print('honest lender: %d bytes received as blobs; %s'
          % (len(dump), log.strip().splitlines()[-1:]))
    if got != want['m']:
        problem('honest: m read back wrong')
    if len(dump) < 16 * 4096:
        problem('honest: only %d bytes put' % len(dump))
    if MARKER in dump:
        problem('honest: the lender holds the plaintext (marker '
                'found %d times in what it received)'
                % dump.count(MARKER))
    if delta(fs1, fs0, 'hits') < 16 * 0.9:
        problem('honest: %d hits of 16 pages'
                % delta(fs1, fs0, 'hits'))
    if delta(st1, st0, 'auth_failures'):
        problem('honest: auth_failures %d'
                % delta(st1, st0, 'auth_failures'))
    seals, opens = st1.get('seals', 0), st1.get('opens', 0)
    if seals and opens:
        print('puma seal %s: %d seals, %d ns each; %d opens, %d ns each'
              % (kernel, seals, st1['seal_ns'] // seals, opens,
                 st1['open_ns'] // opens))
    else:
        problem('no seal or open counted: %r' % st1)

    # Replay: f put with the old data, changed, put with the new data; the
    # lender answers with the old copy.
    lender = Lender(lab, 'replay', test_puma.PORT + 4)
    attach(borrower, lender)
    lend(borrower, '/mnt/data/f')
    borrower.run('dd if=/mnt/data/g of=/mnt/data/f bs=64k conv=notrunc '
                 'status=none && sync')
    borrower.run('echo 1 > /proc/sys/vm/drop_caches')
    test_puma.wait_for(borrower, 'grep -q "queued=0" /sys/kernel/puma/peers',
                       'puts sent')
    got, gets, hits, bad = read_through(borrower, lender, '/mnt/data/f',
                                        'replay')
    if got == want['f']:
        problem('replay: f read back with its OLD content, the '
                'replayed copy (%d gets, %d hits)' % (gets, hits))
    elif got != want['g']:
        problem('replay: f read back wrong')
    if gets < FILE_PAGES * 0.9:
        problem('replay: only %d gets' % gets)
    if hits or bad < gets:
        problem('replay: %d hits, auth_failures %d, gets %d'
                % (hits, bad, gets))

    # Flip and swap: every blob returned is wrong for the page asked.
    for i, mode in enumerate(('flip', 'swap')):
        lender = Lender(lab, mode, test_puma.PORT + 2 + i)
        attach(borrower, lender)
        lend(borrower, '/mnt/data/f')
        got, gets, hits, bad = read_through(borrower, lender,
                                            '/mnt/data/f', mode)
        # f holds g's data since the replay case.
        if got != want['g']:
            problem('%s: f read back wrong (%d gets, %d hits)'
                    % (mode, gets, hits))
        if gets < FILE_PAGES * 0.9:
            problem('%s: only %d gets' % (mode, gets))
        if hits:
            problem('%s: %d hits' % (mode, hits))
        if bad < gets:
            problem('%s: auth_failures %d < gets %d'
                    % (mode, bad, gets))

    dmesg = borrower.run('dmesg').out
    if 'failed its check' not in dmesg:
        problem('no failed check logged')
    borrower.run('umount /mnt/data && rmmod puma')
    test_puma.check_dmesg(borrower)
    assert not problems, problems
