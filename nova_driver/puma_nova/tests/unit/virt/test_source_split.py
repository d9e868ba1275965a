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

"""The source side of a split migration and Nova's migration monitor."""

import threading
from unittest import mock

import fixtures
from nova import exception
from nova import objects
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt.libvirt import driver as libvirt_driver
from oslo_utils.fixture import uuidsentinel as uuids

from puma_nova.virt import driver
from puma_nova.virt import split

POSTCOPY = fakelibvirt.VIR_MIGRATE_POSTCOPY
PLAN = {'sub_uri': 'tcp:10.0.0.3:7000', 'main_limit_mb': 128,
        'sub_host': 'sub'}


def _instance(splittable=True):
    specs = {'puma:split': 'allowed'} if splittable else {}
    return objects.Instance(uuid=uuids.instance, system_metadata={},
                            flavor=objects.Flavor(extra_specs=specs))


def source_driver():
    """A Puma driver with only the parts the source side uses."""
    drv = driver.PumaLibvirtDriver.__new__(driver.PumaLibvirtDriver)
    drv._puma_lock = threading.Lock()
    drv._puma_source_plans = {}
    drv._puma_aborted = set()
    drv._puma_local = threading.local()
    drv._puma_compute_api = mock.Mock()
    drv._puma_scheduler_api = mock.Mock()
    return drv


class SourceSplitTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.drv = source_driver()
        self.migrate_data = objects.LibvirtLiveMigrateData(
            migration=objects.Migration(uuid=uuids.migration))
        self.seen = {}

        def live_migration(drv_self, context, instance, dest, post_method,
                           recover_method, block_migration, migrate_data):
            # What Nova's _live_migration does: the monitor (this
            # thread) asks whether post-copy is on; the operation runs
            # in another thread.
            self.seen['monitor_post_copy'] = drv_self._is_post_copy_enabled(
                POSTCOPY)
            op = threading.Thread(target=self._operation, args=(
                drv_self, context, instance, dest, migrate_data))
            op.start()
            op.join()
            if 'error' in self.seen:
                raise self.seen['error']

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._live_migration',
            live_migration))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            '_live_migration_operation', self._nova_operation))

    def _operation(self, drv_self, context, instance, dest, migrate_data):
        guest = mock.Mock(_domain=mock.Mock())
        try:
            drv_self._live_migration_operation(
                context, instance, dest, False, migrate_data, guest, [])
        except Exception as e:
            self.seen['error'] = e

    def _nova_operation(self, drv_self, context, instance, dest,
                        block_migration, migrate_data, guest, device_names):
        self.seen['domain'] = guest._domain
        self.seen['operation_post_copy'] = drv_self._is_post_copy_enabled(
            POSTCOPY)

    def _migrate(self, instance):
        self.drv._live_migration(mock.sentinel.ctxt, instance, 'dest',
                                 None, None, False, self.migrate_data)

    def test_split_monitor_has_no_post_copy(self):
        self.drv._puma_compute_api.get_split_plan.return_value = dict(PLAN)
        self._migrate(_instance())
        self.assertFalse(self.seen['monitor_post_copy'])
        self.assertIsInstance(self.seen['domain'], split.SplitDomain)
        # The plan was fetched once, before the migration started.
        self.drv._puma_compute_api.get_split_plan.assert_called_once_with(
            mock.sentinel.ctxt, 'dest', uuids.instance, uuids.migration)
        self.assertEqual({}, self.drv._puma_source_plans)
        # Other migrations in this thread are Nova's again.
        self.assertTrue(self.drv._is_post_copy_enabled(POSTCOPY))

    def test_whole_migration_keeps_post_copy(self):
        # Splittable, but it fits on the destination: no plan.
        self.drv._puma_compute_api.get_split_plan.return_value = None
        self.drv._puma_scheduler.get_ledger.return_value = []
        self._migrate(_instance())
        self.assertTrue(self.seen['monitor_post_copy'])
        self.assertNotIsInstance(self.seen['domain'], split.SplitDomain)
        self.drv._puma_compute_api.get_split_plan.assert_called_once()

    def test_not_splittable_is_not_asked(self):
        self._migrate(_instance(splittable=False))
        self.assertTrue(self.seen['monitor_post_copy'])
        self.drv._puma_compute_api.get_split_plan.assert_not_called()

    def test_plan_unreachable_first_is_fetched_again(self):
        self.drv._puma_compute_api.get_split_plan.side_effect = [
            RuntimeError('timeout'), dict(PLAN)]
        self._migrate(_instance())
        # The monitor could not know: Nova's setting stays.
        self.assertTrue(self.seen['monitor_post_copy'])
        self.assertIsInstance(self.seen['domain'], split.SplitDomain)
        self.assertEqual(
            2, self.drv._puma_compute_api.get_split_plan.call_count)

    def test_plan_unreachable_fails_the_operation(self):
        self.drv._puma_compute_api.get_split_plan.side_effect = \
            RuntimeError('timeout')
        self.assertRaises(RuntimeError, self._migrate, _instance())
        self.assertNotIn('domain', self.seen)
        self.assertFalse(getattr(self.drv._puma_local, 'split', False))

    def test_nova_post_copy_check_unchanged(self):
        self.assertTrue(libvirt_driver.LibvirtDriver._is_post_copy_enabled(
            self.drv, POSTCOPY))
        self.assertFalse(self.drv._is_post_copy_enabled(0))

    def test_expired_plan_fails_before_libvirt(self):
        # The scheduler expired (or an operator released) the plan the
        # destination still holds: no split migration to a memory
        # server that was stopped.
        class LedgerNotFound(Exception):
            pass

        self.drv._puma_compute_api.get_split_plan.return_value = dict(PLAN)
        self.drv._puma_scheduler.split_state.side_effect = LedgerNotFound(
            'server has no split migration in the ledger')
        e = self.assertRaises(exception.MigrationError, self._migrate,
                              _instance())
        self.assertIn('no longer in the ledger', str(e))
        self.assertNotIn('domain', self.seen)

    def test_scheduler_away_at_start_keeps_the_split(self):
        self.drv._puma_compute_api.get_split_plan.return_value = dict(PLAN)
        self.drv._puma_scheduler.split_state.side_effect = RuntimeError(
            'timeout')
        self._migrate(_instance())
        self.assertIsInstance(self.seen['domain'], split.SplitDomain)


class NovaFlagsTest(test.NoDBTestCase):
    """The flags docs/nova-compute.md quotes for the lab's Nova smoke test.

    Nova's own _parse_migration_flags, run on the Puma driver with the
    options the lab gives the source, then what SplitDomain hands libvirt.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.drv = driver.PumaLibvirtDriver.__new__(driver.PumaLibvirtDriver)
        self.drv._puma_local = threading.local()

    def _split_flags(self):
        calls = []

        class Domain(object):
            def name(self):
                return 'vm1'

            def migrateToURI3(self, uri, params, flags):
                calls.append(flags)

        dom = split.SplitDomain(Domain(), {'split.main-limit': 1})
        dom.migrateToURI3('qemu+tcp://b/system', params={},
                          flags=self.drv._live_migration_flags)
        return calls[0]

    def test_defaults(self):
        self.drv._parse_migration_flags()
        # live, peer-to-peer, persist on the destination, undefine source
        self.assertEqual(0x1b, self.drv._live_migration_flags)
        self.assertEqual(0x1b | split.VIR_MIGRATE_SPLIT, self._split_flags())

    def test_post_copy_permitted(self):
        self.flags(live_migration_permit_post_copy=True, group='libvirt')
        self.drv._parse_migration_flags()
        self.assertEqual(0x801b, self.drv._live_migration_flags)
        # The split leaves post-copy out.
        self.assertEqual(0x1b | split.VIR_MIGRATE_SPLIT, self._split_flags())
