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
"""The Watcher plugins, loaded and run by Watcher's own code.

Watcher's loaders find them by their entry points (the installed
package), the strategy runs on Watcher's compute model (ModelRoot with
its ComputeNode and Instance elements, as Watcher's collector builds it
from Nova) and its solution's actions validate against the schemas of
the actions Watcher's applier would load.  Nova is not called: the
applier's NovaHelper is replaced by a mock in the action's tests.
"""

from unittest import mock
import uuid

import jsonschema
from oslo_config import cfg
import testtools
from watcher.applier.actions import migration
from watcher.applier.loading import default as applier_loading
from watcher.common import exception
from watcher.common import utils
from watcher.decision_engine.loading import default as de_loading
from watcher.decision_engine.model import element
from watcher.decision_engine.model import model_root

from puma_nova.watcher import actions
from puma_nova.watcher import strategies

GIB = 1024


def node(hostname, memory_mb, status='enabled'):
    return element.ComputeNode(
        uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, hostname)),
        hostname=hostname, status=status, state='up',
        disabled_reason=None, memory=memory_mb, memory_mb_reserved=0,
        disk=1000, disk_gb_reserved=0, vcpus=64, vcpu_reserved=0,
        memory_ratio=1.0, vcpu_ratio=1.0, disk_ratio=1.0)


def instance(name, memory_mb, split=True, state='active'):
    specs = {'puma:split': 'allowed'} if split else {}
    return element.Instance(
        uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, name)), name=name,
        state=state, memory=memory_mb, disk=1, vcpus=1,
        project_id=str(uuid.uuid5(uuid.NAMESPACE_DNS, 'p')),
        flavor_extra_specs=specs)


def cluster(hosts, placed):
    """A ModelRoot: HOSTS {name: MiB}, PLACED {host: [instances]}."""
    m = model_root.ModelRoot()
    nodes = {}
    for name, mb in hosts.items():
        nodes[name] = node(name, mb)
        m.add_node(nodes[name])
    for host, instances in placed.items():
        for i in instances:
            m.add_instance(i)
            m.map_instance(i, nodes[host])
    return m


class TestLoaders(testtools.TestCase):

    def test_entry_points(self):
        self.assertIs(
            strategies.SplitHostMaintenance,
            de_loading.DefaultStrategyLoader().list_available()[
                'puma_split_maintenance'])
        self.assertIs(
            actions.SplitMigrate,
            applier_loading.DefaultActionLoader().list_available()[
                'puma_split_migrate'])

    def test_strategy_options_and_goal(self):
        conf = cfg.ConfigOpts()
        conf([])
        loader = de_loading.DefaultStrategyLoader()
        loader.conf = conf
        s = loader.load('puma_split_maintenance')
        self.assertEqual(512, s.config.reserve_mb)
        self.assertEqual(0.25, s.config.min_resident_ratio)
        self.assertEqual('cluster_maintaining', s.get_goal_name())


class TestSplitHostMaintenance(testtools.TestCase):

    def run_strategy(self, model, host='a'):
        s = strategies.SplitHostMaintenance(
            config=utils.Struct(reserve_mb=512, min_resident_ratio=0.25))
        p = mock.patch.object(strategies.SplitHostMaintenance,
                              'compute_model',
                              new_callable=mock.PropertyMock,
                              return_value=model)
        p.start()
        self.addCleanup(p.stop)
        s.input_parameters = utils.Struct({'maintenance_node': host})
        return s.execute().actions

    def test_large_vm_is_split_small_one_moves_whole(self):
        big = instance('big', 12 * GIB)
        small = instance('small', 2 * GIB)
        model = cluster({'a': 16 * GIB, 'b': 8 * GIB, 'c': 10 * GIB,
                         'd': 3000}, {'a': [big, small]})
        acts = self.run_strategy(model)
        self.assertEqual(
            [{'action_type': 'change_nova_service_state',
              'input_parameters': {
                  'state': 'disabled',
                  'disabled_reason': 'watcher_maintaining',
                  'resource_name': 'a',
                  'resource_id': model.get_node_by_name('a').uuid}},
             {'action_type': 'puma_split_migrate',
              'input_parameters': {
                  'source_node': 'a', 'destination_node': 'c',
                  'sub_node': 'b', 'resident_limit_mb': 9728,
                  'resource_name': 'big', 'resource_id': big.uuid}},
             {'action_type': 'migrate',
              'input_parameters': {
                  'migration_type': 'live', 'source_node': 'a',
                  'destination_node': 'd', 'resource_name': 'small',
                  'resource_id': small.uuid}}], acts)
        # Each action's parameters are valid for the action Watcher's
        # applier loads for it.
        loader = applier_loading.DefaultActionLoader()
        for act in acts:
            a = loader.load(act['action_type'])
            a.input_parameters = act['input_parameters']
            self.assertTrue(a.validate_parameters())

    def test_stopped_instances_are_cold_migrated_by_nova(self):
        off = instance('off', 12 * GIB, state='stopped')
        model = cluster({'a': 16 * GIB, 'b': 8 * GIB}, {'a': [off]})
        acts = self.run_strategy(model)
        self.assertEqual(
            {'action_type': 'migrate',
             'input_parameters': {'migration_type': 'cold',
                                  'source_node': 'a', 'resource_name': 'off',
                                  'resource_id': off.uuid}}, acts[-1])

    def test_vm_that_may_not_be_split_fails_the_audit(self):
        model = cluster({'a': 16 * GIB, 'b': 8 * GIB, 'c': 10 * GIB},
                        {'a': [instance('big', 12 * GIB, split=False)]})
        e = self.assertRaises(exception.WatcherException, self.run_strategy,
                              model)
        self.assertIn('cannot empty a', str(e))
        self.assertIn('does not allow a split migration', str(e))

    def test_disabled_hosts_take_nothing(self):
        big = instance('big', 12 * GIB)
        model = cluster({'a': 16 * GIB, 'b': 8 * GIB, 'c': 10 * GIB,
                         'e': 64 * GIB}, {'a': [big]})
        model.get_node_by_name('e').status = 'disabled'
        acts = self.run_strategy(model)
        self.assertEqual('c', acts[1]['input_parameters']['destination_node'])
        self.assertEqual('b', acts[1]['input_parameters']['sub_node'])


class TestSplitMigrate(testtools.TestCase):

    def action(self, **params):
        a = actions.SplitMigrate(config=mock.Mock(), osc=mock.Mock())
        a.input_parameters = dict(
            {'resource_id': str(uuid.uuid4()), 'source_node': 'a',
             'destination_node': 'c', 'sub_node': 'b',
             'resident_limit_mb': 9728}, **params)
        return a

    def test_schema(self):
        self.assertTrue(self.action().validate_parameters())
        for bad in ({'destination_node': ''}, {'resident_limit_mb': 0},
                    {'migration_type': 'cold'}, {'resource_id': 'x'}):
            self.assertRaises(jsonschema.ValidationError,
                              self.action(**bad).validate_parameters)

    @mock.patch.object(migration.nova_helper, 'NovaHelper')
    def test_live_migration_to_the_main_host(self, helper):
        nova = helper.return_value
        nova.live_migrate_instance.return_value = True
        a = self.action()
        self.assertEqual('live', a.migration_type)
        self.assertTrue(a.check_abort())
        self.assertTrue(a.execute())
        nova.live_migrate_instance.assert_called_once_with(
            instance_id=a.resource_id, dest_hostname='c')
