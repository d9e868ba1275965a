# SPDX-License-Identifier: Apache-2.0
"""The Puma Nova driver carries out real split migrations in the lab.

Hosts A (source) and B (main host) run the patched libvirtd, C (sub host)
only its namespace. Each host has its own Puma driver
(``PumaLibvirtDriver``, in a process inside the host's namespace, see
puma_lab/nova_agent.py): B's destination check plans the split and has
the memory server started on C by C's driver (``MemoryServers``, a real
``qemu-memory-server``); A's ``_live_migration_operation`` builds the
split parameters and migrates through Nova's own code
(``Guest.migrate`` -> ``migrateToURI3`` of libvirt-python on A's
libvirtd). The guest runs memverify throughout. The Puma scheduler is a
stand-in (puma_lab.nova_compute.Ledger); there is no Nova database, API
or message bus.
"""

import json
import os
import re
import time
import uuid

import pytest

from puma_lab import errors
from puma_lab import memserver
from puma_lab import netns
from puma_lab import nova_compute
from puma_lab import paths
from puma_lab import split
from puma_lab import tls

MEM_MB = 512
WSS_MB = 160          # as test_split.py: memverify's working set
RATE = 32
LIMIT_MB = 128        # main-host resident limit: below the working set
# B is told it has this much free RAM: the guest does not fit, the
# limit does.
B_FREE_MB = 256
PORTS = (7900, 7909)
POSTCOPY = 1 << 15    # VIR_MIGRATE_POSTCOPY


@pytest.fixture
def stack(require):
    require('split migration through the Nova driver',
            split.missing('virsh') or nova_compute.missing())


def cloud_of(lab, source_options=None, native_tls=False, sub_options=None):
    """Hosts A, B, C and their drivers.

    With NATIVE_TLS, every host has certificates of one lab authority and
    ``[libvirt] live_migration_with_native_tls``; C's memory servers use
    C's certificates.
    """
    ca = tls.Authority(lab.path('ca')) if native_tls else None
    a, b = split.make_hosts(lab, 'virsh', ('a', 'b'), authority=ca)
    c, = split.make_hosts(lab, 'qmp', ('c',), authority=ca)
    ledger = nova_compute.Ledger({'sub_host': 'c', 'main_limit_mb': LIMIT_MB,
                                  'remote_mb': MEM_MB - LIMIT_MB})
    cloud = nova_compute.Cloud(ledger)
    # Nova's in-process messaging driver: nothing leaves an agent.
    common = {'transport_url': 'fake:/', 'debug': True, 'use_stderr': True,
              'libvirt.virt_type': 'qemu', 'puma.report_interval': 0}
    if native_tls:
        common['libvirt.live_migration_with_native_tls'] = True

    def tls_dir(h):
        return {'puma.memory_server_tls_x509_dir': h.tls_dir} \
            if native_tls else {}
    for h in (a, b):
        cloud.add(h, **dict(common, **{
            'libvirt.connection_uri': h.uri,
            'instances_path': lab.path('nova-%s' % h.name),
            'my_ip': h.addr}, **tls_dir(h),
            **((source_options or {}) if h is a else {})))
    cloud.add(c, **dict(common, **{
        'instances_path': lab.path('nova-c'), 'my_ip': c.addr,
        'puma.memory_server_binary': paths.memory_server(),
        'puma.memory_server_port_min': PORTS[0],
        'puma.memory_server_port_max': PORTS[1]}, **tls_dir(c),
        **(sub_options or {})))
    return (a, b, c), cloud


def instance_of(g):
    return {'uuid': g.host.virsh('domuuid', g.name).strip(),
            'memory_mb': MEM_MB, 'vcpus': 2, 'host': 'a',
            'extra_specs': {'puma:split': 'allowed'}}


def migration_of(b):
    return {'migration_uuid': str(uuid.uuid4()), 'source': 'a',
            'dest': 'b', 'dest_addr': b.addr}


def servers_on(host):
    """qemu-memory-server processes in HOST's namespace."""
    found = []
    for pid in netns.pids(host.ns):
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                argv = f.read().split(b'\0')
        except OSError:
            continue
        if argv[0].endswith(b'qemu-memory-server'):
            found.append(pid)
    return found


def verified(g, pid):
    res = split.stop_workload(g, pid)
    assert res.rc == 0 and 'corrupt=0' in res.out, res
    return res


def domstats(host, name):
    out = host.virsh('domstats', '--split', name)
    return {k.strip(): v.strip() for k, _, v in
            (line.partition('=') for line in out.splitlines() if '=' in line)}


# Nova's [libvirt] options on the source: the defaults, and post-copy
# permitted (a common setting), which adds VIR_MIGRATE_POSTCOPY to the
# flags of every live migration; libvirt refuses it with a split.  With
# it, auto-converge permitted too: Nova leaves it out for post-copy, the
# driver puts it in for a split, which has no post-copy.
SOURCE_OPTIONS = {
    'defaults': {},
    'post-copy-permitted': {'libvirt.live_migration_permit_post_copy': True,
                            'libvirt.live_migration_permit_auto_converge':
                                True},
    # Every host with live_migration_with_native_tls (see cloud_of).
    'native-tls': {},
}

# The flags Nova computes for each (docs/nova-compute.md quotes them):
# VIR_MIGRATE_LIVE | PEER2PEER | PERSIST_DEST | UNDEFINE_SOURCE, and
# VIR_MIGRATE_POSTCOPY when post-copy is permitted, VIR_MIGRATE_TLS with
# native TLS.
NOVA_FLAGS = {'defaults': 0x1b, 'post-copy-permitted': 0x801b,
              'native-tls': 0x1001b}
# What the driver gives libvirt: post-copy out, VIR_MIGRATE_SPLIT in, and
# VIR_MIGRATE_AUTO_CONVERGE where permitted.
LIBVIRT_FLAGS = {'defaults': 0x20001b, 'post-copy-permitted': 0x20201b,
                 'native-tls': 0x21001b}


@pytest.mark.parametrize('source', sorted(SOURCE_OPTIONS))
def test_driver_split_migration(stack, lab, source):
    native_tls = source == 'native-tls'
    (a, b, c), cloud = cloud_of(lab, SOURCE_OPTIONS[source], native_tls)
    g = split.make_guest('virsh', lab, a, 'vm1', mem_mb=MEM_MB)
    inst = instance_of(g)
    pid = split.start_workload(g, WSS_MB, RATE)
    mig = migration_of(b)

    plan = cloud.call('b', 'plan', instance=inst,
                      migration_uuid=mig['migration_uuid'],
                      free_mb=B_FREE_MB)
    assert plan['sub_host'] == 'c' and plan['main_limit_mb'] == LIMIT_MB
    assert plan['sub_uri'].startswith('tcp:%s:' % c.addr), plan
    # b named the instance's host to the scheduler (API 1.5).
    assert cloud.ledger.sources == {inst['uuid']: 'a'}, cloud.ledger.sources
    servers = cloud.call('c', 'memory_servers')
    assert list(servers) == [inst['uuid']], servers
    srv_pid = servers[inst['uuid']]['pid']
    assert servers_on(c) == [srv_pid]
    cloud.call('b', 'pre_live_migration', instance=inst)

    flags = cloud.call('a', 'migrate', instance=inst, migration=mig)
    # Nova's own flags for this source; the driver leaves post-copy out.
    assert flags['flags'] == NOVA_FLAGS[source], hex(flags['flags'])
    assert bool(flags['flags'] & POSTCOPY) == (source ==
                                               'post-copy-permitted')
    logged = re.findall(r'Split migration of \S+: libvirt migration flags '
                        r'(0x[0-9a-f]+)', cloud.agents['a'].output())
    assert logged == [hex(LIBVIRT_FLAGS[source])], logged
    assert cloud.ledger.entries[inst['uuid']]['state'] == 'running'
    g.host = b
    assert b.virsh('domstate', 'vm1').strip() == 'running'
    assert 'vm1' not in a.virsh('list', '--all', '--name').split()
    split.walk(g)
    st = g.qmp('x-query-split')
    assert st['state'] == 'active', st
    assert st['remote-pages'] > 0 and st['page-ins'] > 0, st
    assert [(s['uri'], s['state']) for s in st['servers']] == [
        (plan['sub_uri'], 'up')], st
    stats = domstats(b, 'vm1')
    assert int(stats['split.remote_bytes']) > 0, stats
    assert int(stats['split.page_ins']) > 0, stats
    port = int(plan['sub_uri'].rsplit(':', 1)[1])
    if native_tls:
        # C's driver started it TLS-only: a plain client gets nothing,
        # so the pages above came over TLS.
        with open('/proc/%d/cmdline' % srv_pid, 'rb') as f:
            argv = f.read().decode().split('\0')
        assert '--tls-creds' in argv and any(
            a.startswith('tls-creds-x509,') and 'verify-peer=on' in a
            for a in argv), argv
        # ... and admits A and B only (their certificates' names).
        assert '--tls-authz' in argv, argv
        assert admitted(c, inst) == ['CN=a', 'CN=b']
        with pytest.raises(errors.LabError):
            memserver.stats(c, port, timeout=5, vm=inst['uuid'])
    else:
        assert memserver.stats(c, port, vm=inst['uuid'])['total_pages'] > 0
    verified(g, pid)
    print('flags=%#x x-query-split=%s domstats=%s'
          % (flags['flags'], st, stats))

    # Nova's post-migration steps, then the instance is deleted on B:
    # the driver releases the split and C's driver stops the server.
    cloud.call('b', 'post_at_destination', instance=inst)
    cloud.call('a', 'post_at_source', instance=inst)
    assert cloud.ledger.entries[inst['uuid']]['state'] == 'done'
    assert servers_on(c) == [srv_pid]
    cloud.call('b', 'delete', instance=inst)
    assert b.virsh('list', '--all', '--name').split() == []
    assert cloud.ledger.entries == {}
    assert cloud.call('c', 'memory_servers') == {}
    assert servers_on(c) == []


def admitted(c, inst):
    """The names the instance's memory server on C admits."""
    path = lab_path_of(c, 'memory-server-%s.authz.json' % inst['uuid'])
    with open(path) as f:
        rules = json.load(f)
    assert rules['policy'] == 'deny', rules
    return sorted(r['match'] for r in rules['rules']
                  if r['policy'] == 'allow')


def lab_path_of(c, name):
    return os.path.join(c.lab.path('nova-c'), 'puma', name)


def test_driver_tls_admits_only_the_split_hosts(stack, lab):
    """A TLS memory server that admits other hosts than A and B.

    C's driver is told that hosts' certificates are named
    ``CN=HOST.elsewhere``: its server for the instance admits names that
    A's and B's certificates do not have, although the lab's authority
    signed them. The migration fails in QEMU's TLS handshake with it, the
    guest runs on in A, nothing is left on B.
    """
    (a, b, c), cloud = cloud_of(
        lab, native_tls=True,
        sub_options={'puma.memory_server_client_dn': 'CN={host}.elsewhere'})
    g = split.make_guest('virsh', lab, a, 'vm3', mem_mb=MEM_MB)
    inst = instance_of(g)
    pid = split.start_workload(g, WSS_MB, RATE)
    mig = migration_of(b)
    cloud.call('b', 'plan', instance=inst,
               migration_uuid=mig['migration_uuid'], free_mb=B_FREE_MB)
    assert admitted(c, inst) == ['CN=a.elsewhere', 'CN=b.elsewhere']
    cloud.call('b', 'pre_live_migration', instance=inst)
    with pytest.raises(nova_compute.AgentError) as err:
        cloud.call('a', 'migrate', instance=inst, migration=mig)
    print('migration failed: %s' % err.value)
    assert err.value.type == 'libvirtError', err.value
    assert a.virsh('domstate', 'vm3').strip() == 'running'
    assert b.virsh('list', '--all', '--name').split() == []
    cloud.call('a', 'rollback_at_source', instance=inst)
    assert cloud.call('c', 'memory_servers') == {}
    split.walk(g)
    verified(g, pid)


@pytest.mark.parametrize('fault', ['killed', 'hung'])
def test_driver_starts_a_dead_memory_server_again(stack, lab, fault):
    """C's driver checks its memory servers (here every second).

    The instance's server on C is killed, or hung (stopped: its process
    and its listening port stay), after B planned the split: C's driver
    starts it again, empty, on the same port and with the same size, the
    hung one once its watchdog (here 3 s) expired; the split migration
    through it then goes as usual.
    """
    (a, b, c), cloud = cloud_of(
        lab, sub_options={'puma.memory_server_check_interval': 1,
                          'puma.memory_server_watchdog_timeout': 3})
    g = split.make_guest('virsh', lab, a, 'vm4', mem_mb=MEM_MB)
    inst = instance_of(g)
    pid = split.start_workload(g, WSS_MB, RATE)
    mig = migration_of(b)
    plan = cloud.call('b', 'plan', instance=inst,
                      migration_uuid=mig['migration_uuid'],
                      free_mb=B_FREE_MB)
    port = int(plan['sub_uri'].rsplit(':', 1)[1])
    srv_pid, = servers_on(c)
    if fault == 'hung':
        # Only a server heard once is held to the watchdog: the real
        # qemu-memory-server says WATCHDOG=1 from its main loop.
        deadline = time.monotonic() + 30
        while not cloud.call('c', 'memory_servers')[inst['uuid']].get(
                'watchdog'):
            assert time.monotonic() < deadline, 'no WATCHDOG=1 heard'
            time.sleep(0.5)
        netns.run('kill', '-STOP', str(srv_pid))
    else:
        netns.run('kill', '-KILL', str(srv_pid))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        server = cloud.call('c', 'memory_servers')[inst['uuid']]
        if server.get('restarts'):
            break
        time.sleep(0.5)
    print('memory server on C after the %s:' % fault, server)
    assert server['restarts'] == 1, server
    assert server.get('hangs', 0) == (1 if fault == 'hung' else 0), server
    assert (server['port'], server['size_mb']) == (port, MEM_MB - LIMIT_MB)
    assert server['pid'] != srv_pid and servers_on(c) == [server['pid']]
    assert 'is gone: starting it again' in cloud.agents['c'].output()
    if fault == 'hung':
        assert 'is hung: no watchdog notification' in \
            cloud.agents['c'].output()

    cloud.call('b', 'pre_live_migration', instance=inst)
    cloud.call('a', 'migrate', instance=inst, migration=mig)
    g.host = b
    assert b.virsh('domstate', 'vm4').strip() == 'running'
    split.walk(g)
    st = g.qmp('x-query-split')
    assert st['state'] == 'active' and st['remote-pages'] > 0, st
    assert [(s['uri'], s['state']) for s in st['servers']] == [
        (plan['sub_uri'], 'up')], st
    assert memserver.stats(c, port, vm=inst['uuid'])['total_pages'] > 0
    verified(g, pid)
    cloud.call('b', 'post_at_destination', instance=inst)
    cloud.call('a', 'post_at_source', instance=inst)
    cloud.call('b', 'delete', instance=inst)
    assert cloud.call('c', 'memory_servers') == {}
    assert servers_on(c) == []


def test_driver_rollback_with_a_dead_server(stack, lab):
    # Without the checks, which would start the server again.
    (a, b, c), cloud = cloud_of(
        lab, sub_options={'puma.memory_server_check_interval': 0})
    g = split.make_guest('virsh', lab, a, 'vm2', mem_mb=MEM_MB)
    inst = instance_of(g)
    pid = split.start_workload(g, WSS_MB, RATE)
    mig = migration_of(b)
    plan = cloud.call('b', 'plan', instance=inst,
                      migration_uuid=mig['migration_uuid'],
                      free_mb=B_FREE_MB)
    srv_pid, = servers_on(c)
    # The sub host's memory server dies before the migration starts.
    netns.run('kill', '-KILL', str(srv_pid))
    deadline = time.monotonic() + 30
    while servers_on(c) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert servers_on(c) == []

    with pytest.raises(nova_compute.AgentError) as err:
        cloud.call('a', 'migrate', instance=inst, migration=mig)
    assert err.value.type == 'libvirtError', err.value
    print('migration failed: %s' % err.value)
    assert a.virsh('domstate', 'vm2').strip() == 'running'
    assert b.virsh('list', '--all', '--name').split() == []
    assert cloud.call('c', 'memory_servers') == {inst['uuid']: {
        'pid': srv_pid, 'port': int(plan['sub_uri'].rsplit(':', 1)[1]),
        'size_mb': MEM_MB - LIMIT_MB, 'tls': False}}

    cloud.call('a', 'rollback_at_source', instance=inst)
    assert cloud.call('c', 'memory_servers') == {}
    assert cloud.ledger.entries == {}
    assert cloud.call('b', 'split_plan',
                      instance_uuid=inst['uuid']) is None
    assert ('split_state', {'instance_uuid': inst['uuid'],
                            'state': 'failed'}) in cloud.ledger.calls
    split.walk(g)
    verified(g, pid)
