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

"""A migration that Nova rolled back leaves the instance ACTIVE here;
one whose monitoring failed after libvirt completed it is finished."""

from unittest import mock

import fixtures
from nova.compute import power_state
from nova import exception
from nova import objects
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from oslo_utils.fixture import uuidsentinel as uuids

from puma_nova.tests.unit.virt import test_source_split


class MigrationFailed(Exception):
    pass


class FailedMigrationTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtFixture())
        drv = self.drv = test_source_split.source_driver()
        drv._host = mock.Mock()
        self.guest = drv._host.get_guest.return_value
        self.guest.get_power_state.return_value = power_state.RUNNING
        self.instance = objects.Instance(
            uuid=uuids.instance, system_metadata={},
            flavor=objects.Flavor(extra_specs={}))
        self.recover = mock.Mock()
        self.start = self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.event_start')).mock
        self.finish = self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.'
            'event_finish_with_failure')).mock
        self.rolls_back = True

        def live_migration(drv_self, context, instance, dest, post_method,
                           recover_method, block_migration, migrate_data):
            # Nova 34: the monitor rolls a failed job back, then the
            # migration thread's error is raised (future.result()).
            if self.rolls_back:
                recover_method(context, instance, dest, migrate_data,
                               migration_status='error')
            raise MigrationFailed('Memory server tcp:10.0.0.3:7000: send '
                                  'failed: Broken pipe')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._live_migration',
            live_migration))

    def _migrate(self):
        return self.drv._live_migration(
            mock.sentinel.ctxt, self.instance, 'dest', None, self.recover,
            False, mock.sentinel.migrate_data)

    def test_rolled_back_failure_is_an_event_not_an_error_state(self):
        self.assertIsNone(self._migrate())
        self.recover.assert_called_once_with(
            mock.sentinel.ctxt, self.instance, 'dest',
            mock.sentinel.migrate_data, migration_status='error')
        self.start.assert_called_once_with(
            mock.sentinel.ctxt, uuids.instance, 'puma_live_migration',
            want_result=False, host=mock.ANY)
        kwargs = self.finish.call_args.kwargs
        # Its details, which the owner sees, say what happened without
        # libvirt's message; the traceback (admins) ends with it.
        self.assertIsInstance(kwargs['exc_val'], exception.MigrationError)
        self.assertIn('failed and was rolled back',
                      kwargs['exc_val'].format_message())
        self.assertNotIn('tcp:', kwargs['exc_val'].format_message())
        self.assertIn('MigrationFailed: Memory server tcp:10.0.0.3:7000: '
                      'send failed: Broken pipe', kwargs['exc_tb'])

    def test_failure_without_rollback_is_raised(self):
        # Nova's monitor failed before it rolled back: the manager must
        # see the error (and set the instance's error state).
        self.rolls_back = False
        self.assertRaises(MigrationFailed, self._migrate)
        self.start.assert_not_called()

    def test_failure_of_an_instance_gone_from_here_is_raised(self):
        self.guest.get_power_state.return_value = power_state.SHUTDOWN
        self.assertRaises(MigrationFailed, self._migrate)
        self.drv._host.get_guest.side_effect = RuntimeError('no domain')
        self.assertRaises(MigrationFailed, self._migrate)
        self.start.assert_not_called()

    def test_failure_that_left_the_source_paused_is_raised(self):
        # A post-copy migration that failed after the switchover: the
        # source is paused, its memory partly on the destination.
        self.guest.get_power_state.return_value = power_state.PAUSED
        self.assertRaises(MigrationFailed, self._migrate)
        self.guest.get_power_state.assert_called_with(self.drv._host)
        self.start.assert_not_called()

    def test_event_that_cannot_be_recorded_is_logged(self):
        self.start.side_effect = RuntimeError('conductor unreachable')
        self.assertIsNone(self._migrate())


class MonitorFailedAfterCompletionTest(test.NoDBTestCase):
    """Nova's monitor failed while libvirt completed the migration.

    Seen in the lab cloud with RabbitMQ restarted during a migration:
    the monitor's progress save (a conductor call) lost its reply and
    timed out after 60 s, by which time the migration had completed and
    the domain had left this host; Nova could not abort it and put the
    instance, which ran intact on the destination, in ERROR on the
    source.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtFixture())
        drv = self.drv = test_source_split.source_driver()
        drv._host = mock.Mock()
        drv._host.get_guest.side_effect = exception.InstanceNotFound(
            instance_id=uuids.instance)
        self.instance = objects.Instance(
            uuid=uuids.instance, system_metadata={},
            flavor=objects.Flavor(extra_specs={}))
        self.post = mock.Mock()
        self.recover = mock.Mock()
        self.completes = False

        def live_migration(drv_self, context, instance, dest, post_method,
                           recover_method, block_migration, migrate_data):
            if self.completes:
                # The monitor saw the job complete; the post step failed.
                post_method(context, instance, dest, block_migration,
                            migrate_data)
            raise MigrationFailed('Timed out waiting for a reply')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._live_migration',
            live_migration))

    def _migrate(self):
        return self.drv._live_migration(
            mock.sentinel.ctxt, self.instance, 'dest', self.post,
            self.recover, False, mock.sentinel.migrate_data)

    def test_migration_that_left_is_finished(self):
        self.assertIsNone(self._migrate())
        self.post.assert_called_once_with(
            mock.sentinel.ctxt, self.instance, 'dest', False,
            mock.sentinel.migrate_data)
        self.recover.assert_not_called()

    def test_failed_post_step_is_not_run_twice(self):
        self.completes = True
        self.post.side_effect = [None]
        self.assertRaises(MigrationFailed, self._migrate)
        self.post.assert_called_once()

    def test_domain_still_here_is_raised(self):
        # Still defined here (running, paused or shut off): libvirt did
        # not complete the migration.
        self.drv._host.get_guest.side_effect = None
        self.drv._host.get_guest.return_value.get_power_state.\
            return_value = power_state.SHUTDOWN
        self.assertRaises(MigrationFailed, self._migrate)
        self.post.assert_not_called()

    def test_unknown_domain_state_is_raised(self):
        self.drv._host.get_guest.side_effect = RuntimeError('libvirtd away')
        self.assertRaises(MigrationFailed, self._migrate)
        self.post.assert_not_called()


class AbortedMigrationTest(test.NoDBTestCase):
    """An aborted job that ended between two polls of Nova's monitor.

    The monitor then reads VIR_DOMAIN_JOB_NONE, finds the domain active
    here and rolls back as for a failed job: the migration said 'failed'
    where the operator had aborted it (lab cloud CI of 2026-12-02).
    """

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtFixture())
        drv = self.drv = test_source_split.source_driver()
        drv._host = mock.Mock()
        self.guest = drv._host.get_guest.return_value
        self.guest.get_power_state.return_value = power_state.RUNNING
        self.instance = objects.Instance(
            uuid=uuids.instance, system_metadata={},
            flavor=objects.Flavor(extra_specs={}))
        self.recover = mock.Mock()
        self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.event_start'))
        self.useFixture(fixtures.MockPatch(
            'nova.objects.InstanceActionEvent.event_finish_with_failure'))
        self.abort_first = True

        def live_migration(drv_self, context, instance, dest, post_method,
                           recover_method, block_migration, migrate_data):
            if self.abort_first:
                drv_self.live_migration_abort(instance)
            # The monitor's rollback of a job it takes for failed.
            recover_method(context, instance, dest, migrate_data)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._live_migration',
            live_migration))

    def _migrate(self):
        return self.drv._live_migration(
            mock.sentinel.ctxt, self.instance, 'dest', None, self.recover,
            False, mock.sentinel.migrate_data)

    def _rolled_back_as(self, **status):
        self.recover.assert_called_once_with(
            mock.sentinel.ctxt, self.instance, 'dest',
            mock.sentinel.migrate_data, **status)
        self.recover.reset_mock()

    def test_aborted_job_is_cancelled(self):
        self._migrate()
        self.guest._domain.abortJob.assert_called_once_with()
        self._rolled_back_as(migration_status='cancelled')
        # The next migration of the instance, not aborted, failed.
        self.abort_first = False
        self._migrate()
        self._rolled_back_as()

    def test_job_not_aborted_failed(self):
        self.abort_first = False
        self._migrate()
        self._rolled_back_as()

    def test_refused_abort_leaves_the_failure(self):
        # libvirt refused the abort (no job yet): Nova's API says so, and
        # the job's own end is what the migration says.
        self.guest._domain.abortJob.side_effect = \
            fakelibvirt.make_libvirtError(
                fakelibvirt.libvirtError, 'no job is active on the domain',
                error_code=fakelibvirt.VIR_ERR_OPERATION_INVALID)
        self.assertRaises(fakelibvirt.libvirtError, self._migrate)
        self.abort_first = False
        self._migrate()
        self._rolled_back_as()

    def test_aborted_job_that_left_the_source_paused_failed(self):
        self.guest.get_power_state.return_value = power_state.PAUSED
        self._migrate()
        self._rolled_back_as()
