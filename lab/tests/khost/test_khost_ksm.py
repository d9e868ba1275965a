# SPDX-License-Identifier: Apache-2.0
"""KSM's look-ahead (ksm-patches/) on a kernel host that boots it.

The kernel host boots the khost kernel (lab/setup khost: the lab's 6.12
source with our KSM series, KVM built in) instead of Debian's.  Its KSM
must offer the look-ahead switch and counters, refuse bad input, and
merge the memory of L2 guests under KVM with the look-ahead on while
``memverify`` in each guest keeps rewriting and checking a region: pages
merge (look-ahead hits counted), break on write, are all given back by
``run=2`` and merge again, and no guest ever reads a wrong page.  A
third guest of the same image and workload, opted out of merging
(``mem-merge=off``, what libvirt's ``<nosharepages/>`` and the flavor's
``puma:page_merging=false`` give), keeps every page unmerged.

Full profile only (``PUMA_TEST_PROFILE=full``, see conftest.py here):
the khost kernel is a kernel build of its own (about 20 minutes on a
cold cache of a 2-core machine), which the default run's budget does not
hold.
"""

import os
import time

import pytest

from puma_lab import errors
from puma_lab import kernel_host
from puma_lab import ksm_stats
from puma_lab import lab as lab_mod
from puma_lab import migration
from puma_lab import paths

BAD_DMESG = ('BUG:', 'Oops', 'general protection', 'Call Trace',
             'WARNING:')
KSM = '/sys/kernel/mm/ksm'
# Each guest's memverify region, and its rewrite rate: a slow rewrite
# leaves most pages unchanged long enough to merge, and breaks merged
# pages on write all the time.
REGION_MB = 48
RATE_MB_S = 1
PROGRESS = '/run/memverify.progress'
# The same page-cache contents in both guests: runs of shared pages.
WORKLOAD = ('cat /usr/lib/x86_64-linux-gnu/*.so* /usr/bin/* '
            '>/dev/null 2>&1; sync')
# Pages sharing that show merging at work (two 256 MiB guests of one
# image share tens of thousands; bench ksm).
MERGED_PAGES = 5000
MERGE_TIMEOUT = 420


@pytest.fixture(scope='module')
def khost():
    with lab_mod.Lab('khost-ksm',
                     keep_logs=os.environ.get('PUMA_LOGS')) as lab:
        h = kernel_host.KernelHost(lab, 'khk', kernel='khost')
        yield h.start().wait_booted().load_kvm()


def ksm(host, name):
    return host.run('cat %s/%s' % (KSM, name)).out.strip()


def sample(host):
    return ksm_stats.parse_sample(host.sh(ksm_stats.SAMPLE_SCRIPT).out, 0)


def wait_merged(host, guests, at_least, lookahead_hits=0):
    """Wait until pages_sharing and the look-ahead's hits reach the marks.

    memverify is asked in every guest on the way: a corrupt page fails.
    """
    deadline = time.monotonic() + MERGE_TIMEOUT
    while True:
        s = sample(host)
        for g in guests:
            migration.rounds(g.agent, PROGRESS)
        if s['pages_sharing'] >= at_least and \
                s.get('lookahead_hits', 0) >= lookahead_hits:
            return s
        if time.monotonic() > deadline:
            raise AssertionError('KSM merged %d pages (%d look-ahead hits) '
                                 'in %d s' % (s['pages_sharing'],
                                              s.get('lookahead_hits', 0),
                                              MERGE_TIMEOUT))
        time.sleep(10)


def test_khost_kernel_has_the_lookahead(khost):
    assert khost.run('uname -r').out.strip() == \
        paths.khost_kernel().release
    assert khost.run('test -c /dev/kvm', check=False).rc == 0
    assert ksm(khost, 'lookahead') == '0'
    for counter in ('lookahead_hits', 'lookahead_misses'):
        assert ksm(khost, counter) == '0'
    # Bad input is refused and changes nothing; a counter is read-only.
    p = khost.sh('echo maybe > %s/lookahead' % KSM, check=False)
    assert p.rc != 0
    assert ksm(khost, 'lookahead') == '0'
    p = khost.sh('echo 5 > %s/lookahead_hits' % KSM, check=False)
    assert p.rc != 0
    khost.sh('echo 1 > %s/lookahead' % KSM)
    assert ksm(khost, 'lookahead') == '1'
    khost.sh('echo 0 > %s/lookahead' % KSM)


def test_lookahead_merges_guest_memory_that_stays_intact(khost):
    khost.sh('cd %s && echo 0 > run && echo 1000 > pages_to_scan && '
             'echo 20 > sleep_millisecs && echo 1 > lookahead' % KSM)
    guests, pids = [], []
    try:
        # Two guests that merge, and a third of the same image and
        # workload opted out (mem-merge=off, libvirt's nosharepages: what
        # puma:page_merging=false gives a server).
        for i, merge in enumerate((True, True, False)):
            g = kernel_host.NestedGuest(khost, 'ksm%d' % i, kernel='6.1',
                                        mem_mb=256, mem_merge=merge)
            guests.append(g)
            g.start().wait_booted()
        for g in guests:
            pids.append(g.agent.spawn(
                'exec memverify -m %d -t 3600 -r %d -p %s'
                % (REGION_MB, RATE_MB_S, PROGRESS)))
        for g in guests:
            migration.wait_rounds(g.agent, 1, timeout=300, path=PROGRESS)
            g.run(WORKLOAD, timeout=600)
        khost.sh('echo 1 > %s/run' % KSM)
        merged = wait_merged(khost, guests, MERGED_PAGES, lookahead_hits=1)
        print('merged with the look-ahead: %s' % merged)
        per_guest = [g.ksm_merging_pages() for g in guests]
        print('ksm_merging_pages per guest: %s' % per_guest)
        assert per_guest[0] > 0 and per_guest[1] > 0, per_guest
        assert per_guest[2] == 0, per_guest

        # Everything given back, the guests' memory intact.
        khost.sh('echo 2 > %s/run' % KSM, timeout=600)
        s = sample(khost)
        assert (s['pages_sharing'], s['pages_shared']) == (0, 0), s
        for g in guests:
            migration.rounds(g.agent, PROGRESS)

        # And merged again.
        hits = s.get('lookahead_hits', 0)
        khost.sh('echo 1 > %s/run' % KSM)
        again = wait_merged(khost, guests, MERGED_PAGES,
                            lookahead_hits=hits + 1)
        print('merged again: %s' % again)
        for g in guests:
            migration.wait_rounds(g.agent,
                                  migration.rounds(g.agent, PROGRESS) + 1,
                                  timeout=300, path=PROGRESS)
        # memverify's last full verification, then exit 0.
        for g, pid in zip(guests, pids):
            g.run('kill -TERM %d' % pid)
            res = g.agent.wait(pid, timeout=300)
            assert res.rc == 0, (g.name, res.rc, res.out, res.err)
    except kernel_host.MachineFault as e:
        raise errors.LabError('the kernel host lost its machine (see '
                              'docs/lab.md, Kernel hosts): %s' % e)
    finally:
        khost.sh('echo 0 > %s/run' % KSM, check=False)
        for g in guests:
            g.stop()
    dmesg = khost.run('dmesg').out
    bad = [line for line in dmesg.splitlines()
           if any(m in line for m in BAD_DMESG)]
    assert not bad, dmesg[-3000:]
