# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""puma-scheduler's placement client against a fake placement adapter."""

import copy

from keystoneauth1 import exceptions as ks_exc
from oslo_config import fixture as config_fixture
import testtools

from puma_nova.conf import scheduler as sched_conf
from puma_nova.scheduler import placement

RP = 'c0ffee00-0000-4000-8000-000000000001'


class Response(object):

    def __init__(self, status_code, body=None):
        self.status_code = status_code
        self._body = body
        self.text = repr(body)

    def json(self):
        return copy.deepcopy(self._body)


def _error(status, code, detail='error'):
    return Response(status, {'errors': [{'status': status, 'code': code,
                                         'detail': detail}]})


class FakeAdapter(object):
    """One compute node provider 'sub', as placement keeps it.

    ``meddle`` is called after each usage read (a concurrent update of
    the provider between the client's read and its write).
    """

    def __init__(self):
        self.generation = 5
        self.memory = {'total': 16384, 'reserved': 512, 'min_unit': 1,
                       'max_unit': 16384, 'step_size': 1,
                       'allocation_ratio': 1.0}
        self.used = 4096
        self.meddle = None
        self.requests = []
        self.put_answer = None

    def get(self, url, microversion=None, raise_exc=None, params=None):
        self.requests.append(('GET', url, microversion))
        if url == '/resource_providers':
            if params == {'name': 'sub'}:
                return Response(200, {'resource_providers': [
                    {'uuid': RP, 'name': 'sub'}]})
            return Response(200, {'resource_providers': []})
        if url == '/resource_providers/%s/inventories' % RP:
            return Response(200, {
                'resource_provider_generation': self.generation,
                'inventories': {'MEMORY_MB': dict(self.memory)}})
        if url == '/resource_providers/%s/usages' % RP:
            answer = Response(200, {
                'resource_provider_generation': self.generation,
                'usages': {'MEMORY_MB': self.used}})
            if self.meddle:
                self.meddle()
            return answer
        return _error(404, 'placement.undefined_code')

    def put(self, url, microversion=None, raise_exc=None, json=None):
        self.requests.append(('PUT', url, microversion))
        if self.put_answer is not None:
            return self.put_answer
        assert url == '/resource_providers/%s/inventories/MEMORY_MB' % RP
        if json['resource_provider_generation'] != self.generation:
            return _error(409, placement.CONCURRENT_UPDATE,
                          'resource provider generation conflict')
        body = dict(json)
        del body['resource_provider_generation']
        self.memory = body
        self.generation += 1
        return Response(200, dict(body,
                                  resource_provider_generation=(
                                      self.generation)))


class PlacementLendingTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.adapter = FakeAdapter()
        self.client = placement.PlacementLending(adapter=self.adapter)

    def test_lend_and_give_back(self):
        self.assertEqual(512 + 2048, self.client.lend('sub', 2048))
        self.assertEqual(512 + 2048, self.adapter.memory['reserved'])
        self.assertEqual(6, self.adapter.generation)
        # The rest of the inventory is written as it was read.
        self.assertEqual(16384, self.adapter.memory['total'])
        self.assertEqual(1.0, self.adapter.memory['allocation_ratio'])
        self.assertEqual(512, self.client.give_back('sub', 2048))
        self.assertEqual(512, self.adapter.memory['reserved'])
        # Every request names the microversion.
        self.assertEqual({placement.MICROVERSION},
                         {r[2] for r in self.adapter.requests})

    def test_provider_looked_up_once(self):
        self.client.lend('sub', 1)
        self.client.lend('sub', 1)
        lookups = [r for r in self.adapter.requests
                   if r[1] == '/resource_providers']
        self.assertEqual(1, len(lookups))

    def test_unknown_host(self):
        ex = self.assertRaises(placement.PlacementError, self.client.lend,
                               'nosuch', 1)
        self.assertIn('no resource provider named nosuch', str(ex))

    def test_generation_conflict_is_retried(self):
        def meddle():
            # Someone reserves 100 MiB more after our read.
            self.adapter.meddle = None
            self.adapter.memory['reserved'] += 100
            self.adapter.generation += 1

        self.adapter.meddle = meddle
        self.assertEqual(512 + 100 + 2048, self.client.lend('sub', 2048))
        puts = [r for r in self.adapter.requests if r[0] == 'PUT']
        self.assertEqual(2, len(puts))

    def test_generation_conflicts_give_up(self):
        def meddle():
            self.adapter.generation += 1

        self.adapter.meddle = meddle
        ex = self.assertRaises(placement.PlacementError, self.client.lend,
                               'sub', 2048)
        self.assertIn('kept changing', str(ex))
        self.assertEqual(512, self.adapter.memory['reserved'])

    def test_other_conflict_not_retried(self):
        self.adapter.put_answer = _error(409, 'placement.undefined_code',
                                         'something else')
        ex = self.assertRaises(placement.PlacementError, self.client.lend,
                               'sub', 2048)
        self.assertIn('something else', str(ex))
        self.assertNotIsInstance(ex, placement.NoRoom)
        puts = [r for r in self.adapter.requests if r[0] == 'PUT']
        self.assertEqual(1, len(puts))

    def test_no_room_writes_nothing(self):
        # 16384 - 512 reserved, 4096 used: 11776 MiB free.
        ex = self.assertRaises(placement.NoRoom, self.client.lend, 'sub',
                               11777)
        self.assertIn('host sub cannot lend 11777 MiB', str(ex))
        self.assertEqual(512, self.adapter.memory['reserved'])
        self.assertEqual([], [r for r in self.adapter.requests
                              if r[0] == 'PUT'])
        self.assertEqual(512 + 11776, self.client.lend('sub', 11776))

    def test_allocation_ratio_counts(self):
        self.adapter.memory['allocation_ratio'] = 2.0
        self.adapter.used = 20000
        # (16384 - 512 - 2048) * 2 = 27648 >= 20000
        self.client.lend('sub', 2048)
        # (16384 - 2560 - 4096) * 2 = 19456 < 20000
        self.assertRaises(placement.NoRoom, self.client.lend, 'sub', 4096)

    def test_give_back_never_below_zero(self):
        self.assertEqual(0, self.client.give_back('sub', 4096))

    def test_give_back_needs_no_room(self):
        self.adapter.used = 40000
        self.assertEqual(0, self.client.give_back('sub', 512))

    def test_usage_read_of_another_generation_read_again(self):
        real = self.adapter.get
        seen = []

        def get(url, **kwargs):
            answer = real(url, **kwargs)
            if url.endswith('/usages') and not seen:
                seen.append(url)
                self.adapter.generation += 1
                self.adapter.used = 1000
                return real(url, **kwargs)
            return answer

        self.adapter.get = get
        self.client.lend('sub', 2048)
        inv_reads = [r for r in self.adapter.requests
                     if r[1].endswith('/inventories') and r[0] == 'GET']
        self.assertEqual(2, len(inv_reads))

    def test_unreachable(self):
        def get(url, **kwargs):
            raise ks_exc.ConnectFailure('refused')

        self.adapter.get = get
        ex = self.assertRaises(placement.PlacementError, self.client.lend,
                               'sub', 1)
        self.assertIn('placement unreachable', str(ex))

    def test_provider_gone_is_looked_up_again(self):
        self.client.lend('sub', 1)
        self.adapter.put_answer = _error(404, 'placement.undefined_code')
        self.assertRaises(placement.PlacementError, self.client.lend,
                          'sub', 1)
        self.adapter.put_answer = None
        self.client.lend('sub', 1)
        lookups = [r for r in self.adapter.requests
                   if r[1] == '/resource_providers']
        self.assertEqual(2, len(lookups))

    def test_from_conf(self):
        sched_conf.register_opts(placement.CONF)
        conf = self.useFixture(config_fixture.Config(placement.CONF))
        self.assertIsInstance(placement.from_conf(),
                              placement.PlacementLending)
        conf.config(placement_lending=False, group='puma_scheduler')
        self.assertIsNone(placement.from_conf())
