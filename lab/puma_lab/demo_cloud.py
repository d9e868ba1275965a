# SPDX-License-Identifier: Apache-2.0
"""The demo's cloud part: a split migration driven by ``openstack``.

The lab cloud (:mod:`puma_lab.cloud`) comes up, a 512 MiB server of a
flavor that allows splitting boots on host a with a checksummed working
set inside, and ``openstack server migrate --live-migration --host b``
moves it to host b, which Nova sees with too little free memory for it:
Puma's driver turns the move into a split migration with the memory
server on host c.  The demo shows what Nova, puma-api and QEMU say, that
the working set still verifies, and takes the cloud down again.  With a
cloud already up (``./lab/cloud up``) it uses that one and leaves it up.

``python -m puma_lab.demo_cloud`` runs this part alone.
"""

import json
import sys
import time

from puma_lab import cloud as cloud_mod
from puma_lab import cloud_checks as cc
from puma_lab import errors

SERVER = 'demo-split'


def show(cloud):
    """Create, split-migrate and delete the demo's server; True if OK.

    The server is deleted also when a step fails, so that a cloud that
    stays up (``./lab/cloud up``, the tests' session cloud) keeps nothing
    of the demo.
    """
    try:
        return _show(cloud)
    finally:
        left = [s for s in cc.osc(cloud, 'server', 'list', '--name',
                                  '^%s$' % SERVER)]
        for s in left:
            cc.osc(cloud, 'server', 'delete', '--wait', s['ID'], fmt=False)
            cc.released(cloud, s['ID'])


def _show(cloud):
    t0 = time.monotonic()
    uuid, domain, rounds = cc.split_server(cloud, SERVER)
    print('server %s (flavor %s: 512 MiB, puma:split=allowed): ACTIVE on '
          'host a in %.0f s; its working set verified %d rounds'
          % (SERVER, cc.SPLIT_FLAVOR, time.monotonic() - t0, rounds))
    try:
        cc.model_small(cloud, 'b')
        print('host b is modelled with %d MiB free; openstack server migrate '
              '--live-migration --host b %s ...' % (cc.MAIN_FREE_MB, SERVER))
        t0 = time.monotonic()
        cc.migrate(cloud, SERVER, 'b')
        took = time.monotonic() - t0
    finally:
        cloud.model_free_memory('b')
    moved = cc.osc(cloud, 'server', 'show', SERVER)
    migs = cc.migrations(cloud, SERVER)
    print('openstack server migration list: %s; %s is %s on host %s '
          '(%.0f s)' % (', '.join('%s -> %s %s' % (
              m['Source Compute'], m['Dest Compute'], m['Status'])
              for m in migs), SERVER, moved['status'],
              moved['OS-EXT-SRV-ATTR:host'], took))
    entries = [e for e in cc.puma_list(cloud, 'ledger', server=uuid)
               if e['state'] in ('running', 'done')]
    for e in entries:
        print('openstack puma ledger: main host %s keeps %d MiB, sub host '
              '%s holds %d MiB (%s)' % (
                  e['main_host'], e['main_limit_mb'], e['sub_host'], e['mb'],
                  e['state']))
    st = json.loads(cc.virsh(cloud, 'b', 'qemu-monitor-command', domain,
                             '{"execute": "x-query-split"}'))['return']
    print('x-query-split on b: state %s; pages resident %d, remote %d, '
          'unused %d; page-ins %d, page-outs %d' % (
              st['state'], st['resident-pages'], st['remote-pages'],
              st['unused-pages'], st['page-ins'], st['page-outs']))
    after = cc.verified(cloud, SERVER, after=rounds)
    print('working set: verified through round %d after the move'
          % after)
    cc.osc(cloud, 'server', 'delete', '--wait', uuid, fmt=False)
    cc.released(cloud, uuid)
    ok = (moved['status'], moved['OS-EXT-SRV-ATTR:host']) == \
        ('ACTIVE', 'b') and [m['Status'] for m in migs] == ['completed'] \
        and [(e['main_host'], e['sub_host']) for e in entries] == \
        [('b', 'c')] and st['remote-pages'] > 0
    print('RESULT: %s' % ('OK, split-migrated through OpenStack, server '
                          'deleted, nothing left reserved' if ok else
                          'FAILED'))
    return ok


def run(say=None):
    """The cloud part, with the cloud that is up or one of its own."""
    why = cloud_mod.missing()
    if why:
        print('cloud: FAILED, the lab cloud cannot run: %s' % why)
        return False
    rundir = cloud_mod.find()
    if rundir:
        print('cloud: using the lab cloud that is up in %s' % rundir)
        return show(cloud_mod.Cloud.attach(rundir, say=say))
    cloud = cloud_mod.Cloud(say=say)
    print('cloud: bringing the lab cloud up (Keystone, Placement, Glance, '
          'Neutron, Nova, puma-scheduler, puma-api, Horizon; nova-compute '
          'with the Puma driver on hosts a, b, c) ...')
    t0 = time.monotonic()
    try:
        cloud.up()
        print('cloud: up in %.0f s' % (time.monotonic() - t0))
        return show(cloud)
    finally:
        if cloud.lab is not None:
            cloud_mod.down(cloud.lab.dir, say=say or (lambda m: None))


def main():
    try:
        return 0 if run() else 1
    except (errors.LabError, AssertionError) as e:
        print('cloud demo failed: %s' % e, file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
