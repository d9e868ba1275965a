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
"""The host report names each VM's project, from Nova's instances."""

from unittest import mock

import fixtures
from nova import objects
from nova import test

from puma_nova.compute import agent


def _guest(uuid):
    guest = mock.Mock(uuid=uuid)
    guest._domain.memoryStats.return_value = {'actual': 524288}
    guest._domain.XMLDesc.return_value = '<domain/>'
    return guest


class MemoryStatsProjectTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.agent = agent.ComputeAgent.__new__(agent.ComputeAgent)
        self.agent._libvirt = mock.Mock()
        self.agent._libvirt.get_memory_mb_total.return_value = 4096
        self.agent._libvirt.get_memory_mb_used.return_value = 1024
        self.agent._libvirt.list_guests.return_value = [
            _guest('u1'), _guest('u2')]
        self.agent.memory_servers = mock.Mock()
        self.agent.memory_servers.served_mb.return_value = 0
        self.agent.shoot4u = False
        # Nova's fixtures refuse reads of /sys.
        self.saved_mb = self.useFixture(fixtures.MockPatch(
            'puma_nova.compute.ksm.saved_mb', return_value=0)).mock
        self.cache_saved_mb = self.useFixture(fixtures.MockPatch(
            'puma_nova.compute.host_cache.saved_mb', return_value=0)).mock

    @mock.patch.object(objects.InstanceList, 'get_by_filters')
    def test_each_vm_has_its_instance_project(self, get):
        get.return_value = [mock.Mock(uuid='u1', project_id='p1')]
        vms = self.agent.memory_stats()['vms']
        self.assertEqual({'u1': 'p1', 'u2': None},
                         {vm['uuid']: vm['project_id'] for vm in vms})
        self.assertEqual({'uuid': ['u1', 'u2']}, get.call_args[0][1])

    @mock.patch.object(objects.InstanceList, 'get_by_filters',
                       side_effect=Exception('conductor away'))
    def test_no_instances_no_projects_no_pairs(self, get):
        vms = self.agent.memory_stats()['vms']
        self.assertEqual([None, None], [vm['project_id'] for vm in vms])

    @mock.patch.object(objects.InstanceList, 'get_by_filters',
                       return_value=[])
    def test_host_reports_what_page_merging_saves(self, get):
        self.saved_mb.return_value = 612
        self.assertEqual(612, self.agent.memory_stats()['merged_mb'])

    @mock.patch.object(objects.InstanceList, 'get_by_filters',
                       return_value=[])
    def test_host_reports_what_exclusive_caching_saves(self, get):
        self.cache_saved_mb.return_value = 90
        self.assertEqual(90, self.agent.memory_stats()['cache_saved_mb'])
        # Of the running guests' domains, with the XML their entries
        # were made from: each guest's XML is read once a report.
        (domains,), _kw = self.cache_saved_mb.call_args
        guests = self.agent._libvirt.list_guests.return_value
        self.assertEqual([(g._domain, '<domain/>') for g in guests],
                         domains)
        for g in guests:
            g._domain.XMLDesc.assert_called_once_with(0)

    @mock.patch.object(objects.InstanceList, 'get_by_filters',
                       return_value=[])
    def test_a_guest_whose_xml_cannot_be_read_saves_nothing(self, get):
        guests = self.agent._libvirt.list_guests.return_value
        guests[0]._domain.XMLDesc.side_effect = Exception('domain gone')
        self.assertEqual(2, len(self.agent.memory_stats()['vms']))
        (domains,), _kw = self.cache_saved_mb.call_args
        self.assertEqual([(guests[1]._domain, '<domain/>')], domains)


class Shoot4UProbeTest(test.NoDBTestCase):
    """The agent reports Shoot4U from its own probe of libvirt."""

    def setUp(self):
        super().setUp()
        self.flags(instances_path=self.useFixture(fixtures.TempDir()).path)
        self.flags(virt_type='kvm', group='libvirt')
        self.useFixture(fixtures.MockPatch(
            'puma_nova.scheduler.rpcapi.SchedulerAPI'))

    def _agent(self, libvirt_host):
        return agent.ComputeAgent('h1', libvirt_host, mock.Mock())

    @mock.patch('puma_nova.virt.shoot4u.probe', return_value=True)
    def test_probed(self, probe):
        host = mock.Mock()
        self.assertTrue(self._agent(host).shoot4u)
        probe.assert_called_once_with(host.get_connection.return_value,
                                      'kvm')

    @mock.patch('puma_nova.virt.shoot4u.probe')
    def test_libvirt_not_answering_yet_reports_it_unavailable(self, probe):
        host = mock.Mock()
        host.get_connection.side_effect = Exception('libvirtd not up')
        self.assertFalse(self._agent(host).shoot4u)
        probe.assert_not_called()

    @mock.patch('puma_nova.virt.shoot4u.probe')
    def test_not_allowed_or_no_libvirt_is_not_probed(self, probe):
        self.assertFalse(self._agent(None).shoot4u)
        self.flags(shoot4u_allowed=False, group='puma')
        self.assertFalse(self._agent(mock.Mock()).shoot4u)
        probe.assert_not_called()
