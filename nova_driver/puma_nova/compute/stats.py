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
balloon device.
"""

import threading

from oslo_log import log as logging
from oslo_utils import units

LOG = logging.getLogger(__name__)

# libvirt's major_fault counter is cumulative; the scheduler wants the
# faults since the previous report.  Last value seen, per instance uuid.
_last_faults = {}
_last_faults_lock = threading.Lock()


def _faults_since_last_report(uuid, total):
    with _last_faults_lock:
        prev = _last_faults.get(uuid)
        _last_faults[uuid] = total
    if prev is None or total < prev:
        # First report, or the guest restarted and its counter with it.
        return 0
    return total - prev


def _mb(kib):
    return int(kib) * units.Ki // units.Mi


def _lending_address(guest):
    """The guest's lending-channel address, if it has that interface."""
    from puma_nova.virt import lending_vif
    try:
        xml = guest._domain.XMLDesc(0)
    except Exception:
        return None
    if lending_vif.mac(guest.uuid) not in xml:
        return None
    return lending_vif.address(guest.uuid)


def guest_stats(guest, instance=None):
    """The report_host 'vms' entry of one libvirt guest."""
    try:
        mem = guest._domain.memoryStats()
    except Exception as e:
        LOG.debug('No memory statistics for %s: %s', guest.uuid, e)
        mem = {}
    try:
        max_kib = guest._domain.info()[1]
    except Exception:
        max_kib = 0
    actual = mem.get('actual', max_kib)
    entry = {
        'uuid': guest.uuid,
        'project_id': getattr(instance, 'project_id', None),
        'memory_mb': _mb(actual),
        'rss_mb': _mb(mem.get('rss', actual)),
        'free_mb': _mb(mem.get('unused', 0)),
        # Not measured without the guest module's counters.
        'cache_miss_rate': 0.0,
        'refaults': _faults_since_last_report(
            guest.uuid, int(mem.get('major_fault', 0))),
        # The guest module's counters come from the guest agent once the
        # module exports them; none are read yet.
        'puma': None,
    }
    # Not part of the 1.0 contract's required keys: the address peers
    # reach this instance at on the lending channel.
    entry['lending_address'] = _lending_address(guest)
    entry['lendable'] = entry['lending_address'] is not None
    return entry
