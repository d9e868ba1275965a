# SPDX-License-Identifier: Apache-2.0
"""A split that puma-api planned and Nova refused leaves nothing behind.

puma-api plans a split migration (a ledger entry, a reserved memory
server, the memory it lends reserved on the sub host in placement), then
asks Nova for the live migration.  Here Nova refuses it (no valid host:
the main host lacks a trait the server's flavor requires): the SDK asks
with compute API 2.30, under which Nova's conductor checks the
destination before it answers, so the refusal is the answer (400), and
puma-api must give everything back before it reports the error: the
ledger entry released, the memory server record stopped, the sub host's
reserved memory in placement as before; the server stays on a, intact.
(A refusal that comes after Nova accepted, from compute API 2.34 on, is
released by puma-scheduler from Nova's migration records:
scheduler/failed_plans.py, unit tests.)
"""

import json

import pytest

from puma_lab import cloud_checks as cc
from puma_lab import errors

# Hosts a and b report it (Shoot4U hosts), c does not.
TRAIT = 'CUSTOM_PUMA_SHOOT4U'
FLAVOR = 'puma.split-traited'


def memory_reserved(cloud, host):
    """MEMORY_MB reserved in HOST's resource provider (placement)."""
    token = cc.osc(cloud, 'token', 'issue')['id']

    def get(path):
        return json.loads(cloud.run(['curl', '-sf', '-H',
                                     'X-Auth-Token: ' + token,
                                     cloud.url('placement', path)]))
    rp, = get('/resource_providers?name=%s' % host)['resource_providers']
    return get('/resource_providers/%s/inventories/MEMORY_MB'
               % rp['uuid'])['reserved']


def test_split_nova_refuses_gives_everything_back(cloud):
    uuid, name, rounds = cc.split_server(
        cloud, 'vm-plan', FLAVOR, ['trait:%s=required' % TRAIT])
    try:
        cc.model_small(cloud, 'c')
        try:
            before = memory_reserved(cloud, 'b')
            with pytest.raises(errors.LabError) as e:
                cc.osc(cloud, 'puma', 'split', 'migrate', uuid,
                       '--host', 'c')
            print('puma-api: %s' % e.value)
            assert 'puma-api answered 502' in str(e.value), e.value
            assert 'No valid host was found' in str(e.value), e.value
            entries = cc.puma_list(cloud, 'ledger', server=uuid)
            assert [(x['main_host'], x['sub_host'], x['state'])
                    for x in entries] == [('c', 'b', 'released')], entries
            servers = [s for s in cc.puma_list(cloud, 'memory-servers',
                                               host='b')
                       if s['instance_uuid'] == uuid]
            assert [x['state'] for x in servers] == ['stopped'], servers
            assert memory_reserved(cloud, 'b') == before
            cc.placement_audit(cloud)
        finally:
            cloud.model_free_memory('c')
        cc.stays_on_a(cloud, uuid, name, rounds)
    finally:
        cc.discard(cloud, uuid)
