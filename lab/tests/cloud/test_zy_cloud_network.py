# SPDX-License-Identifier: Apache-2.0
"""Neutron binds the servers' ports, and OVN carries their traffic.

The shared network ``private`` (Neutron's geneve type): Neutron's ML2
``ovn`` driver binds each port to the host Nova chose, for OVS's
userspace datapath on that host's ``br-int``; the host's ovn-controller
claims it once Nova's VIF is plugged, and Nova's boot waits for
Neutron's ``network-vif-plugged`` (puma_lab.ovn).  Here, on real
services: the binding in Neutron and in OVN, the address OVN's own DHCP
hands the guest, traffic between two guests through OVN's switch and
its security group, on one host and, through a Geneve tunnel, on two,
and the bindings after each live migration.

The module runs last but for the teardown check (its name): the other
cloud tests still boot without ports (docs/lab-cloud.md).
"""

from puma_lab import cloud_checks as cc

NET_FLAVOR = 'puma.net'


def _net_server(cloud, name, host):
    if not [f for f in cc.osc(cloud, 'flavor', 'list')
            if f['Name'] == NET_FLAVOR]:
        cc.osc(cloud, 'flavor', 'create', '--ram', '384', '--vcpus', '1',
               '--disk', '1', NET_FLAVOR)
    server = cc.osc(cloud, 'server', 'create', '--flavor', NET_FLAVOR,
                    '--image', cc.IMAGE, '--network', cc.NETWORK,
                    '--availability-zone', 'nova:' + host, '--wait', name)
    assert (server['status'], server['OS-EXT-SRV-ATTR:host']) == \
        ('ACTIVE', host), server
    cc.verified(cloud, name)
    return server


def _dhcp(cloud, host, domain, port):
    """The guest's eth0 is the port; OVN's DHCP gives it the port's IP."""
    code, out, err = cc.guest_exec(cloud, host, domain, '/sbin/ip', '-o',
                                   'link', 'show', 'eth0')
    assert code == 0 and port['mac_address'] in out, (out, err)
    assert cc.guest_exec(cloud, host, domain, '/sbin/ip', 'link', 'set',
                         'eth0', 'up')[0] == 0
    ip = port['fixed_ips'][0]['ip_address']
    # udhcpc reports the lease and leaves the interface alone (-s).
    code, out, err = cc.guest_exec(
        cloud, host, domain, '/usr/bin/timeout', '60', '/bin/busybox',
        'udhcpc', '-i', 'eth0', '-n', '-q', '-f', '-t', '10', '-T', '2',
        '-s', '/bin/true', timeout=90)
    print('%s: %s' % (domain, err.strip().splitlines()[-1:]))
    assert code == 0 and 'lease of %s obtained' % ip in err, (out, err)
    assert cc.guest_exec(cloud, host, domain, '/sbin/ip', 'addr', 'add',
                         ip + '/24', 'dev', 'eth0')[0] == 0
    return ip


def _ping(cloud, host, domain, ip):
    code, out, err = cc.guest_exec(cloud, host, domain, '/bin/ping', '-c',
                                   '3', '-W', '5', ip, timeout=60)
    print('%s -> %s: %s' % (domain, ip, out.strip().splitlines()[-2:]))
    return code == 0


def test_ports_bound_by_ovn_with_dhcp_and_traffic(cloud):
    """Two servers on a: bound there, DHCP from OVN, they reach each other.

    Then one and then the other live-migrates to b: its port is bound on
    b (Neutron's port binding of the destination, activated by Nova,
    claimed by b's ovn-controller), and the two reach each other from a
    to b (a Geneve tunnel) and then on b.
    """
    cc.guest_image(cloud)
    net = cc.osc(cloud, 'network', 'show', cc.NETWORK)
    assert (net['provider:network_type'], net['shared'],
            net['status']) == ('geneve', True, 'ACTIVE'), net
    servers = {}
    for name in ('net1', 'net2'):
        s = _net_server(cloud, name, 'a')
        port = cc.bound_on(cloud, name, 'a')
        domain = s['OS-EXT-SRV-ATTR:instance_name']
        # Nova plugged the port into br-int as a tap device of OVS.
        xml = cc.virsh(cloud, 'a', 'dumpxml', domain)
        assert 'tap%s' % port['id'][:11] in xml, xml
        servers[name] = (domain, port, _dhcp(cloud, 'a', domain, port))
    (d1, _, ip1), (d2, _, ip2) = servers['net1'], servers['net2']
    assert _ping(cloud, 'a', d1, ip2) and _ping(cloud, 'a', d2, ip1)

    # net1 moves to b: the two reach each other through a Geneve tunnel
    # between a and b on the overlay network; then net2 follows.
    hosts = {'net1': 'a', 'net2': 'a'}
    for name in ('net1', 'net2'):
        cc.migrate(cloud, name, 'b')
        moved = cc.osc(cloud, 'server', 'show', name)
        assert (moved['status'], moved['OS-EXT-SRV-ATTR:host']) == \
            ('ACTIVE', 'b'), moved
        port = cc.bound_on(cloud, name, 'b', migrated=True)
        assert port['id'] == servers[name][1]['id'], port
        hosts[name] = 'b'
        assert _ping(cloud, hosts['net1'], d1, ip2)
        assert _ping(cloud, hosts['net2'], d2, ip1)
    cc.verified(cloud, 'net1')

    for name in ('net1', 'net2'):
        port_id = servers[name][1]['id']
        cc.osc(cloud, 'server', 'delete', '--wait', name, fmt=False)
        # Nova deleted the port it made; OVN's switch port went with it.
        cc.wait_for('%s gone from OVN' % port_id,
                    lambda: cc.ovn_port(cloud, port_id) == (False, None),
                    60)
        ports = [p['ID'] for p in cc.osc(cloud, 'port', 'list',
                                         '--network', cc.NETWORK)]
        assert port_id not in ports, ports
