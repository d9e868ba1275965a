# SPDX-License-Identifier: Apache-2.0
"""The lab cloud (``./lab/cloud``) is a real OpenStack that works.

One cloud for the session (the ``cloud`` fixture of lab/tests/conftest.py:
puma_lab.cloud brings it up, as ``./lab/cloud up`` does, in about 1.5 to
2 minutes on 2 cores), shared with test_cloud_faults.py:
Keystone, Placement, Glance, Neutron with ML2/OVN, Nova's API,
conductor and scheduler on the control host, nova-compute with the Puma
driver on hosts a, b and c. The tests use the standard ``openstack``
client with the cloud's clouds.yaml, in the control namespace.

It is in the default ``./lab/test`` run (tox env ``cloud``, beside the
lab env): it fits the budget. Besides: puma-api behind Keystone and
Puma's tempest plugin against it, and split migrations through
``openstack server migrate`` (b modelled as a small host, the memory
server on c started by c's nova-compute): one that completes and then
moves whole back to a, one whose memory server dies before the
switchover, one aborted with ``openstack server migration abort``, one
ended with ``openstack server migration force complete``.  Every server
runs a checksummed working set (the guest init's ``puma.workset``,
reported on the serial console, which the tests read with ``openstack
console log show``, and read through the guest agent too); the helpers
are in puma_lab.cloud_checks; Horizon, control-plane faults and
Shoot4U have test modules of their own, and so has networking
(test_zy_cloud_network.py: servers with ports bound by Neutron's OVN
driver); the servers here are created with ``--nic none``
(docs/lab-cloud.md says why).
"""

import io
import json
import os
import time

import pytest

from puma_lab import cloud as cloud_mod
from puma_lab import cloud_checks as cc
from puma_lab import cloud_monitoring
from puma_lab import errors
from puma_lab import tempest


def test_services_catalog_and_computes(cloud):
    catalog = {e['Type']: e for e in cc.osc(cloud, 'catalog', 'list')}
    assert sorted(catalog) == ['compute', 'identity', 'image',
                               'memory-pool', 'network', 'placement'], \
        catalog
    services = {(s['Binary'], s['Host']): s
                for s in cc.osc(cloud, 'compute', 'service', 'list')}
    want = [('nova-conductor', 'ctl'), ('nova-scheduler', 'ctl')] + [
        ('nova-compute', h) for h in cloud_mod.COMPUTES]
    assert sorted(services) == sorted(want), services
    assert all(s['State'] == 'up' and s['Status'] == 'enabled'
               for s in services.values()), services
    # Puma's service of each compute host runs beside nova-compute.
    assert [h for h in cloud_mod.COMPUTES
            if cloud.pid('puma-compute-agent-%s' % h) is None] == []
    hypervisors = {h['Hypervisor Hostname']: h
                   for h in cc.osc(cloud, 'hypervisor', 'list')}
    assert sorted(hypervisors) == sorted(cloud_mod.COMPUTES)
    assert {h['Hypervisor Type'] for h in hypervisors.values()} == {'QEMU'}
    assert {h['State'] for h in hypervisors.values()} == {'up'}
    # What Nova asks Neutron before a live migration (the port binding
    # extension, nova.network.neutron.API.has_port_binding_extension).
    aliases = {e['Alias'] for e in cc.osc(cloud, 'extension', 'list',
                                          '--network')}
    assert {'binding', 'binding-extended', 'port-security'} <= aliases
    # The demo project's user gets a token and sees no admin API.
    assert cc.osc(cloud, 'token', 'issue', project='demo')['project_id'] == \
        cloud.state['projects']['demo_project']


def test_puma_api_behind_keystone(cloud):
    """``openstack puma`` against the real puma-api, Keystone in front."""
    for cmd in (('ledger', 'list'), ('pair', 'list'),
                ('memory-server', 'list')):
        assert cc.osc(cloud, 'puma', *cmd) == [], cmd
    # Every compute reports, with what the host's KSM saves (the lab's
    # hosts share this kernel's /sys/kernel/mm/ksm): microversion 1.2;
    # and what exclusive caching saves: 1.3.

    def hosts():
        found = {h['Name']: h for h in cc.osc(cloud, 'puma', 'host', 'list')}
        return sorted(found) == sorted(cloud_mod.COMPUTES) and found
    found = cc.wait_for('every compute in puma host list', hosts, 180)
    # A kernel without KSM (or before 6.10's ksm_zero_pages) saves
    # nothing there: 0, as the driver reads it.
    ksm = {}
    for name in ('run', 'pages_sharing', 'ksm_zero_pages'):
        path = '/sys/kernel/mm/ksm/' + name
        with open(path) if os.path.exists(path) else io.StringIO('0') as f:
            ksm[name] = int(f.read())
    ksm_mb = (ksm['pages_sharing'] + ksm['ksm_zero_pages']) * \
        os.sysconf('SC_PAGE_SIZE') >> 20
    print('KSM (run=%d) saves %d MiB here; hosts report %s' % (
        ksm['run'], ksm_mb, {n: h['Merged MB'] for n, h in found.items()}))
    for h in found.values():
        assert isinstance(h['Merged MB'], int) and h['Merged MB'] >= 0, h
        # Microversion 1.3 (report 1.3 over RPC 1.8, migration 0004): no
        # server here has exclusive caching, so nothing is saved.
        assert h['Cache Saved MB'] == 0, h
        if ksm['run'] == 0:
            # KSM not scanning: its counters stood still since the report.
            assert h['Merged MB'] == ksm_mb, h
    # Bad input: a clear 4xx, nothing changed.
    with pytest.raises(errors.LabError) as e:
        cc.osc(cloud, 'puma', 'ledger', 'release', '424242')
    assert 'puma-api answered 404' in str(e.value), e.value
    # A member of the demo project is not an admin: refused.
    with pytest.raises(errors.LabError) as e:
        cc.osc(cloud, 'puma', 'ledger', 'list', project='demo')
    assert 'puma-api answered 403' in str(e.value), e.value
    # Without a token, puma-api answers 401 (keystonemiddleware).
    with pytest.raises(errors.LabError) as e:
        cloud.run(['curl', '-sf', cloud.url('puma', '/v1/ledger')])
    assert 'failed (22)' in str(e.value), e.value
    # The computes' Puma drivers report to puma-scheduler over RabbitMQ
    # (every REPORT_INTERVAL seconds): puma-api lists their hosts.
    token = cc.osc(cloud, 'token', 'issue')['id']
    deadline = time.monotonic() + 6 * cloud_mod.REPORT_INTERVAL
    while True:
        hosts = json.loads(cloud.run(
            ['curl', '-sf', '-H', 'X-Auth-Token: ' + token,
             cloud.url('puma', '/v1/hosts')]))['hosts']
        names = sorted(h['name'] for h in hosts)
        if names == sorted(cloud_mod.COMPUTES) or \
                time.monotonic() > deadline:
            break
        time.sleep(2)
    assert names == sorted(cloud_mod.COMPUTES), hosts


def test_tempest_plugin_against_puma_api(cloud, require):
    """Puma's tempest plugin (puma_tempest_plugin), run by tempest itself.

    Its API tests of puma-api as the cloud's admin and as a member of a
    project tempest creates (dynamic credentials): lists and their
    fields, paging from microversion 1.1, refusals (400, 403, 404, 406).
    """
    require('tempest', tempest.missing())
    result = tempest.run(cloud, cloud_mod.PASSWORD, cloud_mod.REGION)
    print(result['out'][-1500:])
    assert (result['passed'], result['failed'], result['skipped']) == \
        (9, 0, 0), result['out'][-3000:]


def test_image_upload_server_create_and_live_migration(cloud):
    """Glance takes the guest image, Nova boots it and live-migrates it."""
    root = cc.guest_image(cloud)
    assert root['status'] == 'active', root
    # No puma:split extra spec: a split asks puma-scheduler for a plan,
    # and this profile has no puma-scheduler yet.
    cc.osc(cloud, 'flavor', 'create', '--ram', '512', '--vcpus', '1', '--disk',
           '1', cc.FLAVOR)

    t0 = time.monotonic()
    server = cc.osc(cloud, 'server', 'create', '--flavor', cc.FLAVOR,
                    '--image', cc.IMAGE, *cc.nic_args(), '--wait', 'vm1')
    took = time.monotonic() - t0
    assert server['status'] == 'ACTIVE', server
    host = server['OS-EXT-SRV-ATTR:host']
    assert host in cloud_mod.COMPUTES, server
    print('server ACTIVE on %s in %.1f s' % (host, took))
    # The guest's own init (lab/guest/puma-init) writes to the serial
    # console: the kernel, initrd and root file system from Glance booted.
    deadline = time.monotonic() + cc.SERVER_TIMEOUT
    log = ''
    while 'puma-guest:' not in log and time.monotonic() < deadline:
        time.sleep(2)
        log = cc.osc(cloud, 'console', 'log', 'show', 'vm1', fmt=False)
    assert 'puma-guest:' in log, log
    print('console: %s' % log.strip()[-300:])
    rounds = cc.verified(cloud, 'vm1')
    name = server['OS-EXT-SRV-ATTR:instance_name']
    assert cc.domains(cloud, host) == [name]
    # The guest agent answers on the channel Nova made for the image's
    # hw_qemu_guest_agent=yes, at the socket path Nova chose.
    xml = cc.virsh(cloud, host, 'dumpxml', name)
    assert ("/var/lib/libvirt/qemu/org.qemu.guest_agent.0.%s.sock" % name
            in xml), xml
    assert cc.agent(cloud, host, name, 'guest-ping') == {}
    seen = cc.agent_workset(cloud, host, name)
    print('working set through the guest agent on %s: %s' % (host, seen))
    assert seen['state'] == 'running', seen

    # A live migration through the API (Nova asks Neutron for the port
    # binding extension and the ports, the Puma driver runs in both
    # nova-computes, libvirt copies the disk: no shared storage).
    dest = [h for h in cloud_mod.COMPUTES if h != host][0]
    t0 = time.monotonic()
    cc.osc(cloud, '--os-compute-api-version', '2.30', 'server', 'migrate',
           '--live-migration', '--host', dest, '--wait', 'vm1', fmt=False)
    took = time.monotonic() - t0
    moved = cc.osc(cloud, 'server', 'show', 'vm1')
    migs = cc.osc(cloud, 'server', 'migration', 'list', '--server', 'vm1')
    print('live migration %s -> %s in %.1f s: %s'
          % (host, dest, took, migs))
    assert [(m['Source Compute'], m['Dest Compute'], m['Status'],
             m['Type']) for m in migs] == [
        (host, dest, 'completed', 'live-migration')], migs
    assert moved['status'] == 'ACTIVE', moved
    assert moved['OS-EXT-SRV-ATTR:host'] == dest, moved
    assert cc.domains(cloud, dest) == [name]
    assert cc.domains(cloud, host) == []
    # The working set checked out after the move, and goes on; the agent
    # answers on the destination's channel.
    rounds = cc.verified(cloud, 'vm1', after=rounds)
    seen = cc.agent_workset(cloud, dest, name)
    print('working set through the guest agent on %s: %s' % (dest, seen))
    assert seen['state'] == 'running', seen
    assert int(seen['rounds']) >= rounds, (seen, rounds)

    cc.osc(cloud, 'server', 'delete', '--wait', 'vm1', fmt=False)
    assert cc.osc(cloud, 'server', 'list') == []


def test_split_migration_through_the_api(cloud, small_b):
    """``openstack server migrate --live-migration`` splits a server.

    A 512 MiB server whose flavor allows splitting moves from host a to
    host b, which Nova's libvirt driver measures with MAIN_FREE_MB free
    (modelled, see Cloud.model_free_memory): b's Puma driver asks
    puma-scheduler for a plan, c's nova-compute starts the memory server,
    a's libvirtd migrates with the split parameters, and the guest pages
    from c afterwards; its working set checks out.  A second move takes
    it back to a whole, which ends the split.  Deleting the server
    releases all of it.
    """
    uuid, name, rounds = cc.split_server(cloud, 'vm2')
    t0 = time.monotonic()
    cc.migrate(cloud, 'vm2', small_b)
    took = time.monotonic() - t0
    moved = cc.osc(cloud, 'server', 'show', 'vm2')
    migs = cc.migrations(cloud, 'vm2')
    assert [(m['Source Compute'], m['Dest Compute'], m['Status'])
            for m in migs] == [('a', 'b', 'completed')], migs
    assert (moved['status'], moved['OS-EXT-SRV-ATTR:host']) == \
        ('ACTIVE', 'b'), moved
    assert cc.domains(cloud, 'b') == [
        name] and name not in cc.domains(cloud, 'a')
    entries = [e for e in cc.puma_list(cloud, 'ledger', server=uuid)
               if e['state'] in ('running', 'done')]
    assert [(e['main_host'], e['sub_host']) for e in entries] == \
        [('b', 'c')], entries
    servers = cc.puma_list(cloud, 'memory-servers', host='c')
    assert [s['instance_uuid'] for s in servers] == [uuid], servers
    split = json.loads(cc.virsh(cloud, 'b', 'qemu-monitor-command', name,
                                '{"execute": "x-query-split"}'))['return']
    print('split migration a -> b (sub host c) in %.1f s: %s; ledger %s'
          % (took, split, entries))
    # Pages the guest used went to c, those it never used nowhere; b
    # keeps the plan's resident limit, give or take the pages faulted in
    # since the pager's last page-out: it pages out once it sees the
    # limit passed, and each remote fault brings its page and up to 15
    # neighbours (PAGER_PREFETCH).  A clean run of 2026-12-01 saw 16
    # pages over (16400 resident, limit 16384); allow one page-out batch
    # (PAGER_PAGEOUT_BATCH, 64 pages).
    assert split['remote-pages'] > 0 and split['unused-pages'] > 0, split
    assert split['resident-pages'] * 4096 <= \
        (entries[0]['main_limit_mb'] << 20) + 64 * 4096, (split, entries)
    assert [s['state'] for s in split['servers']] == ['up'], split
    # Every page of the working set came back right from b or from c.
    rounds = cc.verified(cloud, 'vm2', after=rounds)
    cc.placement_audit(cloud)
    # c's puma-exporter shows the memory server it runs for the server,
    # up and holding pages, never restarted (Prometheus of the cloud),
    # and what the server says of itself with its watchdog notifications:
    # the pages it holds and stored, b's QEMU connected to it.
    srv = '{uuid="%s"}' % uuid
    for expr in ('puma_memory_server_up%s == 1' % srv,
                 'puma_memory_server_resident_bytes%s > 0' % srv,
                 'puma_memory_server_limit_bytes%s > 0' % srv,
                 'puma_memory_server_restarts_total%s == 0' % srv,
                 'puma_memory_server_pages%s > 0' % srv,
                 'puma_memory_server_put_pages_total%s > 0' % srv,
                 'puma_memory_server_connections%s > 0' % srv):
        (labels, value), = cloud_monitoring.wait_query(cloud, expr)
        assert labels['instance'].startswith(
            cloud.state['hosts']['c']['addr'] + ':'), labels
        print(expr, value)

    # A second move, back to a, which has room: b's QEMU pages the
    # remote memory in, then migrates it whole; the split is over, and
    # its ledger entry, memory server and allocations are given back.
    t0 = time.monotonic()
    cc.migrate(cloud, 'vm2', 'a')
    took = time.monotonic() - t0
    moved = cc.osc(cloud, 'server', 'show', 'vm2')
    migs = cc.migrations(cloud, 'vm2')
    print('second move b -> a in %.1f s: %s' % (took, migs))
    assert sorted((m['Source Compute'], m['Dest Compute'], m['Status'])
                  for m in migs) == [('a', 'b', 'completed'),
                                     ('b', 'a', 'completed')], migs
    assert (moved['status'], moved['OS-EXT-SRV-ATTR:host']) == \
        ('ACTIVE', 'a'), moved
    assert cc.domains(cloud, 'a') == [name] and \
        name not in cc.domains(cloud, 'b')
    split = json.loads(cc.virsh(cloud, 'a', 'qemu-monitor-command', name,
                                '{"execute": "x-query-split"}'))['return']
    assert split['state'] == 'none', split
    cc.released(cloud, uuid)
    cc.verified(cloud, 'vm2', after=rounds)

    # Deleting the server gives everything back.
    cc.osc(cloud, 'server', 'delete', '--wait', 'vm2', fmt=False)
    cc.released(cloud, uuid)


def test_split_migration_that_loses_its_memory_server(cloud, small_b):
    """The memory server dies before the switchover: the migration fails.

    Nova records the failure (migration ``failed``; the driver's failed
    ``puma_live_migration`` event of the action, which names the memory
    server); the server stays ACTIVE and running on a, its
    working set intact, and the split's ledger entry, memory server and
    placement allocations are released.
    """
    uuid, name, rounds = cc.split_server(cloud, 'vm3')
    mig = cc.slow_split(cloud, name, uuid, small_b)
    pid = cc.memory_server_pid(uuid)
    os.kill(pid, 9)
    print('killed memory server %d of %s during migration %s'
          % (pid, uuid, mig))
    failed = cc.wait_for('the migration to fail', lambda: [
        m for m in cc.migrations(cloud, uuid)
        if m['Status'] in ('error', 'failed', 'completed')], cc.SERVER_TIMEOUT)
    # Nova's status for a live migration it rolled back.
    assert [m['Status'] for m in failed] == ['failed'], failed
    cc.stays_on_a(cloud, 'vm3', name, rounds)
    actions = cc.osc(cloud, 'server', 'event', 'list', uuid)
    live = [a for a in actions if a['Action'] == 'live-migration']
    events = cc.osc(cloud, '--os-compute-api-version', '2.84', 'server',
                    'event', 'show', uuid, live[0]['Request ID'])['events']
    print('events: %s' % [(e['event'], e['result'], e.get('details'))
                          for e in events])
    # The driver keeps the error as a failed event of the action: what
    # happened in its details, libvirt's error in its traceback.
    failed = [e for e in events if e['event'] == 'puma_live_migration']
    assert [e['result'] for e in failed] == ['Error'], events
    assert 'failed and was rolled back' in failed[0]['details'], failed
    assert 'Memory server tcp:' in failed[0]['traceback'], failed
    cc.released(cloud, uuid)

    # The server still moves: the next split completes.
    cc.virsh(cloud, 'a', 'migrate-setspeed', name, '0')
    cc.migrate(cloud, uuid, small_b)
    assert [m['Status'] for m in cc.migrations(cloud, uuid)][:1] == \
        ['completed'], cc.migrations(cloud, uuid)
    cc.verified(cloud, 'vm3', after=rounds)
    cc.osc(cloud, 'server', 'delete', '--wait', uuid, fmt=False)
    cc.released(cloud, uuid)


def test_split_migration_force_complete(cloud, small_b):
    """``openstack server migration force complete`` ends a slow split.

    Nova's monitor pauses the guest (a split never runs post-copy), the
    split completes, and the server runs on b with its working set
    intact.
    """
    uuid, name, rounds = cc.split_server(cloud, 'vm5')
    mig = cc.slow_split(cloud, name, uuid, small_b)
    # The operator's view of it: Nova's progress (saved by its monitor
    # every few seconds) beside Puma's split.
    view = cc.wait_for('Nova\'s progress of the split', lambda: [
        v for v in [cc.osc(cloud, 'puma', 'migration', 'show', uuid)]
        if v['Memory Total MB']], cc.SERVER_TIMEOUT)[0]
    assert (view['Migration Id'], view['Kind'], view['Source Host'],
            view['Dest Host'], view['Main Host'], view['Sub Hosts'],
            view['Split State']) == \
        (mig['Id'], 'split', 'a', 'b', 'b', 'c', 'running'), view
    assert view['Memory Total MB'] > 0 and view['Remote MB'] > 0, view
    cc.osc(cloud, '--os-compute-api-version', '2.22', 'server', 'migration',
           'force', 'complete', uuid, str(mig['Id']), fmt=False)
    done = cc.wait_for('the migration to end', lambda: [
        m for m in cc.migrations(cloud, uuid)
        if m['Status'] in ('cancelled', 'error', 'failed', 'completed')],
        cc.SERVER_TIMEOUT)
    assert [m['Status'] for m in done] == ['completed'], done
    shown = cc.settled(cloud, uuid)
    assert shown['OS-EXT-SRV-ATTR:host'] == 'b', shown
    assert cc.virsh(cloud, 'b', 'domstate', name).split()[0] == 'running'
    assert name not in cc.domains(cloud, 'a')
    cc.verified(cloud, 'vm5', after=rounds)
    cc.osc(cloud, 'server', 'delete', '--wait', uuid, fmt=False)
    cc.released(cloud, uuid)


def test_split_migration_abort(cloud, small_b):
    """``openstack server migration abort`` cancels a running split."""
    uuid, name, rounds = cc.split_server(cloud, 'vm4')
    try:
        mig = cc.slow_split(cloud, name, uuid, small_b)
        cc.osc(cloud, '--os-compute-api-version', '2.24', 'server',
               'migration', 'abort', uuid, str(mig['Id']), fmt=False)
        done = cc.wait_for('the migration to end', lambda: [
            m for m in cc.migrations(cloud, uuid)
            if m['Status'] in ('cancelled', 'error', 'failed', 'completed')],
            cc.SERVER_TIMEOUT)
        assert [m['Status'] for m in done] == ['cancelled'], done
        cc.stays_on_a(cloud, 'vm4', name, rounds)
        cc.released(cloud, uuid)
    finally:
        cc.discard(cloud, uuid)
    cc.released(cloud, uuid)
