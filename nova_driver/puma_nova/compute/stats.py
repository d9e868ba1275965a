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

"""Memory statistics of this host and its instances for the scheduler.

Per instance: libvirt's balloon statistics (``virDomainMemoryStats``:
actual, rss, unused, available, major faults) when the guest has a
balloon device, and what the guest itself counts, read through its guest
agent when it has one (:mod:`puma_nova.compute.guest_agent`):

- ``refaults``: page-cache pages the guest read again from disk after
  evicting them (``workingset_refault_file`` of ``/proc/vmstat``) since
  the previous report; without an agent, libvirt's major faults;
- ``cache_miss_rate``: the share of the pages the guest read from disk
  in that interval that were such refaults (``pgpgin`` counts KiB read):
  the reads a remote page cache would have served. 0.0 without an agent;
- ``puma``: the Puma guest module's counters (``/sys/kernel/puma/stats``)
  when the module is loaded, else None;
- ``lendable``: the guest has the lending interface and is idle: its CPU
  use since the previous report (libvirt's CPU time, measured by the
  host) below ``[puma] lender_max_cpu_percent`` (a guest that was below
  it at the previous report stays idle through one report above it),
  no refaults in that interval, and the module, if loaded, not
  reporting its lender busy.
"""

import threading
import time

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import units

from puma_nova.compute import guest_agent

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

PAGE_SIZE = 4096

# The counters below are cumulative; the scheduler wants what happened
# since the previous report.  Last value seen, per (instance uuid, name).
_last_totals = {}
_last_totals_lock = threading.Lock()


def _since_last_report(uuid, name, total):
    with _last_totals_lock:
        prev = _last_totals.get((uuid, name))
        _last_totals[(uuid, name)] = total
    if prev is None or total < prev:
        # First report, or the guest restarted and its counter with it.
        return 0
    return total - prev


def _faults_since_last_report(uuid, total):
    return _since_last_report(uuid, 'major_fault', total)


def retain(uuids):
    """Forget the totals of instances other than UUIDS (gone from here)."""
    uuids = set(uuids)
    with _last_totals_lock:
        for key in [k for k in _last_totals if k[0] not in uuids]:
            del _last_totals[key]


def _agent_figures(guest, xml):
    """(refaults, cache_miss_rate, puma counters) from the guest agent.

    None when the guest has no connected agent or its answer is unusable
    (logged at debug: a tenant may stop its agent at any time).
    """
    if not xml or not guest_agent.connected(xml):
        return None
    agent = guest_agent.Agent(guest._domain,
                              CONF.puma.guest_agent_timeout)
    try:
        vmstat = guest_agent.read_counters(agent, guest_agent.VMSTAT)
        counters = guest_agent.read_counters(agent, guest_agent.PUMA_STATS)
    except guest_agent.AgentError as e:
        LOG.debug('Puma: no counters from the guest agent of %s: %s',
                  guest.uuid, e)
        return None
    if (vmstat is None or 'workingset_refault_file' not in vmstat or
            'pgpgin' not in vmstat):
        LOG.debug('Puma: %s\'s /proc/vmstat lacks workingset_refault_file '
                  'or pgpgin', guest.uuid)
        return None
    refaults = _since_last_report(guest.uuid, 'workingset_refault_file',
                                  vmstat['workingset_refault_file'])
    read_pages = _since_last_report(
        guest.uuid, 'pgpgin', vmstat['pgpgin']) * units.Ki // PAGE_SIZE
    rate = 0.0
    if read_pages:
        rate = min(1.0, refaults / read_pages)
    return refaults, round(rate, 4), counters


def _mb(kib):
    return int(kib) * units.Ki // units.Mi


def _lending_address(guest, xml):
    """The guest's lending-channel address, if it has that interface."""
    from puma_nova.virt import lending_vif
    if xml is None or lending_vif.mac(guest.uuid) not in xml:
        return None
    return lending_vif.address(guest.uuid)


def _cpu_percent(uuid, info, vcpus, now):
    """The guest's CPU use since the previous report, % of its VCPUS.

    From libvirt's domain info (CPU time in ns), measured by the host:
    the guest cannot make it look lower. None on the first report of a
    guest, or when info is missing.
    """
    try:
        vcpus, cpu_ns = int(vcpus), int(info[4])
    except (TypeError, IndexError, ValueError):
        return None
    with _last_totals_lock:
        prev = _last_totals.get((uuid, 'cpu'))
        _last_totals[(uuid, 'cpu')] = (cpu_ns, now)
    if prev is None or cpu_ns < prev[0] or now <= prev[1] or vcpus < 1:
        return None
    return 100.0 * (cpu_ns - prev[0]) / ((now - prev[1]) * 1e9 * vcpus)


def _vcpus(instance, info):
    """The guest's vCPUs: its flavor's, else libvirt's domain info."""
    flavor = getattr(instance, 'flavor', None)
    if flavor is not None:
        return flavor.vcpus
    return info[3] if info else None


def _cpu_state(uuid, cpu_percent):
    """How quiet the guest's CPU is: 'quiet', 'grace' or 'busy'.

    'quiet': below ``[puma] lender_max_cpu_percent``. 'grace': above it
    for the first report after a quiet one. Being told of a new pair (its
    guest agent, the module's connections) and serving the first puts
    take CPU of their own, which must not revoke the pair they set up
    (the lab cloud saw a pair revoked by the next report for that): the
    scheduler keeps the pairs of a lender in grace but gives it no new
    one. A second report above it in a row is 'busy': a lender that woke
    up is revoked one report later, while the module's own
    ``lender_busy`` (it stops lending at once) and refaults still end it
    at the first (_lending).
    """
    with _last_totals_lock:
        before = _last_totals.get((uuid, 'cpu_state'))
        if cpu_percent is None:
            state = 'busy'
        elif cpu_percent < CONF.puma.lender_max_cpu_percent:
            state = 'quiet'
        else:
            state = 'grace' if before == 'quiet' else 'busy'
        _last_totals[(uuid, 'cpu_state')] = state
    return state


def _lending(cpu_state, entry):
    """(lendable, lending_grace) of a report entry.

    Lendable: a guest on the lending channel whose CPU is quiet, whose
    module's lender is not busy (its own activity detector,
    ``lender_busy``) and that re-read no evicted page (it needs its
    memory). In grace: the same, but its CPU is in grace (_cpu_state).
    """
    counters = entry['puma']
    may = (entry['lending_address'] is not None and
           not (counters and counters.get('lender_busy')) and
           not entry['refaults'])
    return may and cpu_state == 'quiet', may and cpu_state == 'grace'


def domain_xml(guest):
    """GUEST's live domain XML, or None if it cannot be read."""
    try:
        return guest._domain.XMLDesc(0)
    except Exception:
        return None


def guest_stats(guest, instance=None, now=None, xml=None):
    """The report_host 'vms' entry of one libvirt guest.

    XML: the guest's domain XML (domain_xml()) if the caller read it
    already; read here otherwise.
    """
    now = time.monotonic() if now is None else now
    try:
        mem = guest._domain.memoryStats()
    except Exception as e:
        LOG.debug('No memory statistics for %s: %s', guest.uuid, e)
        mem = {}
    try:
        info = guest._domain.info()
        max_kib = info[1]
    except Exception:
        info, max_kib = None, 0
    if xml is None:
        xml = domain_xml(guest)
    actual = mem.get('actual', max_kib)
    entry = {
        'uuid': guest.uuid,
        'project_id': getattr(instance, 'project_id', None),
        'memory_mb': _mb(actual),
        'rss_mb': _mb(mem.get('rss', actual)),
        'free_mb': _mb(mem.get('unused', 0)),
        'cache_miss_rate': 0.0,
        'refaults': _faults_since_last_report(
            guest.uuid, int(mem.get('major_fault', 0))),
        'puma': None,
    }
    figures = _agent_figures(guest, xml)
    if figures is not None:
        entry['refaults'], entry['cache_miss_rate'], entry['puma'] = figures
    # Not part of the 1.0 contract's required keys: the address peers
    # reach this instance at on the lending channel.
    entry['lending_address'] = _lending_address(guest, xml)
    # An idle guest on the lending channel lends: the scheduler pairs it
    # with busy guests of its project that miss cache, and revokes the
    # pair once a report says it is neither lendable nor in grace.
    cpu = _cpu_state(guest.uuid, _cpu_percent(
        guest.uuid, info, _vcpus(instance, info), now))
    entry['lendable'], entry['lending_grace'] = _lending(cpu, entry)
    return entry
