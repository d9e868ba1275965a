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

"""What each life-cycle event of Nova does to a split instance.

The instance is split by a live migration src -> dest (sub host sub),
then goes through one event (docs/nova-compute.md, "Life cycle of a
split instance"): an event that restarts QEMU gives the split back (the
ledger entry, the memory server, the raised inventories), an event that
keeps QEMU running keeps it, a suspend is refused.
"""

from unittest import mock

from nova.tests.functional.api import client

from puma_nova.compute import memory_server
from puma_nova.tests.functional import test_split_migration as base

GIB = base.GIB


class SplitLifeCycleTest(base.PumaServersTestBase):

    def _split_on_dest(self):
        self.base_dest = self._memory_inventory('dest')
        self.base_sub = self._memory_inventory('sub')
        server = self._boot(self._split_flavor())
        self._live_migrate(server, 'completed', host='dest')
        # Nova migrates with VIR_MIGRATE_PERSIST_DEST and
        # VIR_MIGRATE_UNDEFINE_SOURCE; the fixture's migration stub
        # leaves the guest transient on dest (gone once it stops) and
        # defined on src (an evacuation to src finds it there).
        conn = self.src.driver._host.get_connection()
        dom = conn.lookupByUUIDString(server['id'])
        dom.destroy()
        dom.undefine()
        conn = self.dest.driver._host.get_connection()
        conn.lookupByUUIDString(server['id'])._transient = False
        self.assertEqual('done', self.sched.ledger[server['id']]['state'])
        servers = self.agents['sub'].memory_servers.list()
        self.pid = servers[server['id']]['pid']
        self.assertTrue(memory_server._alive(self.pid))
        self._run_periodics()
        self.assertEqual(self.base_dest['total'] + 2 * GIB,
                         self._memory_inventory('dest')['total'])
        return self.api.get_server(server['id'])

    def _assert_released(self, server, host='dest'):
        self.assertEqual({}, self.sched.ledger)
        self.assertIn(('release_split', server['id'], 'dest'),
                      self.sched.calls)
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertFalse(memory_server._alive(self.pid))
        self.assertEqual(host, self.api.get_server(server['id'])
                         ['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        self.assertEqual(self.base_dest, self._memory_inventory('dest'))
        self.assertEqual(self.base_sub, self._memory_inventory('sub'))
        self._assert_placement_clean()

    def _assert_kept(self, server):
        self.assertEqual('done', self.sched.ledger[server['id']]['state'])
        self.assertEqual([server['id']],
                         list(self.agents['sub'].memory_servers.list()))
        self.assertTrue(memory_server._alive(self.pid))
        self._run_periodics()
        self.assertEqual(self.base_dest['total'] + 2 * GIB,
                         self._memory_inventory('dest')['total'])
        self.assertEqual(self.base_sub['reserved'] + 2 * GIB,
                         self._memory_inventory('sub')['reserved'])
        self._assert_placement_clean()

    def test_hard_reboot_drains_back(self):
        server = self._split_on_dest()
        self._reboot_server(server, hard=True)
        self._assert_released(server)

    def test_soft_reboot_drains_back(self):
        # Nova's libvirt soft reboot shuts the domain down and starts a
        # new QEMU.
        server = self._split_on_dest()
        self._reboot_server(server, hard=False)
        self._assert_released(server)

    def test_stop_drains_back_and_start_boots_whole(self):
        server = self._split_on_dest()
        self._stop_server(server)
        self._assert_released(server)
        self._start_server(server)
        self.assertEqual({}, self.sched.ledger)
        self._assert_placement_clean()

    def test_rebuild_drains_back(self):
        server = self._split_on_dest()
        self._rebuild_server(server, server['image']['id'])
        self._assert_released(server)

    def test_cold_migrate_releases(self):
        server = self._split_on_dest()
        # As Nova's own libvirt functional tests do: no disk to copy.
        with mock.patch('nova.virt.libvirt.driver.LibvirtDriver.'
                        'migrate_disk_and_power_off', return_value='{}'):
            self._migrate_server(server, host='src')
        self.assertEqual({}, self.sched.ledger)
        self._confirm_resize(server)
        self._assert_released(server, host='src')

    def test_resize_releases(self):
        server = self._split_on_dest()
        bigger = self._create_flavor(memory_mb=4 * GIB, vcpu=2, disk=1,
                                     ephemeral=0,
                                     extra_spec={'puma:split': 'allowed'})
        with mock.patch('nova.virt.libvirt.driver.LibvirtDriver.'
                        'migrate_disk_and_power_off', return_value='{}'):
            server = self._resize_server(server, bigger)
        self.assertEqual({}, self.sched.ledger)
        self._confirm_resize(server)
        self._assert_released(server,
                              host=server['OS-EXT-SRV-ATTR:host'])

    def test_evacuate_releases(self):
        server = self._split_on_dest()
        self.dest.stop()
        self.api.put_service(self.dest.service_ref.uuid,
                             {'forced_down': True})
        server = self._evacuate_server(
            server, extra_post_args={'host': 'src'}, expected_host='src',
            expected_state='ACTIVE')
        # The split of the failed main host is given back by src, where
        # QEMU now runs with all of the memory.
        self.assertEqual({}, self.sched.ledger)
        self.assertIn(('release_split', server['id'], 'dest'),
                      self.sched.calls)
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertFalse(memory_server._alive(self.pid))
        # dest comes back, drops the evacuated guest and its allocation.
        self.restart_compute_service('dest')
        self.api.put_service(self.dest.service_ref.uuid,
                             {'forced_down': False})
        self.dest = self.computes['dest']
        self._run_periodics()
        self.assertEqual(self.base_dest, self._memory_inventory('dest'))
        self.assertEqual(self.base_sub, self._memory_inventory('sub'))
        self._assert_placement_clean()

    def test_suspend_refused_keeps_split(self):
        server = self._split_on_dest()
        try:
            self.api.post_server_action(server['id'], {'suspend': {}})
        except client.OpenStackApiException:
            pass
        self._wait_for_instance_action_event(
            server, 'suspend', 'compute_suspend_instance', 'Error')
        server = self._wait_for_state_change(server, 'ACTIVE')
        # The API shows faults of ERROR instances only: the compute log.
        self.assertIn('Failed to suspend instance: instance %s keeps 2048 '
                      'MiB of its memory on sub host sub' % server['id'],
                      self.stdlog.logger.output)
        self._assert_kept(server)

    def test_pause_keeps_split(self):
        server = self._split_on_dest()
        self.api.post_server_action(server['id'], {'pause': {}})
        server = self._wait_for_state_change(server, 'PAUSED')
        self._assert_kept(server)
        self.api.post_server_action(server['id'], {'unpause': {}})
        server = self._wait_for_state_change(server, 'ACTIVE')
        self._assert_kept(server)

    def test_cold_snapshot_refused_keeps_split(self):
        # Without live snapshots Nova's libvirt driver suspends (a managed
        # save of the memory) before it copies the disk: refused as the
        # suspend is, the image Nova's API made is deleted and the
        # instance stays ACTIVE, split.
        self.flags(disable_libvirt_livesnapshot=True, group='workarounds')
        server = self._split_on_dest()
        images = set(self.glance.images)
        self.api.post_server_action(server['id'],
                                    {'createImage': {'name': 'snap'}})
        self.assertEqual(len(images) + 1, len(self.glance.images))
        server = self._wait_for_server_parameter(
            server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None})
        # Nova's snapshot path logs nothing of it: the driver does.
        self.assertIn('Puma: refused to save the memory of %s (suspend or '
                      'cold snapshot): instance %s keeps 2048 MiB of its '
                      'memory on sub host sub' % (server['id'], server['id']),
                      self.stdlog.logger.output)
        # No image is left half made.
        self.assertEqual(images, set(self.glance.images))
        self._assert_kept(server)
