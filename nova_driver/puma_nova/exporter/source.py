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

"""The host's VMs, as puma-exporter reads them from libvirt.

Read-only.  Split migration's figures come from libvirt's own statistics
(``virConnectGetAllDomainStats`` with the split group of our libvirt
series: ``virsh domstats --split``), which any libvirt client may read.
With ``[puma_exporter] monitor_details`` the exporter also asks QEMU
through libvirt's qemu-monitor-command for what libvirt does not carry:
the fault-latency histogram and each memory server's state
(``x-query-split``) and the Shoot4U hypercalls of the vCPUs (``qom-get``
under TCG, KVM's statistics through ``query-stats`` under KVM).  libvirt
marks a domain that was sent such a command as tainted
(``custom-monitor``) in its log, hence the option.

With ``[puma_exporter] guest_agent`` it reads the Puma guest module's
counters (``/sys/kernel/puma/stats``: cache lending) through the guest
agent of each VM whose agent libvirt says is connected, as nova-compute
does for its reports (:mod:`puma_nova.compute.guest_agent`, which bounds
what a guest may answer).
"""

from oslo_log import log as logging
from oslo_serialization import jsonutils

from puma_nova.compute import guest_agent
from puma_nova.compute import host_cache

LOG = logging.getLogger(__name__)

# libvirt's constants (the bindings need not be importable to test this).
STATS_SPLIT = 1 << 11          # VIR_DOMAIN_STATS_SPLIT (our series)
# VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE, VIR_CONNECT_LIST_DOMAINS_ACTIVE
STATS_ACTIVE = 1 << 0
# VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT: a domain whose job waits (for
# QEMU's monitor, say) gives what libvirt knows without one at once.
STATS_NOWAIT = 1 << 29
_JOB_NONE = 0                  # VIR_DOMAIN_JOB_NONE
_PAGE = 4096


class QMPError(Exception):
    pass


class VM(object):
    """One running domain and its split statistics of this scrape."""

    def __init__(self, dom, stats, monitor=None, agent=None):
        self._dom = dom
        self._monitor = monitor
        # domain -> its guest_agent.Agent, or None: no guest agent use.
        self._agent = agent
        self.name = dom.name()
        self.uuid = dom.UUIDString()
        # libvirt reports the split group only while the VM runs split.
        self.split = {k[len('split.'):]: v for k, v in stats.items()
                      if k.startswith('split.')} or None

    def exclusive_cache_saved_bytes(self):
        """Host page cache its exclusive-cache disks save (host_cache).

        None if it has no such disk.
        """
        return host_cache.domain_saved_bytes(self._dom)

    @property
    def monitor_waits(self):
        """Whether QEMU's monitor may not answer before a server is back.

        A split VM paused for a lost memory server: QEMU's main loop may
        be the one waiting for a page of that server, and a monitor
        command would wait with it (and then wait libvirt's job).
        """
        return self.split is not None and self.split.get('state') == 'paused'

    def qmp(self, command, **arguments):
        """COMMAND's return, or None if this QEMU has no such command."""
        request = {'execute': command}
        if arguments:
            request['arguments'] = arguments
        reply = jsonutils.loads(self._monitor(
            self._dom, jsonutils.dumps(request), 0))
        if 'error' in reply:
            if reply['error'].get('class') == 'CommandNotFound':
                return None
            raise QMPError('%s: %s' % (command, reply['error']))
        return reply['return']

    def split_details(self):
        """x-query-split's answer (monitor details only), or None."""
        if self._monitor is None or self.split is None or self.monitor_waits:
            return None
        return self.qmp('x-query-split')

    def shoot4u_hypercalls(self):
        """Hypercalls of all vCPUs (monitor details), or None.

        Under TCG QEMU counts them (``x-shoot4u-hypercalls`` of each vCPU);
        under KVM the kernel handles the hypercall and counts it in KVM's
        ``shoot4u`` vCPU statistic, which QEMU reads for ``query-stats``.
        None for a QEMU or a KVM without Shoot4U, and while the monitor
        may not answer.
        """
        if self._monitor is None or self.monitor_waits:
            return None
        kvm = self.qmp('query-kvm')
        if kvm and kvm.get('enabled'):
            return self._kvm_shoot4u_hypercalls()
        total = 0
        for cpu in self.qmp('query-cpus-fast') or []:
            try:
                value = self.qmp('qom-get', path=cpu['qom-path'],
                                 property='x-shoot4u-hypercalls')
            except QMPError:
                return None  # no such property: QEMU without Shoot4U
            total += value or 0
        return total

    def guest_agent_connected(self):
        """Whether the exporter uses guest agents and this VM's is up.

        Asks libvirt (the domain's XML), not the agent: a failure here is
        libvirt's and raises its error.
        """
        if self._agent is None:
            return False
        return guest_agent.connected(self._dom.XMLDesc(0))

    def _kvm_shoot4u_hypercalls(self):
        try:
            results = self.qmp('query-stats', target='vcpu', providers=[
                {'provider': 'kvm', 'names': ['shoot4u']}])
        except QMPError:
            return None  # a QEMU without KVM's binary statistics
        total, seen = 0, False
        for result in results or []:
            for stat in result.get('stats') or []:
                value = stat.get('value')
                if stat.get('name') == 'shoot4u' and isinstance(value, int):
                    total += value
                    seen = True
        # Not seen: a KVM without our series (Debian's own).
        return total if seen else None

    def lending(self):
        """The Puma guest module's counters, or None.

        None without guest agent use or without the module loaded in the
        guest; call it only when guest_agent_connected().

        :raises guest_agent.AgentError: the agent's answer is unusable.
        """
        if self._agent is None:
            return None
        return guest_agent.read_counters(self._agent(self._dom),
                                         guest_agent.PUMA_STATS)

    def migration(self):
        """A running migration's figures in bytes, or None."""
        stats = self._dom.jobStats()
        if stats.get('type', _JOB_NONE) == _JOB_NONE:
            return None
        page = stats.get('memory_page_size', _PAGE)
        return {
            'remaining_bytes': stats.get('memory_remaining', 0),
            'processed_bytes': stats.get('memory_processed', 0),
            'dirty_bytes_per_second':
                stats.get('memory_dirty_rate', 0) * page,
        }


class LibvirtSource(object):
    """The running domains of the libvirtd at URI."""

    def __init__(self, uri, monitor_details=False, guest_agent_timeout=None):
        """The domains of URI.

        :param guest_agent_timeout: seconds a guest agent may take to
            answer; None: the guest agents are not used.
        """
        self.uri = uri
        self.monitor_details = monitor_details
        self.agent = None
        if guest_agent_timeout is not None:
            self.agent = lambda dom: guest_agent.Agent(dom,
                                                       guest_agent_timeout)
        self._conn = None
        self._warned = False

    def _connection(self):
        if self._conn is None or not self._conn.isAlive():
            import libvirt  # compute nodes have it; unit tests use a fake

            self._conn = libvirt.open(self.uri)
        return self._conn

    def domains(self):
        monitor = None
        if self.monitor_details:
            import libvirt_qemu

            monitor = libvirt_qemu.qemuMonitorCommand
        conn = self._connection()
        try:
            found = conn.getAllDomainStats(STATS_SPLIT,
                                           STATS_ACTIVE | STATS_NOWAIT)
        except Exception as e:
            # A libvirt without our series has no split group: its VMs
            # still have migration figures (and QEMU's, with details).
            if not self._warned:
                LOG.warning('libvirt at %s gives no split statistics (%s): '
                            'split metrics left out', self.uri, e)
                self._warned = True
            found = [(dom, {}) for dom in conn.listAllDomains(
                STATS_ACTIVE)]
        return [VM(dom, stats, monitor, self.agent) for dom, stats in found]
