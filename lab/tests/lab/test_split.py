# SPDX-License-Identifier: Apache-2.0
"""Split migration with remote paging: real guests, three emulated hosts.

A guest on host A runs memverify on a working set larger than the main
host's limit; it is split-migrated to host B with its cold pages on a
memory server on host C, keeps running while it pages, and must verify
every page throughout and after.  Each test runs twice: through libvirt
(``virsh migrate --split ...``) and straight over QMP.  A stack that
lacks split support (probed: QEMU's x-split capability and x-query-split
command, the memory server binary, virsh's --split options) fails them
with that reason (``require``, lab/tests/conftest.py).
"""

import asyncio
import os
import re
import subprocess
import threading
import time

import pytest
from qemu.qmp import ExecuteError

from puma_lab import errors
from puma_lab import memserver
from puma_lab import paths
from puma_lab import profile
from puma_lab import replayer
from puma_lab import split
from puma_lab import tls

MEM_MB = 512
WSS_MB = 160          # memverify's working set, rewritten at RATE MiB/s
RATE = 32
LIMIT = 128 << 20     # main-host resident limit: below the working set
PAGE = 4096


@pytest.fixture
def driver(request, require):
    """The split driver of a test, parametrized with profile.drivers()."""
    require('split migration through %s' % request.param,
            split.missing(request.param))
    return request.param


def workload(g):
    return split.start_workload(g, WSS_MB, RATE)


def walk(g, n=2):
    return split.walk(g, n)


def verified(g, pid):
    res = split.stop_workload(g, pid)
    print('memverify on %s:' % g.host.name, res.out.strip())
    assert res.rc == 0 and 'corrupt=0' in res.out, res
    return res


def wait_state(g, want, timeout=180):
    """QEMU's run state WANT ('running', 'paused'), and libvirt's too.

    With virsh, libvirt takes the state from QEMU's events a little
    later, and refuses guest-agent commands while it still says paused.
    """
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = g.running()
        if state == want and (not hasattr(g, 'state_reason') or
                              g.state_reason().split()[0] == want):
            return state
        time.sleep(0.5)
    raise AssertionError('guest %s is %s, not %s, after %ds'
                         % (g.name, state, want, timeout))


def server_empty(srv, timeout=60):
    """The server's page count drops to 0 (what it holds for guests)."""
    deadline = time.monotonic() + timeout
    st = srv.stats()
    while st['total_pages'] and time.monotonic() < deadline:
        time.sleep(1)
        st = srv.stats()
    return st


def split_to_b(driver, lab, name):
    """Guest NAME split-migrated from A to B, pages on C, B paging out.

    Returns the hosts, the memory server, the guest and memverify's pid.
    """
    a, b, c = split.make_hosts(lab, driver, ('a', 'b', 'c'))
    srv = memserver.MemoryServer(c).start()
    g = split.make_guest(driver, lab, a, name, mem_mb=MEM_MB)
    pid = workload(g)

    g.migrate(b, [srv], LIMIT)
    assert g.running() == 'running'
    walk(g)
    st = g.qmp('x-query-split')
    assert st['state'] == 'active', st
    # Part of the working set lives on C and came back on demand; the
    # memory the guest never used is neither here nor there.  The working
    # set is larger than the limit: B pages out too.
    assert st['remote-pages'] > 0 and st['page-ins'] > 0, st
    assert st['page-outs'] > 0, st
    assert st['unused-pages'] > 0, st
    assert st['resident-pages'] + st['remote-pages'] + \
        st['unused-pages'] >= MEM_MB * 1024 * 1024 // PAGE, st
    assert [s['state'] for s in st['servers']] == ['up'], st
    assert c.addr in st['servers'][0]['uri'], st
    assert srv.stats()['total_pages'] > 0
    print('on B after the first hop:', st)
    if driver == 'virsh':
        out = b.virsh('domstats', '--split', name)
        stats = dict(line.strip().split('=', 1) for line in out.splitlines()
                     if '=' in line)
        assert stats.get('split.state') == 'active', out
        for field in ('split.resident_bytes', 'split.remote_bytes',
                      'split.unused_bytes', 'split.page_ins',
                      'split.page_outs'):
            assert field in stats, out
        # Memory in bytes: x-query-split's 4 KiB pages, converted.
        for field in ('split.resident_bytes', 'split.remote_bytes',
                      'split.unused_bytes'):
            assert int(stats[field]) > 0 and int(stats[field]) % PAGE == 0, \
                out
    return a, b, c, srv, g, pid


@pytest.mark.parametrize('driver', profile.drivers('virsh'), indirect=True)
def test_split_there_and_back(driver, lab):
    a, b, c, srv, g, pid = split_to_b(driver, lab, 'vm1')

    # B -> A, split again with C, while memverify runs and B pages out:
    # B pages everything in, then classifies and sends it afresh.
    g.migrate(a, [srv], LIMIT)
    assert g.host is a
    assert g.running() == 'running'
    walk(g)
    st = g.qmp('x-query-split')
    print('on A after the second hop:', st)
    assert st['state'] == 'active', st
    assert st['remote-pages'] + st['page-ins'] > 0, st
    assert c.addr in st['servers'][0]['uri'], st
    assert srv.stats()['total_pages'] > 0
    verified(g, pid)
    assert g.qemu_left_on(b) == []
    assert srv.alive()


def save_refused(driver, g, path):
    """A save to a file would have to hold all of G's memory: refused.

    The VM runs on where it is, still split, its pages still on the
    server; memverify checks the memory at the end of the test.
    """
    held = g.qmp('x-query-split')['remote-pages']
    tries = [(True, 'x-split'), (False, 'memory server')] \
        if driver == 'qmp' else [(None, 'memory server')]
    for split_on, why in tries:
        if driver == 'qmp':
            ok, err = g.save_to_file(path, split=split_on)
        else:
            ok, err = g.save_to_file(path)
        print('save with x-split %s:' % split_on, ok, err)
        assert not ok and why in err, (ok, err)
        assert wait_state(g, 'running') == 'running'
        st = g.qmp('x-query-split')
        assert st['state'] == 'active', st
        assert st['remote-pages'] > 0 and held > 0, st
        assert [s['state'] for s in st['servers']] == ['up'], st


# libvirt's refusal (libvirt patch 16), not QEMU's ("this VM's memory").
LIBVIRT_REFUSAL = "part of the domain's memory is on memory servers"


def libvirt_refuses_memory_files(g, base):
    """libvirt refuses every way of writing G's memory to a file.

    It knows from its status XML that the domain came by split migration
    (also after a restart of libvirtd), and refuses before it pauses the
    domain: the guest never stops, its pages stay on the server.
    """
    tries = (('save', g.name, base + '.save'),
             ('managedsave', g.name),
             ('dump', g.name, base + '.core'),
             ('snapshot-create-as', g.name, 'mem', '--memspec',
              'file=%s.mem,snapshot=external' % base, '--no-metadata'))
    for argv in tries:
        with pytest.raises(errors.LabError) as e:
            g.host.virsh(*argv, timeout=120)
        print('virsh %s:' % argv[0], e.value)
        assert LIBVIRT_REFUSAL in str(e.value), (argv, str(e.value))
        assert g.state_reason() == 'running (migrated)', g.state_reason()
        st = g.qmp('x-query-split')
        assert st['state'] == 'active' and st['remote-pages'] > 0, st
    for path in (base + '.save', base + '.core', base + '.mem'):
        assert not os.path.exists(path), path


@pytest.mark.parametrize('driver', profile.drivers('qmp'), indirect=True)
def test_split_then_plain_migration(driver, lab):
    a, b, c, srv, g, pid = split_to_b(driver, lab, 'vm7')
    save_refused(driver, g, os.path.join(b.dir, 'vm7.save'))
    if driver == 'virsh':
        # libvirt keeps in its status XML that the memory is split, and
        # refuses saves, dumps and memory snapshots itself, before and
        # after a restart of the daemon.
        assert '<splitMemory/>' in b.status_xml(g.name)
        libvirt_refuses_memory_files(g, os.path.join(b.dir, 'vm7'))
        b.restart_libvirtd()
        assert '<splitMemory/>' in b.status_xml(g.name)
        assert wait_state(g, 'running') == 'running'
        libvirt_refuses_memory_files(g, os.path.join(b.dir, 'vm7'))
    assert srv.stats()['total_pages'] > 0

    # B pages everything in and sends it all in the migration stream; C
    # forgets the VM.
    g.migrate(a, mode='precopy')
    assert g.host is a
    assert g.running() == 'running'
    walk(g)
    assert g.qmp('x-query-split')['state'] == 'none'
    assert server_empty(srv)['total_pages'] == 0
    verified(g, pid)
    assert g.qemu_left_on(b) == []
    assert srv.alive()


def mirrored(driver, lab, name):
    """A guest split from A to B with a mirrored pair of servers on C, D.

    Returns the guest, its workload's pid and the two servers, once the
    workload walked its working set once on B.
    """
    a, b, c, d = split.make_hosts(lab, driver, ('a', 'b', 'c', 'd'))
    s1 = memserver.MemoryServer(c).start()
    s2 = memserver.MemoryServer(d).start()
    g = split.make_guest(driver, lab, a, name, mem_mb=MEM_MB)
    pid = workload(g)
    g.migrate(b, [s1, s2], LIMIT)
    walk(g, 1)
    return g, pid, s1, s2


def mirrors_agree(g, s1, s2, timeout=60):
    """The pages both servers hold once the pager is still.

    The workload keeps paging while it runs, so two servers read one
    after the other differ by what was in flight between the reads (8
    pages once in CI): pause the guest, wait for both to hold the same
    number of pages (the pager's writes in flight land), and go on.
    """
    g.qmp('stop')
    try:
        deadline = time.monotonic() + timeout
        while True:
            held = (s1.stats()['total_pages'], s2.stats()['total_pages'])
            if held[0] == held[1] or time.monotonic() > deadline:
                return held
            time.sleep(1)
    finally:
        g.qmp('cont')
        wait_state(g, 'running')


@pytest.mark.parametrize('driver', profile.drivers('virsh'), indirect=True)
def test_mirror_survives_a_dead_server(driver, lab):
    g, pid, s1, s2 = mirrored(driver, lab, 'vm2')
    assert g.qmp('x-query-split')['state'] == 'active'
    held = mirrors_agree(g, s1, s2)
    assert held[0] == held[1] > 0, held

    s1.kill()
    walk(g)
    st = g.qmp('x-query-split')
    assert g.running() == 'running'
    assert st['page-ins'] > 0, st
    # Nothing to re-mirror onto while it is dead: one copy left, and
    # the pager says so.
    assert st['state'] == 'degraded', st
    states = {('up' if s2.host.addr in s['uri'] else 'down'): s['state']
              for s in st['servers']}
    assert states == {'up': 'up', 'down': 'down'}, st
    verified(g, pid)


def split_state(g, want, timeout=300):
    deadline = time.monotonic() + timeout
    st = None
    while time.monotonic() < deadline:
        st = g.qmp('x-query-split')
        if st['state'] == want:
            return st
        time.sleep(1)
    raise AssertionError('split state of %s is not %s after %ds: %s'
                         % (g.name, want, timeout, st))


@pytest.mark.parametrize('driver', profile.drivers('qmp'), indirect=True)
def test_mirror_is_remade_on_a_restarted_server(driver, lab):
    g, pid, s1, s2 = mirrored(driver, lab, 'vm5')
    s1.kill()
    walk(g, 1)
    assert g.qmp('x-query-split')['state'] == 'degraded'
    # A new, empty server where the dead one was: the pager copies the
    # remote pages onto it from the survivor, then trusts it again.
    s1 = memserver.MemoryServer(s1.host).start()
    st = split_state(g, 'active')
    assert s1.stats()['total_pages'] >= st['remote-pages'] > 0, st
    # Now the survivor dies: every remote page must come from the copy.
    s2.kill()
    walk(g)
    st = g.qmp('x-query-split')
    assert g.running() == 'running'
    assert st['state'] == 'degraded', st
    verified(g, pid)


def uffd_faults(lab):
    """lab/inject/uffdfault.c built as a preloadable library."""
    so = lab.path('uffdfault.so')
    subprocess.run(['gcc', '-O2', '-Wall', '-shared', '-fPIC', '-o', so,
                    os.path.join(paths.TOP, 'lab', 'inject', 'uffdfault.c'),
                    '-ldl'], check=True)
    return so


def test_failed_placements_are_retried_or_woken(lab, require):
    """Placements the kernel fails neither stop a vCPU nor lose a page.

    B's QEMU runs with lab/inject/uffdfault.c preloaded: every 97th
    placement (UFFDIO_COPY or UFFDIO_ZEROPAGE) fails with EAGAIN, every
    89th with ENOMEM, which the pager retries, and every 211th with
    EFAULT, after which the faulting thread is woken and faults again.
    Before QEMU's patch 48 each of them left a vCPU waiting for ever.
    Through QMP only: the preload is set on the destination's QEMU.
    """
    require('split migration through qmp', split.missing('qmp'))
    so = uffd_faults(lab)
    a, b, c = split.make_hosts(lab, 'qmp', ('a', 'b', 'c'))
    srv = memserver.MemoryServer(c).start()
    g = split.make_guest('qmp', lab, a, 'vm-uffd', mem_mb=MEM_MB)
    pid = workload(g)

    g.migrate(b, [srv], LIMIT, dst_env={
        'LD_PRELOAD': so,
        'PUMA_UFFD_FAULTS': 'EAGAIN=97,ENOMEM=89,EFAULT=211'})
    walk(g, 3)
    st = g.qmp('x-query-split')
    log = g.qemu_log()
    print('on B:', st)
    print('\n'.join(line for line in log.splitlines()
                    if 'uffdfault' in line or 'place page' in line)[-3000:])
    assert st['state'] == 'active' and st['page-ins'] > 0, st
    for err in ('EAGAIN', 'ENOMEM', 'EFAULT'):
        assert 'uffdfault: %s for placement' % err in log, log[-3000:]
    assert 'retrying' in log, log[-3000:]
    assert 'cannot place page' in log, log[-3000:]
    assert g.running() == 'running'
    verified(g, pid)


def test_dead_mirror_is_replaced_by_another_host(lab, require):
    """The host of a mirror is gone: x-split-recover puts one on host E.

    The pager drops what E held of the guest, copies the remote pages onto
    it from the survivor, and reads nothing from it before; once the state
    is active again, the survivor dies too and every remote page comes
    from E.  Over QMP only: libvirt has no API for the command (an
    operator sends it with ``virsh qemu-monitor-command``).
    """
    require('split migration through qmp', split.missing('qmp'))
    g, pid, s1, s2 = mirrored('qmp', lab, 'vm8')
    s1.kill()
    lost, st = wait_server(g, s1.host, 'down')
    assert st['state'] == 'degraded', st
    # What cannot be done is refused, and changes nothing.
    with pytest.raises(ExecuteError, match='already mirrors'):
        g.qmp('x-split-recover', server=lost['uri'], uri=s2.uri)
    with pytest.raises(ExecuteError, match='is up'):
        g.qmp('x-split-recover', server=s2.uri,
              uri='tcp:%s:7999' % s2.host.addr)

    e = split.make_hosts(lab, 'qmp', ('e',))[0]
    s3 = memserver.MemoryServer(e).start()
    g.qmp('x-split-recover', server=lost['uri'], uri=s3.uri)
    st = split_state(g, 'active')
    assert [s['uri'] for s in st['servers']] == [s3.uri, s2.uri], st
    assert s3.stats()['total_pages'] >= st['remote-pages'] > 0, st
    s2.kill()
    walk(g)
    st = g.qmp('x-query-split')
    assert g.running() == 'running'
    assert st['state'] == 'degraded' and st['page-ins'] > 0, st
    verified(g, pid)


def server_info(g, host):
    """HOST's memory server in x-query-split (and the whole reply)."""
    st = g.qmp('x-query-split')
    for s in st['servers']:
        if host.addr in s['uri']:
            return s, st
    raise AssertionError('no server of host %s in %s' % (host.name, st))


def wait_server(g, host, want, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s, st = server_info(g, host)
        if s['state'] == want:
            return s, st
        time.sleep(0.5)
    raise AssertionError('server of host %s is not %s after %ds: %s'
                         % (host.name, want, timeout, st))


def wait_log(g, pattern, timeout=180):
    """A line of the guest's QEMU log matching PATTERN."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, g.qemu_log())
        if m:
            return m.group(0)
        time.sleep(0.5)
    raise AssertionError('no %r in the QEMU log of %s after %ds'
                         % (pattern, g.name, timeout))


@pytest.mark.parametrize('driver', profile.drivers('qmp'), indirect=True)
def test_mirror_never_serves_a_missed_page_out(driver, lab):
    """A server that missed page-outs is never read for those pages.

    C is made unreachable (its host resets connections to it; the
    process keeps its pages) while the guest rewrites its working set,
    so the pages that go out meanwhile reach D only and C keeps older
    copies of them.  Then D is made unreachable and C reachable again:
    only D holds the latest copies, and the pager must wait for D rather
    than read them from C.  While it waits, any QEMU thread touching
    such a page waits too, the monitor among them (a known limit, see
    docs/split-migration.md), so the wait is read from QEMU's log.
    """
    g, pid, s1, s2 = mirrored(driver, lab, 'vm8')
    c, d = s1.host, s2.host
    assert g.qmp('x-query-split')['state'] == 'active'
    s1.refuse()
    wait_server(g, c, 'down')
    walk(g, 1)
    s, st = server_info(g, c)
    print('C unreachable, the guest rewrote its working set:', st)
    assert st['state'] == 'degraded' and st['page-outs'] > 0, st
    assert s['stale-pages'] > 0, st

    s2.refuse()
    s1.refuse(False)
    line = wait_log(g, r'no memory server that is up holds the latest '
                       r'copy of page \S+ of VM \S+ \(it is on tcp:%s:'
                    % re.escape(d.addr))
    print('the pager waits for D:', line)
    # D comes back: the VM goes on, C gets the pages it missed copied
    # from D, and both hold the latest copy of every remote page again.
    s2.refuse(False)
    wait_state(g, 'running')
    walk(g, 1)
    st = split_state(g, 'active')
    assert [s['stale-pages'] for s in st['servers']] == [0, 0], st
    # From now on C alone must do.
    s2.kill()
    walk(g)
    assert g.running() == 'running'
    verified(g, pid)


def split_onto_one_server(driver, lab, name):
    """Guest NAME split-migrated from A to B, its pages on C's only server.

    Returns B, C, the guest and memverify's pid.
    """
    a, b, c = split.make_hosts(lab, driver, ('a', 'b', 'c'))
    srv = memserver.MemoryServer(c).start()
    g = split.make_guest(driver, lab, a, name, mem_mb=MEM_MB)
    pid = workload(g)
    g.migrate(b, [srv], LIMIT)
    walk(g, 1)
    return b, c, g, pid


@pytest.mark.parametrize('driver', profile.drivers('virsh'), indirect=True)
def test_lost_server_pauses_then_resumes(driver, lab):
    _b, c, g, pid = split_onto_one_server(driver, lab, 'vm3')
    g.watch_events()
    c.set_link(False)
    try:
        lost = g.wait_event('SPLIT_SERVER_LOST', timeout=180)
        assert re.search(r'"?paused"?\W+true', str(lost).lower()), lost
        assert g.running() == 'paused'
        if driver == 'virsh':
            # libvirt says why, in the state and in the lifecycle event.
            print(g.wait_lifecycle('Suspended Memory server lost'))
            assert g.state_reason() == 'paused (memory server lost)'
        time.sleep(3)
        # No silent progress on missing memory.
        assert g.running() == 'paused'
    finally:
        c.set_link(True)
    g.wait_event('SPLIT_SERVER_RECOVERED', timeout=300)
    wait_state(g, 'running')
    if driver == 'virsh':
        print(g.wait_lifecycle('Resumed Unpaused'))
        assert g.state_reason() == 'running (unpaused)'
    walk(g)
    assert g.qmp('x-query-split')['state'] == 'active'
    verified(g, pid)


def test_reply_to_an_older_get_is_refused(lab, require):
    """A server that answers a GET with an older reply is never believed.

    B pages from C's server through lab/inject/msreplay.py, which, armed
    once B's events are watched, after 20 more GETs answers one GET with
    the reply to an earlier GET of as many pages (its sequence number and
    data): what a server out of step, or a replaying man in the middle
    on a plain connection, sends.  QEMU must refuse it ("reply out of
    order"), treat the server as lost (paused: it is the only one),
    reconnect (the relay is honest from then on) and resume, every page
    verified.  Before QEMU's patch 65
    the sequence number was never looked at, and the earlier pages were
    copied into the ones the guest faulted on.  Through QMP only.
    """
    require('split migration through qmp', split.missing('qmp'))
    a, b, c = split.make_hosts(lab, 'qmp', ('a', 'b', 'c'))
    srv = memserver.MemoryServer(c).start()
    relay = replayer.ReplayingServer(srv).start()
    g = split.make_guest('qmp', lab, a, 'vm-replay', mem_mb=MEM_MB)
    pid = workload(g)
    g.migrate(b, [relay.uri], LIMIT)
    g.watch_events()
    relay.arm()
    # memverify keeps rewriting its working set: B pages on its own.
    deadline = time.monotonic() + 300
    while not relay.replayed() and time.monotonic() < deadline:
        time.sleep(1)
    print(relay.output()[-2000:])
    assert relay.replayed(), 'the relay never replayed a GET reply'
    # Paused and resumed, or (before patch 65) running on the older pages.
    walk(g)
    wait_state(g, 'running')
    st = g.qmp('x-query-split')
    print('on B:', st)
    verified(g, pid)
    print(wait_log(g, r'Memory server %s: reply out of order.*'
                   % re.escape(relay.uri)))
    lost = g.wait_event('SPLIT_SERVER_LOST', timeout=60)
    assert re.search(r'"?paused"?\W+true', str(lost).lower()), lost
    g.wait_event('SPLIT_SERVER_RECOVERED', timeout=60)
    assert st['state'] == 'active' and st['page-ins'] > 0, st


class InBackground:
    """G's QMP command CMD, run in a thread of its own (it may block)."""

    def __init__(self, g, cmd, **args):
        self.result = self.error = None
        self._thread = threading.Thread(target=self._run,
                                        args=(g, cmd, args), daemon=True)
        self._thread.start()

    def _run(self, g, cmd, args):
        # The lab's QMP client needs an event loop of this thread's own.
        asyncio.set_event_loop(asyncio.new_event_loop())
        try:
            self.result = g.qmp(cmd, **args)
        except Exception as e:  # noqa: B902 - reported by wait()
            self.error = e

    def running(self):
        return self._thread.is_alive()

    def wait(self, timeout):
        self._thread.join(timeout)
        assert not self._thread.is_alive(), 'still waiting after %ds' % \
            timeout
        assert self.error is None, self.error
        return self.result


# Both drivers in both profiles: libvirt's part and QEMU's monitor out of
# band are both what this test is about.
@pytest.mark.parametrize('driver', profile.DRIVERS, indirect=True)
def test_lost_server_while_the_main_loop_waits(driver, lab):
    """The main loop waits for a page of the lost server, with the BQL.

    pmemsave reads guest memory in QEMU's main loop, so it waits there for
    a remote page once C is cut off.  The pager must still say that the
    VM cannot go on (the event, and libvirt's state), and everything must
    go on once C is back.  Through QEMU's monitor, ``x-query-split`` out
    of band answers meanwhile (``paused``); libvirt has no out-of-band
    commands, and says so from the event.
    """
    b, c, g, pid = split_onto_one_server(driver, lab, 'vm-ml')
    assert g.qmp('x-query-split')['remote-pages'] > 0
    g.watch_events()
    c.set_link(False)
    try:
        dump = InBackground(g, 'pmemsave', val=0, size=MEM_MB << 20,
                            filename='/dev/null')
        lost = g.wait_event('SPLIT_SERVER_LOST', timeout=60)
        assert re.search(r'"?paused"?\W+true', str(lost).lower()), lost
        # What this test is about: the main loop still waits.
        assert dump.running(), 'pmemsave read no remote page'
        if driver == 'qmp':
            st = g.events.oob('x-query-split')
            assert st['state'] == 'paused', st
            assert dump.running(), 'pmemsave read no remote page'
        if driver == 'virsh':
            print(g.wait_lifecycle('Suspended Memory server lost'))
            assert g.state_reason() == 'paused (memory server lost)'
            # libvirt says so without asking QEMU, whose monitor waits.
            out = b.virsh('domstats', '--split', '--nowait', 'vm-ml')
            assert 'split.state=paused' in out, out
    finally:
        c.set_link(True)
    g.wait_event('SPLIT_SERVER_RECOVERED', timeout=300)
    dump.wait(300)
    wait_state(g, 'running')
    walk(g)
    verified(g, pid)


def under_way(g, timeout=120):
    """G's migration is active and has sent some RAM; its progress."""
    deadline = time.monotonic() + timeout
    st = g.migration_progress()
    while st['status'] not in ('completed', 'failed', 'cancelled'):
        if st['status'] == 'active' and st['ram_transferred'] > 0:
            return st
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
        st = g.migration_progress()
    raise AssertionError('migration of %s not active with RAM sent (within '
                         '%ds): %s' % (g.name, timeout, st))


@pytest.mark.parametrize('how', ['cancel', 'kill-destination'])
@pytest.mark.parametrize('driver', profile.drivers('virsh'), indirect=True)
def test_failed_migration_keeps_source(driver, lab, how):
    a, b, c = split.make_hosts(lab, driver, ('a', 'b', 'c'))
    srv = memserver.MemoryServer(c).start()
    g = split.make_guest(driver, lab, a, 'vm4', mem_mb=MEM_MB)
    pid = workload(g)
    # Slow enough (16 MiB/s) to stay in the middle once caught there.
    g.migrate_start(b, [srv], LIMIT, bandwidth=16)
    st = under_way(g)
    print('caught under way: %s, %d bytes of RAM sent'
          % (st['status'], st['ram_transferred']))
    if how == 'cancel':
        g.cancel()
    else:
        g.kill_destination()
    g.wait_source_settled()
    assert g.host is a
    assert g.running() == 'running'
    walk(g)
    assert g.qemu_left_on(b) == []
    assert server_empty(srv)['total_pages'] == 0
    assert srv.alive()
    verified(g, pid)


def bad_qmp(g, b, uris, match):
    with pytest.raises(errors.LabError, match=match):
        g.migrate_start(b, uris, LIMIT)
        g.migrate_wait(timeout=300)


def bad_virsh(g, b, argv, match):
    with pytest.raises(errors.LabError, match=match):
        g.host.virsh(*(argv + ['vm5', b.uri]), timeout=300)


@pytest.mark.parametrize('driver', profile.drivers('qmp'), indirect=True)
def test_bad_parameters_leave_the_guest_alone(driver, lab):
    a, b, c = split.make_hosts(lab, driver, ('a', 'b', 'c'))
    srv = memserver.MemoryServer(c).start()
    g = split.make_guest(driver, lab, a, 'vm5', mem_mb=MEM_MB)
    pid = workload(g)
    nobody = 'tcp:%s:7999' % c.addr   # the host is up, no server there
    if driver == 'qmp':
        bad_qmp(g, b, ['tcp:no-such-host'], 'no-such-host')
        bad_qmp(g, b, [nobody], '(?i)%s|refused|connect' % c.addr)
        bad_qmp(g, b, [srv.uri, srv.uri, srv.uri], 'x-split-sub-uris')
    else:
        base = ['migrate', '--live', '--p2p', '--split']
        bad_virsh(g, b, base + ['--split-sub-host-uri', 'tcp:no-such-host',
                                '--split-main-limit', str(LIMIT)],
                  'no-such-host')
        bad_virsh(g, b, base + ['--split-sub-host-uri', nobody,
                                '--split-main-limit', str(LIMIT)],
                  '(?i)%s|refused|connect' % c.addr)
        bad_virsh(g, b, base + ['--split-mirror-uri', srv.uri,
                                '--split-main-limit', str(LIMIT)],
                  'split-sub-host-uri')
    assert g.host is a
    assert g.running() == 'running'
    walk(g)
    assert g.qemu_left_on(b) == []
    assert server_empty(srv)['total_pages'] == 0
    verified(g, pid)


# What libvirt refuses with --split (docs/split-migration.md), and who:
# option and expected error.
REFUSED = {
    # libvirtd: QEMU's x-split-main-limit 0 means "no limit", libvirt's
    # split.main-limit is the operator's limit and must not be 0.
    'zero-limit': (['--split-main-limit', '0'], 'split.main-limit'),
    # virsh itself: the memory server takes the pages post-copy would
    # fetch later.
    'postcopy': (['--split-main-limit', str(LIMIT), '--postcopy'],
                 '--split.*--postcopy.*mutually exclusive'),
    # libvirtd: QEMU classifies pages in the one migration thread.
    'parallel': (['--split-main-limit', str(LIMIT), '--parallel'],
                 'split migration is not supported with parallel'),
    # libvirtd: QEMU splits only a stream to the destination over a
    # socket, and a tunnelled one goes through libvirtd.
    'tunnelled': (['--split-main-limit', str(LIMIT), '--tunnelled'],
                  'split migration is not supported with tunnelled'),
}


def test_virsh_refusals(lab, require):
    """Each refused combination: a clear error, the guest left alone."""
    require('split migration through virsh', split.missing('virsh'))
    a, b, c = split.make_hosts(lab, 'virsh', ('a', 'b', 'c'))
    srv = memserver.MemoryServer(c).start()
    g = split.make_guest('virsh', lab, a, 'vm6', mem_mb=MEM_MB)
    for what, (options, match) in sorted(REFUSED.items()):
        with pytest.raises(errors.LabError, match=match):
            g.host.virsh('migrate', '--live', '--p2p', '--split',
                         '--split-sub-host-uri', srv.uri, *options,
                         'vm6', b.uri, timeout=300)
        print('refused %s' % what)
        assert g.running() == 'running'
        assert g.qemu_left_on(b) == []
    assert srv.stats()['total_pages'] == 0


def test_split_over_tls(lab, require):
    """``virsh migrate --tls --split``, with x509 certificates.

    The stream and the memory server go over TLS with the hosts'
    certificates (libvirt patch 14).

    A memory server whose certificate another authority signed is
    refused first: the migration fails and the guest runs on where it
    was.  Then the lab's own server: the destination's pager reaches it
    with the client credentials libvirt made for it, a plain client gets
    nothing from it, and the guest's memory is intact.  (libvirt resets
    x-split-tls-creds when the migration ends; the pager keeps the
    credentials it took.)
    """
    require('split migration through virsh', split.missing('virsh'))
    ca = tls.Authority(lab.path('ca'))
    a, b, c = split.make_hosts(lab, 'virsh', ('a', 'b', 'c'), authority=ca)
    other = tls.Authority(lab.path('ca-other'), 'Not the lab CA')
    g = split.make_guest('virsh', lab, a, 'vm9', mem_mb=MEM_MB)
    # x509 certificates name hosts: each server serves this one VM.
    rogue = memserver.MemoryServer(
        c, port=7801, x509_dir=other.host_dir(lab.path('tls-rogue'), 'c',
                                              c.addr), vm=g.uuid).start()
    srv = memserver.MemoryServer(c, x509_dir=c.tls_dir, vm=g.uuid).start()
    pid = workload(g)

    g.migrate_start(b, [rogue], LIMIT, tls=True)
    err = g.wait_source_settled(timeout=300)
    print('a server of another CA is refused:', err)
    assert re.search('(?i)certificate', err), err
    assert g.host is a
    assert g.running() == 'running'
    assert g.qemu_left_on(b) == []
    assert rogue.stats()['puts'] == 0

    g.migrate(b, [srv], LIMIT, tls=True)
    assert g.host is b
    # The server speaks TLS only and wants a client certificate of the
    # lab's authority: whatever it counts came over TLS from A and B.
    assert 'listening on %s:%d (TLS)' % (c.addr, srv.port) in srv.output()
    walk(g, 1)
    st = split_state(g, 'active')
    print('over TLS:', st)
    assert st['remote-pages'] > 0 and st['page-ins'] > 0, st
    counters = srv.stats()
    assert counters['puts'] > 0 and counters['gets'] > 0, counters
    # Without TLS the server answers nothing.
    with pytest.raises(errors.LabError):
        memserver.stats(c, srv.port, timeout=5)
    walk(g)
    verified(g, pid)
