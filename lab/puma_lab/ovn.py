# SPDX-License-Identifier: Apache-2.0
"""OVN for the lab cloud: Neutron's ports bound on the emulated hosts.

Neutron's ML2 ``ovn`` mechanism driver (upstream's default) with
Debian's Open vSwitch and OVN packages:

- on the control host, OVN's northbound and southbound databases (one
  ``ovsdb-server`` each, on ``ADDR:6641`` and ``ADDR:6642``) and
  ``ovn-northd``;
- on every compute host, its own ``ovsdb-server`` and ``ovs-vswitchd``
  with the integration bridge ``br-int``, and ``ovn-controller``, which
  binds a port once the VIF that names it (``external-ids:iface-id``)
  appears on ``br-int``.

The lab's kernel has no Open vSwitch module, so ``br-int`` uses OVS's
userspace datapath (``datapath_type=netdev``): ovs-vswitchd reads and
writes the guests' tap devices itself. ovn-controller reports that
datapath type to the southbound database; Neutron then binds ports with
``vif_type=ovs`` and ``datapath_type=netdev`` (vhost-user only when the
chassis offers ``dpdkvhostuser``, which Debian's non-DPDK build does
not), and Nova's libvirt driver plugs a tap device into ``br-int`` with a
``<virtualport type='openvswitch'>``, as on any OVS host.

Each compute host's ``/run/openvswitch`` and ``/run/ovn`` are folders of
its own, bind-mounted in its libvirtd's mount namespace (the daemons run
there too), so that libvirt's and os-vif's ``ovs-vsctl`` reach that
host's switch.

Traffic between hosts goes through Geneve tunnels on an overlay network
of its own (``10.78.0.0/24``, a switch ``brt`` in the lab's namespace
and a veth ``tun0`` on each host), apart from the lab network that
carries the control plane and the migrations, as a datacenter keeps its
tenant overlay apart. OVS's userspace datapath sends tunnel packets
itself, so the tunnel endpoint is an address of an OVS bridge: ``tun0``
is a port of ``br-phy`` (userspace datapath too), which holds the
host's overlay address, and ovs-vswitchd gets the overlay's route.
"""

import os
import time

from puma_lab import errors
from puma_lab import netns

NB_PORT = 6641
SB_PORT = 6642
BRIDGE = 'br-int'
# The overlay network of the tunnels: the lab's switch, each host's NIC
# and the OVS bridge that holds the host's overlay address.
OVERLAY_SWITCH = 'brt'
OVERLAY_NIC = 'tun0'
OVERLAY_BRIDGE = 'br-phy'
OVERLAY_NET = '10.78.0.0/24'
NB_SCHEMA = '/usr/share/ovn/ovn-nb.ovsschema'
SB_SCHEMA = '/usr/share/ovn/ovn-sb.ovsschema'
VSWITCH_SCHEMA = '/usr/share/openvswitch/vswitch.ovsschema'
# What each compute host's libvirtd sees at these paths is its own.
RUN_DIRS = ('/run/openvswitch', '/run/ovn')
# The shared network every project may use (docs/lab-cloud.md).
NETWORK = 'private'
SUBNET = 'private-subnet'
CIDR = '10.90.0.0/24'
BINARIES = ('ovsdb-server', 'ovsdb-tool', 'ovs-vswitchd', 'ovs-vsctl',
            'ovn-northd', 'ovn-controller', 'ovn-nbctl', 'ovn-sbctl')


def missing():
    """None if Debian's Open vSwitch and OVN are installed, else why not."""
    for b in BINARIES:
        if not any(os.access(os.path.join(d, b), os.X_OK)
                   for d in ('/usr/bin', '/usr/sbin')):
            return '%s not found (lab/setup deps installs openvswitch-' \
                'switch, ovn-central and ovn-host)' % b
    return None


def nb_url(cloud):
    return 'tcp:%s:%d' % (cloud.addr, NB_PORT)


def sb_url(cloud):
    return 'tcp:%s:%d' % (cloud.addr, SB_PORT)


def host_binds(cloud, name):
    """(source, target) bind mounts for compute host NAME's libvirtd."""
    binds = []
    for target in RUN_DIRS:
        os.makedirs(target, exist_ok=True)
        src = cloud.path('host-%s' % name, 'ovs', os.path.basename(target))
        os.makedirs(src, exist_ok=True)
        binds.append((src, target))
    return binds


def overlay_addr(h):
    """Host H's address on the overlay network."""
    return '10.78.0.%d' % (10 + h.index)


def overlay_network(cloud, lab, hosts):
    """The overlay's switch in the lab's namespace and a NIC on each host."""
    cloud.step('overlay network %s: %s on %s' % (
        OVERLAY_NET, OVERLAY_NIC, ', '.join(h.name for h in hosts)))
    netns.add_bridge(lab.ns, OVERLAY_SWITCH)
    for h in hosts:
        netns.add_veth(h.ns, OVERLAY_NIC, lab.ns, 't%s' % h.index)
        netns.run('ip', 'link', 'set', 't%s' % h.index, 'master',
                  OVERLAY_SWITCH, 'up', ns=lab.ns)
        netns.run('ip', 'link', 'set', OVERLAY_NIC, 'up', ns=h.ns)


def _wait(what, check, timeout):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise errors.LabError('%s: not there after %d s' % (what, timeout))
        time.sleep(0.2)


def _db(cloud, path, schema):
    if not os.path.exists(path):
        cloud.run(['ovsdb-tool', 'create', path, schema])


def _ovsdb_server(cloud, name, db, remotes, ns=None, prefix=()):
    d = os.path.dirname(db)
    argv = list(prefix) + ['ovsdb-server', db,
                           '--pidfile=%s/%s.pid' % (d, name),
                           '--unixctl=%s/%s.ctl' % (d, name),
                           '--log-file=%s/%s.log' % (d, name)]
    argv += ['--remote=%s' % r for r in remotes]
    cloud.spawn(name, argv, ns=ns)


def start_central(cloud):
    """The northbound and southbound databases and ovn-northd."""
    cloud.step('OVN databases and ovn-northd on %s' % cloud.addr)
    d = cloud.path('ovn')
    os.makedirs(d, exist_ok=True)
    socks = {}
    for name, schema, port in (('ovn-nb', NB_SCHEMA, NB_PORT),
                               ('ovn-sb', SB_SCHEMA, SB_PORT)):
        db = os.path.join(d, name + '.db')
        _db(cloud, db, schema)
        socks[name] = os.path.join(d, name + '.sock')
        _ovsdb_server(cloud, name, db, ['ptcp:%d:%s' % (port, cloud.addr),
                                        'punix:' + socks[name]])
    for sock in socks.values():
        _wait(sock, lambda: os.path.exists(sock), 30)
    cloud.run(['ovn-nbctl', '--db=unix:' + socks['ovn-nb'], 'init'])
    cloud.run(['ovn-sbctl', '--db=unix:' + socks['ovn-sb'], 'init'])
    cloud.spawn('ovn-northd', [
        'ovn-northd', '--ovnnb-db=unix:' + socks['ovn-nb'],
        '--ovnsb-db=unix:' + socks['ovn-sb'],
        '--pidfile=%s/ovn-northd.pid' % d,
        '--log-file=%s/ovn-northd.log' % d], env={'OVN_RUNDIR': d})
    cloud.state['ovn'] = {'nb': nb_url(cloud), 'sb': sb_url(cloud),
                          'nb_sock': socks['ovn-nb'],
                          'sb_sock': socks['ovn-sb']}
    cloud.save()


def start_chassis(cloud, h):
    """Open vSwitch with br-int and ovn-controller on compute host H."""
    cloud.step('Open vSwitch and ovn-controller on %s' % h.name)
    d = cloud.path('host-%s' % h.name, 'ovs')
    ns = h.ns
    # In libvirtd's mount namespace, where /run/openvswitch is the host's.
    inside = ['nsenter', '-t', str(h.proc.pid), '-m', '--']
    db = os.path.join(d, 'conf.db')
    _db(cloud, db, VSWITCH_SCHEMA)
    sock = os.path.join(d, 'openvswitch', 'db.sock')
    _ovsdb_server(cloud, 'ovsdb-server-%s' % h.name, db,
                  ['punix:/run/openvswitch/db.sock'], ns=ns, prefix=inside)
    _wait(sock, lambda: os.path.exists(sock), 30)
    vsctl = inside + ['ovs-vsctl', '--db=unix:/run/openvswitch/db.sock']
    cloud.run(vsctl + ['--no-wait', 'init'], ns=ns)
    cloud.spawn('ovs-vswitchd-%s' % h.name, inside + [
        'ovs-vswitchd', 'unix:/run/openvswitch/db.sock',
        '--pidfile=%s/ovs-vswitchd.pid' % d,
        '--unixctl=%s/ovs-vswitchd.ctl' % d,
        '--log-file=%s/ovs-vswitchd.log' % d], ns=ns)
    cloud.run(vsctl + [
        '--timeout=60', '--may-exist', 'add-br', BRIDGE, '--', 'set',
        'Bridge', BRIDGE, 'datapath_type=netdev', 'fail_mode=secure',
        'other_config:disable-in-band=true'], ns=ns)
    # The tunnel endpoint: the overlay address on br-phy, and its route
    # in ovs-vswitchd's own table (which reads the kernel's host routes
    # but missed the overlay's here).
    addr = overlay_addr(h)
    cloud.run(vsctl + [
        '--timeout=60', '--may-exist', 'add-br', OVERLAY_BRIDGE, '--',
        'set', 'Bridge', OVERLAY_BRIDGE, 'datapath_type=netdev', '--',
        '--may-exist', 'add-port', OVERLAY_BRIDGE, OVERLAY_NIC], ns=ns)
    netns.set_addr(ns, OVERLAY_BRIDGE, '%s/%s' % (
        addr, OVERLAY_NET.split('/')[1]))
    cloud.run(inside + ['ovs-appctl', '-t', '%s/ovs-vswitchd.ctl' % d,
                        'ovs/route/add', OVERLAY_NET, OVERLAY_BRIDGE],
              ns=ns)
    cloud.run(vsctl + [
        'set', 'Open_vSwitch', '.',
        'external-ids:system-id=%s' % h.name,
        'external-ids:hostname=%s' % h.name,
        'external-ids:ovn-remote=%s' % sb_url(cloud),
        'external-ids:ovn-encap-type=geneve',
        'external-ids:ovn-encap-ip=%s' % addr,
        'external-ids:ovn-bridge=%s' % BRIDGE,
        'external-ids:ovn-bridge-datapath-type=netdev'], ns=ns)
    cloud.spawn('ovn-controller-%s' % h.name, inside + [
        'ovn-controller', 'unix:/run/openvswitch/db.sock',
        '--pidfile=%s/ovn-controller.pid' % d,
        '--log-file=%s/ovn-controller.log' % d], ns=ns,
        env={'OVN_RUNDIR': '/run/ovn'})


def wait_chassis(cloud, names, timeout=120):
    """Until the southbound database has a chassis for each of NAMES."""
    _wait(
        'OVN chassis %s' % ', '.join(names),
        lambda: set(names) <= set(
            cloud.run(['ovn-sbctl', '--db=unix:' +
                       cloud.state['ovn']['sb_sock'], '--bare',
                       '--columns=hostname', 'list', 'Chassis']).split()),
        timeout)


def ml2_conf(cloud):
    """ml2_conf.ini for the ovn mechanism driver."""
    return {
        'ml2': {'type_drivers': 'local,flat,geneve',
                'tenant_network_types': 'geneve',
                'mechanism_drivers': 'ovn',
                'extension_drivers': 'port_security',
                'overlay_ip_version': 4},
        'ml2_type_geneve': {'vni_ranges': '1:65536',
                            'max_header_size': 38},
        'ml2_type_flat': {'flat_networks': '*'},
        'ovn': {'ovn_nb_connection': nb_url(cloud),
                'ovn_sb_connection': sb_url(cloud),
                'ovn_metadata_enabled': False,
                'enable_distributed_floating_ip': False},
    }
