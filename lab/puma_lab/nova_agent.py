# SPDX-License-Identifier: Apache-2.0
"""The Puma Nova driver of one emulated host, driven by a lab test.

Run by :mod:`puma_lab.nova_compute` with the Nova environment's Python
(``lab/setup nova``) inside the host's network namespace, like one
nova-compute and puma-compute-agent per host: it builds a real
``puma_nova.virt.driver.PumaLibvirtDriver`` whose libvirt connection is the
host's patched libvirtd, and the host's real
``puma_nova.compute.agent.ComputeAgent`` on the same connection, and runs
their own methods on request.

What is not Nova's real deployment: there is no database, API,
conductor or message broker, and both run in one process. The RPC
clients (the driver's puma-compute API of the other hosts, the driver's
and the agent's Puma scheduler API) are replaced by relays that
send each call to the test (a JSON line on stdout) and wait for its
answer (a JSON line on stdin); the test hands compute calls to the agent
of the target host, whose real ``PumaComputeEndpoint`` (in front of its
agent) serves them, and
scheduler calls to a stand-in of the scheduler's ledger. Instances and
migrate data are Nova objects built here from what the test sends.

Requests (one JSON object a line on stdin): ``{"op": NAME, "args": {}}``;
answers: ``{"result": ...}`` or ``{"error": "...", "type": "..."}``; calls
the agent makes: ``{"rpc": METHOD, "host": HOST, "args": {}}``.
"""

import argparse
import json
import os
import sys
import traceback

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', 'true')

from nova.compute import task_states  # noqa: E402
from nova.compute import vm_states  # noqa: E402
import nova.conf  # noqa: E402
from nova import config  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402
from nova import rpc as nova_rpc  # noqa: E402
from nova.virt import fake as fake_virt  # noqa: E402
from oslo_log import log as logging  # noqa: E402

from puma_nova.compute import agent as compute_agent  # noqa: E402
from puma_nova.compute import manager  # noqa: E402
from puma_nova.virt import driver as puma_driver  # noqa: E402

CONF = nova.conf.CONF
LOG = logging.getLogger('puma_lab.nova_agent')


class RemoteError(Exception):
    """An error the test sent back for a relayed call."""


class Relay(object):
    """Calls leaving this host, answered by the test."""

    def __init__(self, out, inp):
        self._out = out
        self._in = inp

    def call(self, method, target, args):
        self._out.write(json.dumps({'rpc': method, 'host': target,
                                    'args': args}) + '\n')
        self._out.flush()
        reply = json.loads(self._in.readline())
        if 'error' in reply:
            raise RemoteError(reply['error'])
        return reply.get('result')


class ComputeClient(object):
    """puma_nova.compute.rpcapi.ComputeAPI's methods, over the relay."""

    def __init__(self, relay):
        self._relay = relay

    def start_memory_server(self, ctxt, host, instance_uuid, size_mb,
                            clients=None):
        return self._relay.call('start_memory_server', host,
                                {'instance_uuid': instance_uuid,
                                 'size_mb': size_mb, 'clients': clients})

    def stop_memory_server(self, ctxt, host, instance_uuid):
        return self._relay.call('stop_memory_server', host,
                                {'instance_uuid': instance_uuid})

    def get_split_plan(self, ctxt, host, instance_uuid, migration_uuid=None):
        return self._relay.call('get_split_plan', host,
                                {'instance_uuid': instance_uuid,
                                 'migration_uuid': migration_uuid})

    def drop_split_plan(self, ctxt, host, instance_uuid):
        return self._relay.call('drop_split_plan', host,
                                {'instance_uuid': instance_uuid})


class SchedulerClient(object):
    """puma_nova.scheduler.rpcapi.SchedulerAPI's methods, over the relay."""

    def __init__(self, relay):
        self._relay = relay

    def _call(self, method, **args):
        return self._relay.call(method, 'scheduler', args)

    def report_host(self, ctxt, host, stats):
        return self._call('report_host', host=host, stats=stats)

    def plan_split(self, ctxt, instance_uuid, memory_mb, main_host,
                   project_id, supersede=False, source_host=None):
        return self._call('plan_split', instance_uuid=instance_uuid,
                          memory_mb=memory_mb, main_host=main_host,
                          project_id=project_id, supersede=supersede,
                          source_host=source_host)

    def get_ledger(self, ctxt, host, timeout=None):
        return self._call('get_ledger', host=host)

    def release_split(self, ctxt, instance_uuid, main_host=None):
        return self._call('release_split', instance_uuid=instance_uuid,
                          main_host=main_host)

    def split_state(self, ctxt, instance_uuid, state):
        return self._call('split_state', instance_uuid=instance_uuid,
                          state=state)


def make_instance(spec, host):
    """A Nova Instance of the lab domain SPEC describes (no database)."""
    flavor = objects.Flavor(
        name='puma-lab', flavorid='puma-lab', memory_mb=spec['memory_mb'],
        vcpus=spec['vcpus'], root_gb=0, ephemeral_gb=0, swap=0,
        extra_specs=dict(spec.get('extra_specs', {})))
    inst = objects.Instance(
        id=1, uuid=spec['uuid'], host=spec.get('host', host),
        node=spec.get('host', host),
        project_id='puma-lab', user_id='puma-lab',
        flavor=flavor, system_metadata={}, numa_topology=None,
        resources=None, migration_context=None, image_ref='',
        pci_devices=objects.PciDeviceList(), vcpu_model=None,
        device_metadata=None, trusted_certs=None,
        vm_state=vm_states.ACTIVE, task_state=task_states.MIGRATING)
    inst.obj_reset_changes()
    # Nothing to save to: the lab has no Nova database.
    inst.save = lambda *a, **kw: None
    return inst


def make_migrate_data(spec):
    """LibvirtLiveMigrateData as the destination checks would fill it."""
    migration = objects.Migration(
        uuid=spec['migration_uuid'], source_compute=spec['source'],
        dest_compute=spec['dest'], migration_type='live-migration',
        status='running')
    return objects.LibvirtLiveMigrateData(
        migration=migration, block_migration=False,
        is_shared_instance_path=True, is_shared_block_storage=True,
        # The destination's [libvirt] live_migration_inbound_addr.
        target_connect_addr=spec['dest_addr'],
        graphics_listen_addr_vnc='127.0.0.1',
        graphics_listen_addr_spice='127.0.0.1',
        serial_listen_addr=None, serial_listen_ports=[], bdms=[],
        supported_perf_events=[], dst_wants_file_backed_memory=False,
        vifs=[])


class Agent(object):

    def __init__(self, host, relay, libvirtd):
        self.host = host
        self.ctxt = nova_context.get_admin_context()
        self.driver = puma_driver.PumaLibvirtDriver(fake_virt.FakeVirtAPI())
        drv = self.driver
        # No Nova database here: there is no service record to enable
        # or disable when the libvirt connection comes and goes.
        drv._set_host_enabled = lambda enabled, reason=None: LOG.info(
            'libvirt connection %s (%s)', 'up' if enabled else 'down',
            reason)
        drv._puma_compute_api = ComputeClient(relay)
        drv._puma_scheduler_api = SchedulerClient(relay)
        if libvirtd:
            # The driver's own init_host against the host's libvirtd:
            # Nova's checks and migration flags, Puma's probes.
            drv.init_host(host)
        # The host's agent (on a sub host without libvirtd: its memory
        # servers and their checks); the calls of the other hosts come
        # through the relay to its endpoint.
        self.agent = compute_agent.ComputeAgent(
            host, drv._host if libvirtd else None, nova_rpc.TRANSPORT)
        self.agent._scheduler = SchedulerClient(relay)
        self.agent.start()
        self.endpoint = manager.PumaComputeEndpoint(self.agent)
        self.instances = {}
        self.migrate_data = {}

    def instance(self, spec):
        inst = self.instances.get(spec['uuid'])
        if inst is None:
            inst = self.instances[spec['uuid']] = make_instance(spec,
                                                                self.host)
        return inst

    # Requests ---------------------------------------------------------

    def op_rpc(self, method, args):
        """A puma-compute call of another host, served by our endpoint."""
        return getattr(self.endpoint, method)(self.ctxt, **args)

    def op_plan(self, instance, migration_uuid, free_mb):
        """Destination check: plan a split if the instance does not fit.

        The emulated hosts share this machine's RAM; FREE_MB is the free
        memory this host is told it has.
        """
        inst = self.instance(instance)
        self.driver._puma_free_mb = lambda: free_mb
        migration = objects.Migration(uuid=migration_uuid)
        return self.driver._puma_plan_if_needed(self.ctxt, inst, migration)

    def op_pre_live_migration(self, instance):
        """The Puma part of pre_live_migration (Nova's needs disks)."""
        self.driver._puma_pre_live_migration(self.ctxt,
                                             self.instance(instance))

    def op_migrate(self, instance, migration):
        """Source: the driver's _live_migration_operation, to the end."""
        drv = self.driver
        inst = self.instance(instance)
        md = self.migrate_data[inst.uuid] = make_migrate_data(migration)
        guest = drv._host.get_guest(inst)
        drv._live_migration_operation(self.ctxt, inst, migration['dest'],
                                      False, md, guest, [])
        return {'flags': drv._live_migration_flags}

    def op_rollback_at_source(self, instance):
        inst = self.instance(instance)
        self.driver.rollback_live_migration_at_source(
            self.ctxt, inst, self.migrate_data[inst.uuid])

    def op_post_at_destination(self, instance):
        inst = self.instance(instance)
        inst.host = self.host
        self.driver.post_live_migration_at_destination(self.ctxt, inst, [])

    def op_post_at_source(self, instance):
        self.driver.post_live_migration_at_source(
            self.ctxt, self.instance(instance), [])

    def op_delete(self, instance):
        """nova delete reaching this host: destroy() while DELETING."""
        inst = self.instance(instance)
        inst.task_state = task_states.DELETING
        self.driver.destroy(self.ctxt, inst, [], destroy_disks=False)

    def op_memory_servers(self):
        return self.agent.memory_servers.list()

    def op_split_plan(self, instance_uuid):
        return self.driver._puma_plans.get(instance_uuid)


def configure(config_file):
    """Nova's own configuration steps of a service (no database)."""
    config.parse_args(['puma-lab-nova-agent', '--config-file', config_file],
                      default_config_files=[], configure_db=False,
                      prog='puma-lab-nova-agent')
    logging.setup(CONF, 'nova')
    objects.register_all()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--host', required=True)
    parser.add_argument('--libvirtd', action='store_true',
                        help='the host runs libvirtd: run init_host')
    parser.add_argument('--config-file', required=True,
                        help="the host's nova.conf")
    args = parser.parse_args()
    out = sys.stdout
    # Only our protocol goes to stdout; logs go to stderr.
    sys.stdout = sys.stderr
    try:
        configure(args.config_file)
        agent = Agent(args.host, Relay(out, sys.stdin), args.libvirtd)
    except Exception:
        LOG.error('agent of %s not started: %s', args.host,
                  traceback.format_exc())
        # Nova's event threads, if started, would keep us alive.
        sys.stderr.flush()
        os._exit(1)
    out.write(json.dumps({'ready': args.host}) + '\n')
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        try:
            fn = getattr(agent, 'op_' + req['op'])
            reply = {'result': fn(**req.get('args', {}))}
        except Exception as e:
            LOG.error('%s failed: %s', req['op'], traceback.format_exc())
            reply = {'error': str(e), 'type': type(e).__name__}
        out.write(json.dumps(reply) + '\n')
        out.flush()
    # End of input: the test is done. Nova's libvirt event threads are
    # not daemons; the memory servers live on, as they do when
    # nova-compute stops.
    sys.stderr.flush()
    os._exit(0)


if __name__ == '__main__':
    main()
