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
"""Watcher strategy: empty a host even when no host fits a VM whole.

Loaded by Watcher's decision engine (entry point ``watcher_strategies``,
``puma_split_maintenance``), goal ``cluster_maintaining``, like Watcher's
own ``host_maintenance``.  That strategy migrates every instance of the
host and relies on the Nova scheduler, so a VM that no host can hold
fails with "No valid host" and the host stays busy.  This one plans every
move with Puma's planner (:mod:`puma_nova.planning.maintenance`, the
planning core of ``puma-scheduler``): each active VM goes whole to the
host it fits best, or, when none fits it whole and its flavor has
``puma:split=allowed``, as a split migration (action
``puma_split_migrate``) to the host with the most free memory that can
keep enough of it, its remote memory on another host.  Instances that
are not active are cold-migrated as ``host_maintenance`` does.  The host
is disabled first (``watcher_maintaining``).  When some VM can go
nowhere, the audit fails with the planner's reason and no action runs.
"""

from oslo_config import cfg
from oslo_log import log
from watcher.common import exception
from watcher.decision_engine.model import element
from watcher.decision_engine.strategy.strategies import host_maintenance

from puma_nova.planning import maintenance
from puma_nova.planning import model
from puma_nova.planning import split

LOG = log.getLogger(__name__)

# The flavor extra spec of a server that may be split (puma_nova.virt).
SPLIT_SPEC = 'puma:split'
SPLIT_ALLOWED = 'allowed'


class SplitHostMaintenance(host_maintenance.HostMaintenance):
    """Host maintenance that splits the VMs no host can take whole."""

    SPLIT_MIGRATION = 'puma_split_migrate'

    @classmethod
    def get_name(cls):
        return 'puma_split_maintenance'

    @classmethod
    def get_display_name(cls):
        return 'Host maintenance with split migrations (Puma)'

    @classmethod
    def get_translatable_display_name(cls):
        return 'Host maintenance with split migrations (Puma)'

    @classmethod
    def get_schema(cls):
        return {
            'properties': {
                'maintenance_node': {
                    'description': 'The compute node to empty',
                    'type': 'string',
                },
            },
            'required': ['maintenance_node'],
        }

    @classmethod
    def get_config_opts(cls):
        return [
            cfg.IntOpt('reserve_mb', default=512, min=0,
                       help='Memory (MiB) every host keeps for itself; '
                            'as puma-scheduler\'s [puma_scheduler] '
                            'reserve_mb.'),
            cfg.FloatOpt('min_resident_ratio', default=0.25, min=0.0,
                         max=1.0,
                         help='A split keeps at least this fraction of '
                              'the VM resident on its main host; as '
                              '[puma_scheduler] min_resident_ratio.'),
        ]

    def _cluster(self, src):
        """Puma's model of Watcher's compute model, and disabled hosts."""
        hosts = []
        vms = []
        disabled = []
        for node in self.compute_model.get_all_compute_nodes().values():
            free = self.compute_model.get_node_free_resources(node)['memory']
            # Watcher's model has no racks: one rack, ties by free memory.
            hosts.append(model.Host(node.hostname, '',
                                    node.memory_mb_capacity, free))
            if node is not src and \
                    self.get_node_status_str(node) != \
                    element.ServiceState.ENABLED.value:
                disabled.append(node.hostname)
        for instance in self.compute_model.get_node_instances(src):
            if self.get_instance_state_str(instance) == \
                    element.InstanceState.ACTIVE.value:
                vms.append(model.VM(instance.uuid, src.hostname,
                                    instance.project_id, instance.memory))
        return model.Cluster.build(hosts, vms), disabled

    def _splittable(self, vm):
        instance = self.compute_model.get_instance_by_uuid(vm.uuid)
        specs = instance.flavor_extra_specs or {}
        return specs.get(SPLIT_SPEC) == SPLIT_ALLOWED

    def do_execute(self, audit=None):
        name = self.input_parameters.get('maintenance_node')
        src = self.compute_model.get_node_by_name(name)
        cluster, disabled = self._cluster(src)
        try:
            moves = maintenance.plan_evacuation(
                cluster, src.hostname, self.config.reserve_mb,
                self.config.min_resident_ratio, self._splittable,
                exclude=disabled)
        except split.PlanError as e:
            raise exception.WatcherException(
                'puma_split_maintenance: cannot empty %s: %s' % (name, e))
        if src.disabled_reason != self.REASON_FOR_MAINTAINING:
            self.add_action_maintain_compute_node(src)
        planned = set()
        for move in moves:
            instance = self.compute_model.get_instance_by_uuid(move.vm)
            planned.add(move.vm)
            params = {'migration_type': 'live',
                      'source_node': src.hostname,
                      'destination_node': move.dest,
                      'resource_name': instance.name}
            action = self.INSTANCE_MIGRATION
            if move.split:
                action = self.SPLIT_MIGRATION
                del params['migration_type']
                params.update(sub_node=move.sub_host,
                              resident_limit_mb=move.resident_limit_mb)
            LOG.info('puma_split_maintenance: %s %s to %s%s', action,
                     move.vm, move.dest,
                     ' (remote memory on %s)' % move.sub_host
                     if move.split else '')
            self.solution.add_action(action_type=action,
                                     resource_id=move.vm,
                                     input_parameters=params)
        for instance in self.compute_model.get_node_instances(src):
            if instance.uuid not in planned:
                self.instance_handle(instance, src)
