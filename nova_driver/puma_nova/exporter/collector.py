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

"""What puma-exporter tells Prometheus about one compute host.

A custom collector: every scrape asks the host's libvirtd (through a
Source, see source.py) for what Puma adds to its VMs and turns the
answers into metric families, named after Prometheus's conventions
(base units, ``_total`` counters, a histogram for latencies).  Per VM,
labels ``domain`` (libvirt's name) and ``uuid`` (the instance's UUID):

- split migration (while the VM runs split): pager state (``active``,
  ``degraded``: a mirrored memory server is down, ``paused``: none is
  reachable), resident, remote and unused memory, page-ins and
  page-outs; with monitor details also faults on unused pages, the
  latency histogram of the faults a memory server served, and each
  memory server's state and stale pages;
- Shoot4U (monitor details; TCG or KVM): hypercalls the VM's vCPUs made;
- a running migration: memory remaining and processed, dirty rate;
- cache lending (guest agent option, the Puma guest module's counters):
  as a borrower, pages put to lenders, gets, hits, misses, timeouts,
  puts dropped by reason, bytes each way, round trip and the page cache
  held at lenders; as a lender, borrowers' puts, gets and hits, pages
  hosted, whether it is too busy to lend and how often it stopped.

A VM that does not answer is left out of that scrape and counted in
``puma_exporter_errors_total``; a slow one delays its scrape only (the
exporter is its own process: it never blocks nova-compute).  A guest
agent is the tenant's: one that gives no usable answer leaves that VM's
lending figures out, counted in ``puma_exporter_guest_agent_errors_total``.
"""

from oslo_log import log as logging
from prometheus_client import core

from puma_nova.compute import ksm

LOG = logging.getLogger(__name__)

SPLIT_STATES = ('active', 'degraded', 'paused')
_PAGE = 4096
# The guest module's counters (guest-kmod/puma/control.c) and the
# counter families they become.
LENDING_COUNTERS = (
    ('puts', 'puma_lending_puts',
     'Clean page-cache pages the guest put to its lenders.'),
    ('gets', 'puma_lending_gets',
     'Pages the guest asked its lenders for.'),
    ('hits', 'puma_lending_hits', 'Gets a lender answered with the page.'),
    ('misses', 'puma_lending_misses',
     'Gets a lender had no page for (read from disk).'),
    ('get_timeouts', 'puma_lending_get_timeouts',
     'Gets no lender answered in time (read from disk).'),
    ('bytes_tx', 'puma_lending_transmitted_bytes',
     'Bytes the guest sent on its lending connections.'),
    ('bytes_rx', 'puma_lending_received_bytes',
     'Bytes the guest received on its lending connections.'),
    ('disconnects', 'puma_lending_disconnects',
     'Lending connections that ended.'),
    ('auth_failures', 'puma_lending_auth_failures',
     'Lending peers refused for a wrong key.'),
    ('lend_puts', 'puma_lending_lender_puts',
     'Pages borrowers put to the guest (as a lender).'),
    ('lend_gets', 'puma_lending_lender_gets',
     'Pages borrowers asked the guest for (as a lender).'),
    ('lend_hits', 'puma_lending_lender_hits',
     'Borrowers\' gets the guest answered with the page (as a lender).'),
    ('lend_suspends', 'puma_lending_lender_suspensions',
     'Times the guest stopped lending because it got busy.'),
)
# Gauges: (counter, family, help, factor to the family's unit).
LENDING_GAUGES = (
    ('rtt_us', 'puma_lending_round_trip_seconds',
     'Round trip to the guest\'s lenders (moving average).', 1e-6),
    ('remote_pages', 'puma_lending_remote_bytes',
     'Page cache of the guest held by its lenders.', _PAGE),
    ('hosted_pages', 'puma_lending_hosted_bytes',
     'Borrowers\' pages the guest holds as a lender.', _PAGE),
    ('lender_busy', 'puma_lending_lender_busy',
     '1 while the guest is too busy to lend (it stopped by itself).', 1),
)
# Not 'instance': Prometheus gives every sample that label (the target).
_LABELS = ['domain', 'uuid']


def _families():
    g = core.GaugeMetricFamily
    c = core.CounterMetricFamily
    families = {
        'state': g('puma_split_state',
                   'Split-migration pager state of the VM (1 for the '
                   'state it is in).', labels=_LABELS + ['state']),
        'resident': g('puma_split_resident_bytes',
                      'Guest memory present on this host.', labels=_LABELS),
        'remote': g('puma_split_remote_bytes',
                    'Guest memory held only by memory servers.',
                    labels=_LABELS),
        'unused': g('puma_split_unused_bytes',
                    'Guest memory never used or discarded: neither here '
                    'nor on a memory server.', labels=_LABELS),
        'page_ins': c('puma_split_page_ins',
                      'Pages fetched from memory servers.', labels=_LABELS),
        'page_outs': c('puma_split_page_outs',
                       'Pages written to memory servers and dropped here.',
                       labels=_LABELS),
        'unused_faults': c('puma_split_unused_faults',
                           'Faults on unused pages, served with a zero '
                           'page.', labels=_LABELS),
        'latency': core.HistogramMetricFamily(
            'puma_split_fault_latency_seconds',
            'Latency of the faults a memory server served (buckets only, '
            'no _sum and _count: QEMU keeps power-of-two buckets; the '
            '+Inf bucket is the count).', labels=_LABELS),
        'server_up': g('puma_split_memory_server_up',
                       'Whether a memory server of the VM answers.',
                       labels=_LABELS + ['server']),
        'server_stale': g('puma_split_memory_server_stale_pages',
                          'Remote pages of which a memory server holds no '
                          'latest copy (they are mirrored onto it again).',
                          labels=_LABELS + ['server']),
        'hypercalls': c('puma_shoot4u_hypercalls',
                        "Shoot4U hypercalls the VM's vCPUs made.",
                        labels=_LABELS),
        'remaining': g('puma_migration_remaining_bytes',
                       'Memory a running migration of the VM has still to '
                       'send.', labels=_LABELS),
        'processed': g('puma_migration_processed_bytes',
                       'Memory a running migration of the VM has sent.',
                       labels=_LABELS),
        'dirty': g('puma_migration_dirty_rate_bytes_per_second',
                   'Rate at which the guest dirties memory during its '
                   'migration.', labels=_LABELS),
        'cache_saved': g('puma_exclusive_cache_saved_bytes',
                         "Host page cache that the VM's exclusive-cache "
                         'disks save (an upper bound; only VMs with such '
                         'disks).', labels=_LABELS),
        'dropped': c('puma_lending_dropped_puts',
                     'Pages the guest did not put to a lender, by reason.',
                     labels=_LABELS + ['reason']),
        'lender_dropped': c('puma_lending_lender_dropped_puts',
                            'Borrowers\' pages the guest did not keep as a '
                            'lender, by reason.',
                            labels=_LABELS + ['reason']),
    }
    for name, family, text in LENDING_COUNTERS:
        families[name] = c(family, text, labels=_LABELS)
    for name, family, text, _factor in LENDING_GAUGES:
        families[name] = g(family, text, labels=_LABELS)
    return families


def _add_split(f, labels, split):
    """libvirt's split statistics (virsh domstats --split)."""
    for state in SPLIT_STATES:
        f['state'].add_metric(labels + [state],
                              1 if split.get('state') == state else 0)
    f['resident'].add_metric(labels, split.get('resident_bytes', 0))
    f['remote'].add_metric(labels, split.get('remote_bytes', 0))
    f['unused'].add_metric(labels, split.get('unused_bytes', 0))
    f['page_ins'].add_metric(labels, split.get('page_ins', 0))
    f['page_outs'].add_metric(labels, split.get('page_outs', 0))


def _add_details(f, labels, info):
    """x-query-split's answer: what libvirt does not carry."""
    f['unused_faults'].add_metric(labels, info['unused-faults'])
    # Element N counts latencies in [2^N, 2^(N+1)) microseconds.
    buckets, total = [], 0
    for n, count in enumerate(info.get('fault-latency-histogram', [])):
        total += count
        buckets.append(('%g' % ((2 ** (n + 1)) / 1e6), total))
    buckets.append(('+Inf', total))
    f['latency'].add_metric(labels, buckets, sum_value=None)
    for server in info.get('servers', []):
        slabels = labels + [server['uri']]
        f['server_up'].add_metric(slabels,
                                  1 if server['state'] == 'up' else 0)
        f['server_stale'].add_metric(slabels,
                                     server.get('stale-pages', 0))


def _add_lending(f, labels, counters):
    """The Puma guest module's counters (a dict of integers)."""
    for name, _family, _text in LENDING_COUNTERS:
        if name in counters:
            f[name].add_metric(labels, counters[name])
    for name, _family, _text, factor in LENDING_GAUGES:
        if name in counters:
            f[name].add_metric(labels, counters[name] * factor)
    for name, value in sorted(counters.items()):
        if name.startswith('drop_'):
            f['dropped'].add_metric(labels + [name[len('drop_'):]], value)
        elif name.startswith('lend_drop_'):
            f['lender_dropped'].add_metric(
                labels + [name[len('lend_drop_'):]], value)


# What a running memory server says of itself (its STATUS=
# notifications): counter, family kind, metric name, what it counts.
# Its 'limit' is left out: limit_bytes says it, in bytes.
_SERVER_SAYS = (
    ('pages', 'gauge', 'puma_memory_server_pages',
     'Pages the memory server of an instance holds.'),
    ('connections', 'gauge', 'puma_memory_server_connections',
     'Open connections to the memory server of an instance.'),
    ('puts', 'counter', 'puma_memory_server_put_pages',
     'Pages the memory server of an instance stored since it started.'),
    ('gets', 'counter', 'puma_memory_server_get_pages',
     'Pages the memory server of an instance returned since it started.'),
    ('discards', 'counter', 'puma_memory_server_discarded_pages',
     'Pages the memory server of an instance discarded since it started.'),
    ('errors', 'counter', 'puma_memory_server_refused_requests',
     'Requests the memory server of an instance refused since it started '
     '(bad input, no room, not allowed).'),
)
_KINDS = {'gauge': core.GaugeMetricFamily,
          'counter': core.CounterMetricFamily}


def _server_families():
    g = core.GaugeMetricFamily
    labels = ['uuid']
    families = {
        'up': g('puma_memory_server_up',
                'Whether the memory server this host runs for a split '
                'instance (of another host) is up.', labels=labels),
        'limit': g('puma_memory_server_limit_bytes',
                   'Memory the memory server of an instance may hold.',
                   labels=labels),
        'resident': g('puma_memory_server_resident_bytes',
                      'Resident memory of the memory server of an '
                      'instance: the pages it holds, and its own.',
                      labels=labels),
        'restarts': core.CounterMetricFamily(
            'puma_memory_server_restarts',
            'Times nova-compute started the memory server of an instance '
            'again, empty, after it was gone.', labels=labels),
        'hangs': core.CounterMetricFamily(
            'puma_memory_server_hangs',
            'Times nova-compute killed the memory server of an instance '
            'as hung (silent past its watchdog timeout) before it started '
            'it again.', labels=labels),
    }
    for key, kind, name, doc in _SERVER_SAYS:
        families[key] = _KINDS[kind](name, doc, labels=labels)
    return families


class PumaCollector(object):
    """Collects from SOURCE on every scrape (prometheus_client collector)."""

    def __init__(self, source, memory_servers=None):
        """Collects from SOURCE (the VMs) and MEMORY_SERVERS.

        :param memory_servers: None, or a callable that returns the memory
            servers of this host as memory_server.read_servers() does.
        """
        self.source = source
        self.memory_servers = memory_servers
        self.errors = 0
        self.agent_errors = 0

    def describe(self):
        # The families' samples depend on the VMs of the moment.
        return []

    def _memory_servers(self):
        try:
            servers = self.memory_servers()
        except (OSError, ValueError, KeyError, TypeError) as e:
            LOG.debug('No memory server figures: %s', e)
            self.errors += 1
            return
        f = _server_families()
        for instance_uuid, server in sorted(servers.items()):
            labels = [instance_uuid]
            f['up'].add_metric(labels, 1 if server['up'] else 0)
            f['limit'].add_metric(labels, server['size_mb'] << 20)
            f['resident'].add_metric(labels, server['resident_bytes'])
            f['restarts'].add_metric(labels, server['restarts'])
            f['hangs'].add_metric(labels, server.get('hangs', 0))
            # Only while it runs and once it said them.
            counters = server.get('counters', {})
            for key, _kind, _name, _doc in _SERVER_SAYS:
                if key in counters:
                    f[key].add_metric(labels, counters[key])
        yield from f.values()

    def collect(self):
        f = _families()
        try:
            vms = self.source.domains()
        except Exception:
            self.errors += 1
            vms = []
        cache_saved = 0
        for vm in vms:
            labels = [vm.name, vm.uuid]
            try:
                details = vm.split_details()
                calls = vm.shoot4u_hypercalls()
                job = vm.migration()
                agent = vm.guest_agent_connected()
            except Exception:
                self.errors += 1
                continue
            if vm.split is not None:
                _add_split(f, labels, vm.split)
            if details is not None:
                _add_details(f, labels, details)
            if calls is not None:
                f['hypercalls'].add_metric(labels, calls)
            if job is not None:
                f['remaining'].add_metric(labels, job['remaining_bytes'])
                f['processed'].add_metric(labels, job['processed_bytes'])
                f['dirty'].add_metric(labels, job['dirty_bytes_per_second'])
            try:
                counters = vm.lending() if agent else None
            except Exception as e:
                # The tenant's agent: at debug level, as nova-compute.
                LOG.debug('No lending figures from the guest agent of %s: '
                          '%s', vm.uuid, e)
                self.agent_errors += 1
                counters = None
            if counters is not None:
                _add_lending(f, labels, counters)
            try:
                saved = vm.exclusive_cache_saved_bytes()
            except Exception as e:
                LOG.debug('No exclusive caching figures of %s: %s',
                          vm.uuid, e)
                saved = None
            if saved is not None:
                f['cache_saved'].add_metric(labels, saved)
                cache_saved += saved
        yield from f.values()
        if self.memory_servers is not None:
            yield from self._memory_servers()
        try:
            merged = ksm.saved_bytes()
        except (OSError, ValueError) as e:
            LOG.debug('No page merging figures: %s', e)
            self.errors += 1
        else:
            yield core.GaugeMetricFamily(
                'puma_host_page_merging_saved_bytes',
                "Memory the host's page merging (KSM) saves: pages that "
                'share a merged page, and pages merged with the zero page.',
                value=merged)
        yield core.GaugeMetricFamily(
            'puma_host_exclusive_cache_saved_bytes',
            'Host page cache that exclusive host/guest caching saves: what '
            "the guests read from their exclusive-cache disks, up to the "
            "images' allocated size, less what the host still caches of "
            'them (an upper bound).',
            value=cache_saved)
        yield core.CounterMetricFamily(
            'puma_exporter_errors',
            'VMs (or whole scrapes) left out because libvirt or QEMU did '
            'not answer.', value=self.errors)
        yield core.CounterMetricFamily(
            'puma_exporter_guest_agent_errors',
            'Lending figures of a VM left out because its guest agent gave '
            'no usable answer.', value=self.agent_errors)
