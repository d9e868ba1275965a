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

"""What puma-compute-agent does on one compute host.

The compute-side service of Puma, beside nova-compute (which only runs
the driver's hooks in Nova's own flow): the host's memory servers and
their checks, its lending channel and the pairs its guests are told of,
its memory statistics, reported to the Puma scheduler every
``[puma] report_interval`` seconds, and the split plans this host made
as a destination, which the source of a migration asks for.  Served as
the ``puma-compute`` RPC endpoint (compute.manager) by
``puma-compute-agent`` (cmd.compute_agent) on Nova's transport and
configuration.

Three daemon threads: the report, the guest pairs and the memory server
checks; stop() ends them and waits at most STOP_GRACE seconds in all.
"""

import os
import threading
import time

import nova.conf
from nova import context as nova_context
from nova import objects
from oslo_log import log as logging

from puma_nova.compute import guest_pairs
from puma_nova.compute import host_cache
from puma_nova.compute import ksm
from puma_nova.compute import lending
from puma_nova.compute import memory_server
from puma_nova.compute import split_plans
from puma_nova.compute import stats
from puma_nova.conf import compute as puma_conf
from puma_nova.scheduler import rpcapi as scheduler_rpcapi
from puma_nova.virt import shoot4u

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
puma_conf.register_opts(CONF)

# Seconds stop() waits for the threads, in all.
STOP_GRACE = 5


def state_dir():
    """This host's Puma state: memory servers and split plans."""
    return os.path.join(CONF.instances_path, 'puma')


def memory_servers():
    """This host's memory servers, as [puma] configures them."""
    return memory_server.MemoryServers(
        state_dir(),
        CONF.puma.memory_server_binary,
        CONF.puma.memory_server_address or CONF.my_ip,
        CONF.puma.memory_server_port_min,
        CONF.puma.memory_server_port_max,
        tls_x509_dir=(CONF.puma.memory_server_tls_x509_dir
                      if CONF.libvirt.live_migration_with_native_tls
                      else None),
        client_dn=CONF.puma.memory_server_client_dn or None,
        watchdog_timeout=(CONF.puma.memory_server_watchdog_timeout
                          if CONF.puma.memory_server_check_interval
                          else 0))


class ComputeAgent(object):
    """Puma's compute-side service of HOST.

    :param host: this host's Nova name ([DEFAULT] host).
    :param libvirt_host: nova.virt.libvirt.host.Host of this host's
        libvirtd, or None on a host without one (a sub host that only
        serves memory: it has no statistics to give).
    :param transport: oslo.messaging transport of the scheduler client.
    """

    def __init__(self, host, libvirt_host, transport):
        self.host = host
        self._libvirt = libvirt_host
        # Shared with the host's nova-compute (split_plans).
        self.plans = split_plans.SplitPlans(
            split_plans.path(CONF.instances_path), host)
        self.memory_servers = memory_servers()
        self.lending = lending.LendingChannel(
            CONF.puma.lending_bridge, CONF.puma.lending_table,
            enabled=CONF.puma.lending_channel_enabled)
        self.guest_pairs = guest_pairs.GuestPairs(
            self._domain_by_uuid, CONF.puma.lending_port,
            CONF.puma.guest_agent_timeout)
        self.shoot4u = self._probe_shoot4u()
        self._scheduler = scheduler_rpcapi.SchedulerAPI(
            transport, timeout=CONF.puma.rpc_timeout)
        self._stop = threading.Event()
        self._threads = []

    def _probe_shoot4u(self):
        """Whether this host's libvirt offers Shoot4U (for the report).

        libvirtd may not answer yet when the agent starts: the host is
        then reported without Shoot4U, as the driver's own probe (which
        decides what guests get) may still find it.
        """
        if (self._libvirt is None or not CONF.puma.shoot4u_allowed or
                CONF.libvirt.virt_type not in ('qemu', 'kvm')):
            return False
        try:
            return bool(shoot4u.probe(self._libvirt.get_connection(),
                                      CONF.libvirt.virt_type))
        except Exception as e:
            LOG.warning('Puma: Shoot4U not probed (libvirt: %s); reported '
                        'as unavailable', e)
            return False

    # Life cycle -----------------------------------------------------

    def start(self):
        """Check the memory servers now, then start the periodic work."""
        if self._threads:
            raise RuntimeError('the agent of %s runs already' % self.host)
        self._stop.clear()
        loops = []
        if CONF.puma.memory_server_check_interval:
            loops.append(('puma-memory-servers', self._check_loop))
        if CONF.puma.report_interval and self._libvirt is not None:
            loops.append(('puma-report', self._report_loop))
        if CONF.puma.lending_tell_guests and self._libvirt is not None:
            loops.append(('puma-guest-pairs', self._guest_pairs_loop))
        for name, loop in loops:
            thread = threading.Thread(target=loop, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        LOG.info('Puma compute agent of %s started (Shoot4U %s, split %s)',
                 self.host, 'available' if self.shoot4u else 'unavailable',
                 'allowed' if CONF.puma.split_allowed else 'disabled')

    def stop(self):
        """End the periodic work; a call in flight is not waited for.

        The memory servers run on: guests on other hosts depend on them,
        and the next agent finds them in their state file.
        """
        self._stop.set()
        self.guest_pairs.changed.set()
        deadline = time.monotonic() + STOP_GRACE
        for thread in self._threads:
            thread.join(max(0, deadline - time.monotonic()))
            if thread.is_alive():
                LOG.warning('Puma: %s still busy at stop (an RPC call in '
                            'flight); not waiting for it', thread.name)
        self._threads = []

    def _check_loop(self):
        interval = CONF.puma.memory_server_check_interval
        while True:
            try:
                self.memory_servers.check()
            except Exception:
                LOG.exception('Puma: checking the memory servers failed')
            if self._stop.wait(interval):
                return

    def _report_loop(self):
        ctxt = nova_context.get_admin_context()
        while not self._stop.wait(CONF.puma.report_interval):
            try:
                self._scheduler.report_host(ctxt, self.host,
                                            self.memory_stats())
            except Exception as e:
                LOG.warning('Puma: memory report to the scheduler failed: '
                            '%s', e)

    def _guest_pairs_loop(self):
        # Woken by new pairs; failed guests are tried again at least
        # every report interval (or minute).
        retry = CONF.puma.report_interval or 60
        while not self._stop.is_set():
            self.guest_pairs.changed.wait(retry)
            if self._stop.is_set():
                return
            try:
                self.guest_pairs.sync()
            except Exception:
                LOG.exception('Puma: telling guests of their pairs failed')

    def _domain_by_uuid(self, uuid):
        """The libvirt domain of instance UUID on this host, or None."""
        try:
            return self._libvirt.get_connection().lookupByUUIDString(uuid)
        except Exception:
            return None

    # What the endpoint serves ------------------------------------------

    def start_memory_server(self, instance_uuid, size_mb, clients=None):
        if not CONF.puma.split_allowed:
            raise memory_server.MemoryServerError(
                'host %s does not take part in split migrations'
                % self.host)
        limit = CONF.puma.lendable_max_mb
        served = self.memory_servers.served_mb()
        known = instance_uuid in self.memory_servers.list()
        if limit and not known and served + size_mb > limit:
            raise memory_server.MemoryServerError(
                'host %s lends %d MiB already, %d more exceed '
                '[puma] lendable_max_mb=%d'
                % (self.host, served, size_mb, limit))
        return self.memory_servers.start(instance_uuid, size_mb, clients)

    def stop_memory_server(self, instance_uuid):
        self.memory_servers.stop(instance_uuid)

    def apply_pairs(self, pairs):
        self.lending.apply(pairs)
        self.guest_pairs.set_pairs(self.lending.pairs)

    def split_plan(self, instance_uuid, migration_uuid=None):
        return self.plans.get(instance_uuid, migration_uuid)

    def drop_split_plan(self, instance_uuid):
        self.plans.pop(instance_uuid)

    def memory_stats(self):
        """This host's figures and VMs, as report_host sends them."""
        if self._libvirt is None:
            raise RuntimeError('host %s has no libvirt: no memory '
                               'statistics' % self.host)
        total = self._libvirt.get_memory_mb_total()
        free = total - self._libvirt.get_memory_mb_used()
        guests = self._libvirt.list_guests(only_running=True)
        lendable = max(0, free - CONF.puma.free_ram_margin_mb)
        if CONF.puma.lendable_max_mb:
            lendable = min(lendable, max(
                0, CONF.puma.lendable_max_mb -
                self.memory_servers.served_mb()))
        instances = self._instances_by_uuid([g.uuid for g in guests])
        # Each guest's XML is read once, for its entry and the savings.
        xmls = [stats.domain_xml(g) for g in guests]
        vms = [stats.guest_stats(g, instances.get(g.uuid), xml=xml)
               for g, xml in zip(guests, xmls)]
        stats.retain(vm['uuid'] for vm in vms)
        return {
            'memory_mb': total,
            'free_mb': free,
            'lendable_mb': lendable,
            'merged_mb': ksm.saved_mb(),
            'cache_saved_mb': host_cache.saved_mb(
                [(g._domain, xml) for g, xml in zip(guests, xmls)
                 if xml is not None]),
            'address': CONF.puma.memory_server_address or CONF.my_ip,
            'shoot4u': self.shoot4u,
            'split': bool(CONF.puma.split_allowed),
            'vms': vms,
        }

    def _instances_by_uuid(self, uuids):
        """Nova's instances of these guests, by uuid (via the conductor).

        The report names each VM's project (pairs never cross projects);
        a guest whose instance cannot be read is reported without one and
        is then never paired.
        """
        if not uuids:
            return {}
        try:
            found = objects.InstanceList.get_by_filters(
                nova_context.get_admin_context(), {'uuid': list(uuids)},
                expected_attrs=['flavor'])
        except Exception as e:
            LOG.warning('Puma: the instances of this host\'s guests could '
                        'not be read (%s); they are reported without a '
                        'project and not paired', e)
            return {}
        return {inst.uuid: inst for inst in found}
