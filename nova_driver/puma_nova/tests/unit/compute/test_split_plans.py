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

"""The split plans of a host, shared by nova-compute and the agent."""

import json
import os
import threading
from unittest import mock

import fixtures
import testtools

from puma_nova.compute import split_plans


def _plan(uuid, main='dest', sub='sub', **extra):
    plan = {'instance_uuid': uuid, 'main_host': main, 'sub_host': sub,
            'main_limit_mb': 2048, 'remote_mb': 2048,
            'sub_uri': 'tcp:192.0.2.3:4000', 'migration_uuid': 'm-' + uuid}
    plan.update(extra)
    return plan


class SplitPlansTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.path = split_plans.path(
            self.useFixture(fixtures.TempDir()).path)
        self.now = 1000.0
        self.plans = self._plans('dest')
        self.log = self.useFixture(fixtures.FakeLogger())

    def _plans(self, host):
        return split_plans.SplitPlans(self.path, host,
                                      clock=lambda: self.now)

    def test_kept_plans_survive_a_new_process(self):
        self.plans.keep(_plan('i1'))
        self.assertEqual(_plan('i1'), self.plans.get('i1'))
        # nova-compute restarted, or the agent reads what it kept.
        other = self._plans('dest')
        self.assertEqual('sub', other.get('i1')['sub_host'])
        self.assertEqual(['i1'], list(other.list()))
        self.assertEqual('sub', other.pop('i1')['sub_host'])
        self.assertIsNone(self.plans.get('i1'))
        self.assertIsNone(other.pop('i1'))

    def test_only_the_plan_of_that_migration(self):
        self.plans.keep(_plan('i1'))
        self.assertIsNotNone(self.plans.get('i1', 'm-i1'))
        self.assertIsNone(self.plans.get('i1', 'another-migration'))

    def test_a_new_plan_replaces_the_old_one(self):
        self.plans.keep(_plan('i1', sub='sub'))
        self.plans.keep(_plan('i1', sub='sub2'))
        self.assertEqual({'i1'}, set(self.plans.list()))
        self.assertEqual('sub2', self.plans.get('i1')['sub_host'])

    def test_update(self):
        self.plans.keep(_plan('i1'))
        new = self.plans.update('i1', sub_uri='tcp:192.0.2.3:4001')
        self.assertEqual('tcp:192.0.2.3:4001', new['sub_uri'])
        self.assertEqual('tcp:192.0.2.3:4001',
                         self._plans('dest').get('i1')['sub_uri'])
        self.assertIsNone(self.plans.update('nope', sub_uri='x'))

    def test_hosts_sharing_a_file_see_only_their_own(self):
        other = self._plans('src')
        self.plans.keep(_plan('i1', main='dest'))
        other.keep(_plan('i1', main='src', sub='sub2'))
        self.assertEqual('sub', self.plans.get('i1')['sub_host'])
        self.assertEqual('sub2', other.get('i1')['sub_host'])
        # The release of another main host's split drops nothing here.
        self.assertIsNone(self.plans.pop('i1', main_host='src'))
        self.assertIsNotNone(self.plans.get('i1'))
        self.assertEqual('sub', self.plans.pop('i1', main_host='dest')[
            'sub_host'])
        self.assertEqual('sub2', other.get('i1')['sub_host'])

    def test_reads_and_pops_of_unplanned_instances_touch_nothing(self):
        self.assertIsNone(self.plans.get('i1'))
        self.assertIsNone(self.plans.pop('i1'))
        self.assertEqual({}, self.plans.list())
        self.assertFalse(os.path.exists(os.path.dirname(self.path)))

    def test_plan_of_another_host_refused(self):
        self.assertRaises(ValueError, self.plans.keep,
                          _plan('i1', main='src'))
        self.assertRaises(ValueError, self.plans.keep,
                          {'instance_uuid': 'i1', 'main_host': 'dest'})
        self.assertFalse(os.path.exists(self.path))

    def test_a_failed_write_changes_nothing(self):
        self.plans.keep(_plan('i1'))
        with mock.patch.object(split_plans.os, 'replace',
                               side_effect=OSError(28, 'No space left')):
            self.assertRaises(OSError, self.plans.keep, _plan('i2'))
            self.assertRaises(OSError, self.plans.pop, 'i1')
        self.assertEqual(['i1'], list(self.plans.list()))
        # No temporary file is left behind.
        self.assertEqual(
            sorted([split_plans.FILE, split_plans.FILE + '.lock']),
            sorted(os.listdir(os.path.dirname(self.path))))

    def test_invalid_entries_dropped_with_an_error(self):
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, 'w') as f:
            json.dump({'version': 1, 'plans': [
                {'plan': _plan('i1'), 'planned_at': self.now},
                {'plan': {'instance_uuid': 'i2'}, 'planned_at': self.now},
                {'plan': _plan('i3')}, 'junk']}, f)
        self.assertEqual(['i1'], list(self.plans.list()))
        self.assertIn('invalid split plan', self.log.output)

    def test_unreadable_file_kept_aside(self):
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, 'w') as f:
            f.write('{"plans": [')
        self.assertEqual({}, self.plans.list())
        self.assertIn('unreadable', self.log.output)
        # Planning goes on with a new file; the damaged one is kept.
        self.plans.keep(_plan('i1'))
        self.assertTrue(os.path.exists(self.path + '.invalid'))
        self.assertEqual(['i1'], list(self._plans('dest').list()))

    def test_old_plans_forgotten_at_the_next_write(self):
        self.plans.keep(_plan('old'))
        self.now += split_plans.MAX_AGE + 1
        self.plans.keep(_plan('new'))
        self.assertEqual(['new'], list(self.plans.list()))

    def test_two_writers_lose_no_change(self):
        # Two processes of the host (nova-compute, the agent): separate
        # objects, serialized only by the file lock.
        errors = []

        def keep(host_plans, prefix):
            try:
                for i in range(40):
                    host_plans.keep(_plan('%s%d' % (prefix, i)))
            except Exception as e:
                errors.append(e)

        threads = [threading.Thread(target=keep,
                                    args=(self._plans('dest'), p))
                   for p in 'ab']
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual([], errors)
        self.assertEqual(80, len(self.plans.list()))
