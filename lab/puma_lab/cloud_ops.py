# SPDX-License-Identifier: Apache-2.0
"""Client-side steps of ``./lab/cloud``, run inside the control namespace.

:mod:`puma_lab.cloud` runs this module with the cloud environment's
Python (``lab/setup cloud``) in the control host's network namespace,
where the services' addresses are reachable; it talks to the real APIs
with openstacksdk. Commands (one JSON argument each)::

    wait-http {"url": ..., "timeout": s}
    accounts  {"auth": {...}, "services": [...], "demo": {...}}
    wait-computes {"cloud": NAME, "hosts": [...], "timeout": s}
    hypervisors {"cloud": NAME}
    network {"cloud": NAME, "name": ..., "subnet": ..., "cidr": ...}
"""

import json
import sys
import time
import urllib.error
import urllib.request


def wait_http(url, timeout):
    """Until URL answers HTTP at all (any status: the API is up)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError as e:
            last = e
            time.sleep(0.5)
    raise SystemExit('%s did not answer in %ss: %s' % (url, timeout, last))


def accounts(auth, services, demo):
    """Service project and users, the service role, catalog, demo project.

    Idempotent: what exists is kept. SERVICES: dicts with name, type,
    description, url and user (None for keystone itself).
    """
    import openstack
    auth = dict(auth)
    region = auth.pop('region_name', 'RegionOne')
    conn = openstack.connect(auth_type='password', auth=auth,
                             region_name=region)
    service_project = (conn.identity.find_project('service') or
                       conn.identity.create_project(
                           name='service', domain_id='default',
                           description='OpenStack services'))
    roles = {}
    for name in ('admin', 'member', 'reader', 'service'):
        roles[name] = (conn.identity.find_role(name) or
                       conn.identity.create_role(name=name))
    for s in services:
        if s.get('user'):
            user = (conn.identity.find_user(s['user'], domain_id='default')
                    or conn.identity.create_user(
                        name=s['user'], password=auth['password'],
                        domain_id='default',
                        default_project_id=service_project.id))
            for role in ('admin', 'service'):
                conn.identity.assign_project_role_to_user(
                    service_project, user, roles[role])
        svc = conn.identity.find_service(s['name'])
        if svc is None:
            svc = conn.identity.create_service(
                name=s['name'], type=s['type'],
                description=s['description'])
        have = {e.interface for e in conn.identity.endpoints(
            service_id=svc.id)}
        for interface in ('public', 'internal', 'admin'):
            if interface not in have:
                conn.identity.create_endpoint(
                    service_id=svc.id, interface=interface, url=s['url'],
                    region_id=region)
    project = (conn.identity.find_project(demo['project']) or
               conn.identity.create_project(name=demo['project'],
                                            domain_id='default',
                                            description='Demo project'))
    user = (conn.identity.find_user(demo['user'], domain_id='default') or
            conn.identity.create_user(name=demo['user'],
                                      password=auth['password'],
                                      domain_id='default',
                                      default_project_id=project.id))
    conn.identity.assign_project_role_to_user(project, user,
                                              roles['member'])
    return {'service_project': service_project.id, 'demo_project':
            project.id}


def wait_computes(cloud, hosts, timeout):
    """Until every host's nova-compute is up and has its provider.

    The resource provider in placement is named after the node, which is
    the host's name in the lab cloud.
    """
    import openstack
    conn = openstack.connect(cloud=cloud)
    deadline = time.monotonic() + timeout
    seen = providers = {}
    while time.monotonic() < deadline:
        seen = {s.host: s.state for s in conn.compute.services()
                if s.binary == 'nova-compute'}
        providers = {p.name for p in conn.placement.resource_providers()}
        if all(seen.get(h) == 'up' and h in providers for h in hosts):
            return seen
        time.sleep(2)
    raise SystemExit('nova-compute not up on every host in %s s: '
                     'services %s, resource providers %s'
                     % (timeout, seen, sorted(providers)))


def hypervisors(cloud):
    """Hypervisor host name: state, as Nova's API lists them."""
    import openstack
    conn = openstack.connect(cloud=cloud)
    return {h.name: h.state for h in conn.compute.hypervisors(details=True)}


def network(cloud, name, subnet, cidr):
    """A shared tenant network with a DHCP subnet (kept if it exists).

    Neutron's default network type (geneve, OVN); OVN answers DHCP
    itself. Returns the network's and the subnet's IDs.
    """
    import openstack
    conn = openstack.connect(cloud=cloud)
    net = (conn.network.find_network(name) or
           conn.network.create_network(name=name, shared=True))
    sub = (conn.network.find_subnet(subnet, network_id=net.id) or
           conn.network.create_subnet(name=subnet, network_id=net.id,
                                      ip_version=4, cidr=cidr,
                                      enable_dhcp=True))
    return {'network': net.id, 'subnet': sub.id,
            'type': net.provider_network_type}


def main(argv):
    cmd, arg = argv[1], json.loads(argv[2])
    if cmd == 'wait-http':
        out = wait_http(arg['url'], arg['timeout'])
    elif cmd == 'accounts':
        out = accounts(arg['auth'], arg['services'], arg['demo'])
    elif cmd == 'hypervisors':
        out = hypervisors(arg['cloud'])
    elif cmd == 'wait-computes':
        out = wait_computes(arg['cloud'], arg['hosts'], arg['timeout'])
    elif cmd == 'network':
        out = network(arg['cloud'], arg['name'], arg['subnet'], arg['cidr'])
    else:
        raise SystemExit('unknown command %r' % cmd)
    print(json.dumps(out))


if __name__ == '__main__':
    main(sys.argv)
