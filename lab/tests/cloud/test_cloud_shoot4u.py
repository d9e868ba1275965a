# SPDX-License-Identifier: Apache-2.0
"""Shoot4U through the lab cloud: a flavor extra spec, end to end.

The computes a and b offer Shoot4U (``[puma] shoot4u_allowed``, and the
patched libvirt knows ``<kvm><pv-tlb-shootdown/></kvm>``, which the
driver probes at start), c does not (cloud.SHOOT4U_HOSTS).  The drivers
report that as the trait CUSTOM_PUMA_SHOOT4U, and docs/nova-compute.md
tells operators to require it in Shoot4U flavors.  Checked here, with
the real API, scheduler, placement and computes:

- the trait is on a and b and not on c in placement;
- a server of a flavor with ``puma:shoot4u=true`` and the trait required
  lands on a or b, its domain has the element and its QEMU runs with
  ``kvm-shoot4u=on``, and its working set checks out;
- asked onto c, it is refused by the scheduler (no valid host), and so
  is a live migration of it to c, the server staying, intact, where it
  was; a flavor that forgets the trait is refused on c by c's driver,
  the build aborted with a fault that says why.
"""

import json

from puma_lab import cloud as cloud_mod
from puma_lab import cloud_checks as cc
from puma_lab import errors
from puma_lab import netns

TRAIT = 'CUSTOM_PUMA_SHOOT4U'
FLAVOR = 'puma.shoot4u'
# The mistake the docs warn of: Shoot4U asked for, the trait not.
UNTRAITED = 'puma.shoot4u-untraited'
WITHOUT = [h for h in cloud_mod.COMPUTES if h not in cloud_mod.SHOOT4U_HOSTS]


def provider_traits(cloud, host):
    """The traits of HOST's resource provider, from placement's API."""
    token = cc.osc(cloud, 'token', 'issue')['id']
    head = ['-H', 'X-Auth-Token: ' + token,
            '-H', 'OpenStack-API-Version: placement 1.6']

    def get(path):
        return json.loads(cloud.run(['curl', '-sf'] + head +
                                    [cloud.url('placement', path)]))
    rp = get('/resource_providers?name=%s' % host)['resource_providers']
    assert len(rp) == 1, rp
    return set(get('/resource_providers/%s/traits' % rp[0]['uuid'])
               ['traits'])


def flavor(cloud, name, *props):
    if not [f for f in cc.osc(cloud, 'flavor', 'list') if f['Name'] == name]:
        args = []
        for p in ('puma:shoot4u=true',) + props:
            args += ['--property', p]
        cc.osc(cloud, 'flavor', 'create', '--ram', '512', '--vcpus', '1',
               '--disk', '1', *args, name)


def refused_boot(cloud, name, flavor_name, host):
    """A server of FLAVOR_NAME asked onto HOST: its fault, once ERROR."""
    try:
        cc.osc(cloud, 'server', 'create', '--flavor', flavor_name,
               '--image', cc.IMAGE, *cc.nic_args(), '--availability-zone',
               'nova:%s' % host, '--wait', name, fmt=False)
    except errors.LabError as e:
        print('server create %s on %s: %s' % (name, host, str(e)[-300:]))
    else:
        raise AssertionError('%s became ACTIVE on %s' % (name, host))
    shown = cc.osc(cloud, 'server', 'show', name)
    assert shown['status'] == 'ERROR', shown
    cc.osc(cloud, 'server', 'delete', '--wait', name, fmt=False)
    print('fault of %s: %s' % (name, shown['fault']['message']))
    return shown['fault']['message']


def qemu_argv(cloud, host, name):
    """The command line of the QEMU that runs domain NAME on HOST."""
    for pid in netns.pids(cloud.state['hosts'][host]['ns']):
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                argv = f.read().decode(errors='replace').split('\0')
        except OSError:
            continue
        if '-name' in argv and argv[argv.index('-name') + 1].startswith(
                'guest=%s,' % name):
            return argv
    raise AssertionError('no QEMU runs domain %s on %s' % (name, host))


def test_shoot4u_flavor_lands_only_where_shoot4u_is(cloud):
    for host in cloud_mod.COMPUTES:
        traits = cc.wait_for(
            'the Shoot4U trait of %s' % host,
            lambda h=host: [t for t in [provider_traits(cloud, h)]
                            if (TRAIT in t) == (h in cloud_mod.SHOOT4U_HOSTS)],
            cc.SERVER_TIMEOUT)[0]
        custom = sorted(t for t in traits if t.startswith('CUSTOM_'))
        print('%s: %s' % (host, custom))
    cc.guest_image(cloud)
    flavor(cloud, FLAVOR, 'trait:%s=required' % TRAIT)
    flavor(cloud, UNTRAITED)

    server = cc.osc(cloud, 'server', 'create', '--flavor', FLAVOR,
                    '--image', cc.IMAGE, *cc.nic_args(), '--wait', 's4u')
    try:
        host = server['OS-EXT-SRV-ATTR:host']
        name = server['OS-EXT-SRV-ATTR:instance_name']
        assert server['status'] == 'ACTIVE', server
        assert host in cloud_mod.SHOOT4U_HOSTS, server
        xml = cc.virsh(cloud, host, 'dumpxml', name)
        assert "<pv-tlb-shootdown state='on'/>" in xml, xml
        argv = qemu_argv(cloud, host, name)
        cpu = argv[argv.index('-cpu') + 1]
        print('QEMU of %s on %s: -cpu %s' % (name, host, cpu))
        assert 'kvm-shoot4u=on' in cpu.split(','), argv
        rounds = cc.verified(cloud, 's4u')

        # Onto c: the scheduler finds no host with the trait.
        for h in WITHOUT:
            fault = refused_boot(cloud, 's4u-on-%s' % h, FLAVOR, h)
            assert 'No valid host was found' in fault, fault
            # Without the trait in the flavor, c's driver refuses the
            # boot, saying why.
            fault = refused_boot(cloud, 's4u-untraited-%s' % h, UNTRAITED,
                                 h)
            assert 'Shoot4U (puma:shoot4u) was requested' in fault, fault
            assert 'cannot provide it' in fault, fault
            # A live migration to c: no valid host either, and the
            # server runs on where it was.
            try:
                cc.migrate(cloud, 's4u', h)
            except errors.LabError as e:
                print('live migration to %s: %s' % (h, str(e)[-400:]))
                assert 'No valid host was found' in str(e), e
            else:
                raise AssertionError('s4u live-migrated to %s' % h)
            shown = cc.settled(cloud, 's4u')
            assert shown['OS-EXT-SRV-ATTR:host'] == host, shown
            assert name in cc.domains(cloud, host)
            assert [m['Status'] for m in cc.migrations(cloud, 's4u')
                    ][:1] == ['error']
        cc.verified(cloud, 's4u', after=rounds)
    finally:
        cc.discard(cloud, server['id'])
    assert cc.osc(cloud, 'server', 'list') == []
    cc.placement_audit(cloud)
