# SPDX-License-Identifier: Apache-2.0
"""Driving the lab cloud as its tests do: the ``openstack`` client,
puma-api, virsh on the compute hosts, and the checks the tests share.

Every function takes the :class:`puma_lab.cloud.Cloud` that is up.  The
checks raise AssertionError with what they saw; waits end with one after
their timeout.
"""

import base64
import hashlib
import json
import os
import time

from puma_lab import cloud as cloud_mod
from puma_lab import errors
from puma_lab import ovn
from puma_lab import paths

FLAVOR = 'puma.small'
SPLIT_FLAVOR = 'puma.split'
# The main host of the split is modelled with this much free memory
# (Cloud.model_free_memory): a 512 MiB guest does not fit; what stays
# resident (this less the host's margin, 64 MiB) is at least
# [puma_scheduler] min_resident_ratio of it.
MAIN_FREE_MB = 128
IMAGE = 'puma-debian'
# The cloud's shared network (Neutron, OVN): the network test's servers.
NETWORK = ovn.NETWORK
# PUMA_CLOUD_PORTS=1 gives every test's servers a port on NETWORK (by
# default only the network test's have one: docs/lab-cloud.md, Not done).
PORTS = os.environ.get('PUMA_CLOUD_PORTS') == '1'

KERNEL = '6.1'
SERVER_TIMEOUT = 300
# Tries of one guest agent command whose agent did not answer in time.
AGENT_TRIES = 3
# Each server's working set (lab/guest/puma-init: puma.workset), MiB.
WORKSET_MB = 32
# Split migrations that must still run when the test acts on them are
# held to this bandwidth (MiB/s) on the source: libvirt keeps a
# domain's migrate-setspeed for a migration that asks for none (Nova
# asks for [libvirt] live_migration_bandwidth, 0 by default).
SLOW_MIB_S = 2


def nic_args():
    """The `server create` options of a test's server: its port or none."""
    return ['--network', NETWORK] if PORTS else ['--nic', 'none']


def osc(cloud, *args, project='admin', fmt=True):
    """The openstack client against the cloud; parsed JSON with FMT."""
    argv = [cloud_mod.venv('bin', 'openstack'), '--os-cloud',
            'lab-%s' % project] + list(args)
    if fmt:
        argv += ['-f', 'json']
    out = cloud.run(argv, env={'OS_CLIENT_CONFIG_FILE':
                               cloud.path('clouds.yaml'),
                               # The "openstack puma" commands.
                               'PYTHONPATH': cloud.state['puma_site']})
    return json.loads(out) if fmt else out


def domains(cloud, host):
    """Running domains of HOST's libvirtd."""
    return virsh(cloud, host, 'list', '--name').split()


def upload(cloud, path, name, disk_format, *extra):
    img = osc(cloud, 'image', 'create', '--disk-format', disk_format,
              '--container-format', 'bare' if disk_format == 'raw'
              else disk_format, '--public', '--file', path, *extra, name)
    assert img['status'] == 'active', img
    with open(path, 'rb') as f:
        md5 = hashlib.file_digest(f, 'md5').hexdigest()
    assert img['checksum'] == md5, (img, md5)
    return img


def guest_image(cloud):
    """The Glance image of the lab's guest, uploaded once per cloud.

    The lab's guest image is a bare ext4 root file system: Nova boots it
    with the kernel and initrd images (direct kernel boot); the init's
    ``puma.workset`` runs the checked working set.
    """
    found = [i for i in osc(cloud, 'image', 'list') if i['Name'] == IMAGE]
    if found:
        return osc(cloud, 'image', 'show', found[0]['ID'])
    kernel = paths.kernel(KERNEL)
    t0 = time.monotonic()
    k = upload(cloud, kernel.vmlinuz, 'puma-kernel-' + KERNEL, 'aki')
    r = upload(cloud, kernel.initrd, 'puma-initrd-' + KERNEL, 'ari')
    root = upload(cloud, paths.root_image(), IMAGE, 'raw',
                  '--property', 'kernel_id=%s' % k['id'],
                  '--property', 'ramdisk_id=%s' % r['id'],
                  # Nova gives the guest a virtio-serial channel for
                  # qemu-guest-agent, which the image's init starts.
                  '--property', 'hw_qemu_guest_agent=yes',
                  '--property', 'os_command_line=console=ttyS0 loglevel=4 '
                  'no_timer_check puma.root=/dev/vda puma.workset=%d'
                  % WORKSET_MB)
    print('images uploaded in %.1f s (root %d bytes)'
          % (time.monotonic() - t0, os.path.getsize(paths.root_image())))
    assert root['size'] == os.path.getsize(paths.root_image()), root
    return root


def puma_list(cloud, what, **query):
    """A puma-api list as the cloud's admin (every field of its rows)."""
    token = osc(cloud, 'token', 'issue')['id']
    url = cloud.url('puma', '/v1/' + what)
    if query:
        url += '?' + '&'.join('%s=%s' % kv for kv in sorted(query.items()))
    return json.loads(cloud.run(['curl', '-sf', '-H', 'X-Auth-Token: ' +
                                 token, url]))[what.replace('-', '_')]


def wait_for(what, check, timeout):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, 'timed out waiting for %s' % what
            return value
        time.sleep(2)


def workset_lines(log):
    """The working set's complete report lines in the console LOG.

    The guest may be writing its last line when the log is read: a line
    without its newline yet is left for the next read.
    """
    complete = log[:log.rfind('\n') + 1]
    return [line.split('puma-guest: workset ', 1)[1] for line in
            complete.splitlines() if 'puma-guest: workset state=' in line]


def verified(cloud, server, after=-1, timeout=SERVER_TIMEOUT):
    """The rounds SERVER's working set has verified, once more than AFTER.

    The guest init runs memverify (puma.workset) and reports its state on
    the serial console every 5 seconds: a page that came back wrong ends
    it with a last line, which fails the test.
    """
    def rounds():
        log = osc(cloud, 'console', 'log', 'show', server, fmt=False)
        assert 'puma-guest: workset ended' not in log, log[-2000:]
        lines = workset_lines(log)
        if not lines:
            return None
        state = dict(kv.split('=', 1) for kv in lines[-1].split())
        assert state['state'] == 'running', lines[-1]
        n = int(state['rounds'])
        return n if n > after else None
    return wait_for('%s\'s working set past round %d' % (server, after),
                    rounds, timeout)


def virsh(cloud, host, *args):
    """virsh against HOST's libvirtd, in its namespace."""
    h = cloud.state['hosts'][host]
    return cloud.run([os.path.join(paths.libvirt_prefix(), 'bin', 'virsh'),
                      '-c', h['uri']] + list(args), ns=h['ns'])


def agent(cloud, host, domain, execute, timeout=10, **arguments):
    """One guest agent command to DOMAIN through HOST's libvirtd.

    The channel is the one Nova configured for an image with
    ``hw_qemu_guest_agent=yes``; returns the command's ``return``.
    """
    cmd = {'execute': execute}
    if arguments:
        cmd['arguments'] = arguments
    for attempt in range(AGENT_TRIES):
        try:
            out = virsh(cloud, host, 'qemu-agent-command', '--timeout',
                        str(timeout), domain, json.dumps(cmd))
            return json.loads(out)['return']
        except errors.LabError as e:
            # libvirt gives a busy TCG guest's agent 5 s to answer its
            # guest-sync, whatever --timeout says: ask again.
            if ('Guest agent is not responding' not in str(e) or
                    attempt == AGENT_TRIES - 1):
                raise
            time.sleep(2)


def guest_exec(cloud, host, domain, *argv, timeout=60):
    """Run ARGV in DOMAIN through its guest agent: (exit code, out, err)."""
    started = agent(cloud, host, domain, 'guest-exec', path=argv[0],
                    arg=list(argv[1:]), **{'capture-output': True})
    deadline = time.monotonic() + timeout
    while True:
        st = agent(cloud, host, domain, 'guest-exec-status',
                   pid=started['pid'])
        if st['exited']:
            return (st['exitcode'],
                    base64.b64decode(st.get('out-data', '')).decode(),
                    base64.b64decode(st.get('err-data', '')).decode())
        assert time.monotonic() < deadline, \
            '%s did not end in %d s in %s' % (argv, timeout, domain)
        time.sleep(1)


def agent_read(cloud, host, domain, path):
    """The content of the guest's file PATH, read through its agent."""
    handle = agent(cloud, host, domain, 'guest-file-open', path=path)
    try:
        data = agent(cloud, host, domain, 'guest-file-read', handle=handle,
                     count=65536)
    finally:
        agent(cloud, host, domain, 'guest-file-close', handle=handle)
    return base64.b64decode(data['buf-b64']).decode()


def agent_workset(cloud, host, domain):
    """The working set's state as the guest writes it (/run/workset).

    The same figures the console lines carry, read through the guest
    agent instead: ``{'state': 'running', 'rounds': '52', ...}``.
    """
    text = agent_read(cloud, host, domain, '/run/workset')
    return dict(kv.split('=', 1) for kv in text.split())


def split_server(cloud, name, flavor=SPLIT_FLAVOR, properties=()):
    """A server of a split flavor on host a, its working set running.

    FLAVOR (made if missing) allows splitting and has PROPERTIES too.
    Returns (uuid, libvirt domain name, rounds verified so far).
    """
    guest_image(cloud)
    if not [f for f in osc(cloud, 'flavor', 'list') if f['Name'] == flavor]:
        props = []
        for p in ('puma:split=allowed',) + tuple(properties):
            props += ['--property', p]
        osc(cloud, 'flavor', 'create', '--ram', '512', '--vcpus', '1',
            '--disk', '1', *props, flavor)
    server = osc(cloud, 'server', 'create', '--flavor', flavor,
                 '--image', IMAGE, *nic_args(), '--availability-zone',
                 'nova:a', '--wait', name)
    assert (server['status'], server['OS-EXT-SRV-ATTR:host']) == \
        ('ACTIVE', 'a'), server
    return (server['id'], server['OS-EXT-SRV-ATTR:instance_name'],
            verified(cloud, name))


def server_port(cloud, server):
    """The Neutron port of SERVER (it has one), as the admin sees it."""
    ports = osc(cloud, 'port', 'list', '--server', server)
    assert len(ports) == 1, ports
    return osc(cloud, 'port', 'show', ports[0]['ID'])


def ovn_port(cloud, port_id):
    """PORT_ID in OVN: (its switch port is up, the chassis that has it)."""
    st = cloud.state['ovn']
    up = cloud.run(['ovn-nbctl', '--db=unix:' + st['nb_sock'], '--bare',
                    '--columns=up', 'find', 'Logical_Switch_Port',
                    'name=%s' % port_id]).strip()
    chassis = cloud.run(['ovn-sbctl', '--db=unix:' + st['sb_sock'],
                         '--bare', '--columns=chassis', 'find',
                         'Port_Binding', 'logical_port=%s' % port_id]).strip()
    host = None
    if chassis:
        host = cloud.run(['ovn-sbctl', '--db=unix:' + st['sb_sock'],
                          '--bare', '--columns=hostname', 'list', 'Chassis',
                          chassis]).strip()
    return up == 'true', host


def bound_on(cloud, server, host, migrated=False):
    """SERVER's port is bound on HOST, in Neutron and in OVN.

    Neutron bound it there with its ovn driver for OVS's userspace
    datapath on br-int, and HOST's ovn-controller claimed it.  Returns
    the port.

    MIGRATED: the server was just live-migrated to HOST.  Neutron's
    status of the port may then stay DOWN although the port is bound,
    claimed and up in OVN on HOST: seen once in a clean-clone run of
    2026-12-01, where b's ovn-controller set the port up in the
    southbound database (23:50:44.0) before Nova activated the binding
    on b (23:50:44.9), and no OVN event followed to set it ACTIVE again
    in the 60 s the test waited.  That is Neutron's bookkeeping, not the
    port's state (the test's traffic checks follow); it is reported, not
    failed, for a migrated port (docs/lab-cloud.md, Not done).
    """
    # Neutron sets a port ACTIVE once OVN reports it up, a moment after
    # the binding moved (a live migration returns before that).
    def active():
        port = server_port(cloud, server)
        if (port['status'], port['binding_host_id']) == ('ACTIVE', host):
            return port
        return None

    def bound():
        port = server_port(cloud, server)
        return port if port['binding_host_id'] == host else None

    if migrated:
        port = wait_for('%s\'s port bound on %s' % (server, host), bound, 60)
        wait_for('%s claimed by OVN on %s' % (port['id'], host),
                 lambda: ovn_port(cloud, port['id']) == (True, host), 60)
        try:
            port = wait_for('%s\'s port ACTIVE on %s' % (server, host),
                            active, 60)
        except AssertionError:
            port = server_port(cloud, server)
            print('%s\'s port is bound, claimed and up in OVN on %s, but '
                  'Neutron says %s (Neutron/OVN race after a live '
                  'migration)' % (server, host, port['status']))
        status = port['status']
    else:
        port = wait_for('%s\'s port ACTIVE on %s' % (server, host), active,
                        60)
        status = 'ACTIVE'
    details = port['binding_vif_details']
    assert (port['status'], port['binding_host_id'],
            port['binding_vif_type'], details['bound_drivers'],
            details['bridge_name'], details['datapath_type']) == (
        status, host, 'ovs', {'0': 'ovn'}, ovn.BRIDGE, 'netdev'), port
    wait_for('%s claimed by OVN on %s' % (port['id'], host),
             lambda: ovn_port(cloud, port['id']) == (True, host), 60)
    return port


def migrate(cloud, server, host, wait=True):
    """``openstack server migrate --live-migration --host HOST SERVER``.

    The client's SDK asks for such a migration with compute API 2.30, so
    Nova checks the destination before it answers: a failed check is the
    command's error (400), the migration's status 'error'.
    """
    argv = ['--os-compute-api-version', '2.30', 'server', 'migrate',
            '--live-migration', '--host', host, server]
    osc(cloud, *(argv + ['--wait'] if wait else argv), fmt=False)


def migrations(cloud, server):
    return osc(cloud, '--os-compute-api-version', '2.59', 'server',
               'migration', 'list', '--server', server)


MIGRATION_ENDED = ('cancelled', 'error', 'failed', 'completed')


def migration_ended(cloud, uuid):
    """The migrations of UUID, newest first, once the newest one ended."""
    def newest():
        migs = migrations(cloud, uuid)
        return migs[:1] if migs and migs[0]['Status'] in MIGRATION_ENDED \
            else None
    return wait_for('the migration of %s to end' % uuid, newest,
                    SERVER_TIMEOUT)


def released(cloud, uuid):
    """Nothing of UUID's split is left: ledger, memory server, placement."""
    wait_for('the ledger and memory server released', lambda: not [
        e for e in puma_list(cloud, 'ledger', server=uuid, active='true')]
        and all(s['state'] == 'stopped' for s in puma_list(
            cloud, 'memory-servers', host='c')
            if s['instance_uuid'] == uuid), 60)
    placement_audit(cloud)


def model_small(cloud, host='b', free_mb=MAIN_FREE_MB):
    """Model HOST with FREE_MB free, once puma-scheduler has seen it so.

    puma-scheduler plans with what the host reported last.  Undo with
    ``cloud.model_free_memory(HOST)``.
    """
    cloud.model_free_memory(host, free_mb)
    wait_for('%s\'s report of %d MiB free' % (host, free_mb), lambda: [
        h for h in puma_list(cloud, 'hosts')
        if h['name'] == host and h['free_mb'] <= free_mb],
        6 * cloud_mod.REPORT_INTERVAL)


def memory_server_pid(uuid):
    """The PID of the memory server of server UUID (its log names it)."""
    binary = os.path.basename(paths.memory_server())
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            if os.path.basename(os.readlink('/proc/%s/exe' % pid)) == \
                    binary and uuid in os.readlink('/proc/%s/fd/1' % pid):
                return int(pid)
        except OSError:
            continue
    return None


def slow_split(cloud, domain, uuid, host):
    """Start a split migration of server UUID to HOST at SLOW_MIB_S.

    DOMAIN is its libvirt domain on a.  Returns the running migration
    once its memory server is up.
    """
    virsh(cloud, 'a', 'migrate-setspeed', domain, str(SLOW_MIB_S))
    migrate(cloud, uuid, host, wait=False)
    return wait_for('a running split migration with its memory server',
                    lambda: [m for m in migrations(cloud, uuid)
                             if m['Status'] == 'running'] and
                    memory_server_pid(uuid) and migrations(cloud, uuid)[0],
                    SERVER_TIMEOUT)


def settled(cloud, server):
    """``server show`` of SERVER once it is ACTIVE with no task."""
    return wait_for('%s ACTIVE with no task' % server, lambda: [
        s for s in [osc(cloud, 'server', 'show', server)]
        if s['status'] == 'ACTIVE' and not s['OS-EXT-STS:task_state']],
        SERVER_TIMEOUT)[0]


def stays_on_a(cloud, server, name, rounds):
    """SERVER is ACTIVE on a, running there only, its working set intact."""
    shown = settled(cloud, server)
    assert shown['OS-EXT-SRV-ATTR:host'] == 'a', shown
    assert name in domains(cloud, 'a') and name not in domains(cloud, 'b')
    assert virsh(cloud, 'a', 'domstate', name).split()[0] == 'running'
    return verified(cloud, server, after=rounds)


def placement_audit(cloud):
    """``nova-manage placement audit``: no orphaned allocation (exit 0)."""
    cloud.run([cloud_mod.venv('bin', 'nova-manage'), '--config-file',
               cloud.path('nova', 'nova.conf'), 'placement', 'audit',
               '--verbose'], env=cloud_mod.NOVA_ENV)


def discard(cloud, uuid):
    """Delete server UUID whatever it is doing (a test's cleanup).

    A migration that still runs is aborted first.  Failures are printed,
    not raised: the test's own failure is the one to see.
    """
    try:
        for m in migrations(cloud, uuid):
            if m['Status'] in ('queued', 'preparing', 'running'):
                osc(cloud, '--os-compute-api-version', '2.24', 'server',
                    'migration', 'abort', uuid, str(m['Id']), fmt=False)
        osc(cloud, 'server', 'delete', '--wait', uuid, fmt=False)
    except errors.LabError as e:
        print('cleanup of server %s: %s' % (uuid, e))
