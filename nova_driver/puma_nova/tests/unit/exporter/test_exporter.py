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
"""puma-exporter: its metrics from libvirt (a fake) and its HTTP server."""

import json
import urllib.request

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import prometheus_client
from prometheus_client import parser
from prometheus_client import registry as prom_registry
import testtools

from puma_nova.cmd import exporter as exporter_cmd
from puma_nova.compute import guest_agent
from puma_nova.conf import exporter as exporter_conf
from puma_nova.exporter import collector
from puma_nova.exporter import source
from puma_nova.tests.unit.compute import test_guest_agent

SPLIT_STATS = {'split.state': 'degraded', 'split.resident_bytes': 64 << 20,
               'split.remote_bytes': 448 << 20,
               'split.unused_bytes': 512 << 20, 'split.page_ins': 4727,
               'split.page_outs': 4740}
X_QUERY_SPLIT = {
    'state': 'degraded', 'resident-pages': 16384, 'remote-pages': 114688,
    'unused-pages': 131072, 'page-ins': 4727, 'page-outs': 4740,
    'unused-faults': 3, 'fault-latency-p50-us': 60,
    'fault-latency-p99-us': 250,
    'fault-latency-histogram': [0, 0, 0, 0, 0, 10, 100, 8, 2],
    'servers': [{'uri': 'tcp:10.77.0.13:7800', 'state': 'up',
                 'stale-pages': 0},
                {'uri': 'tcp:10.77.0.14:7800', 'state': 'down',
                 'stale-pages': 12}]}


# What a borrower's and a lender's Puma module count (a part of it).
BORROWER = ('puts 900\ngets 120\nhits 100\nmisses 20\nget_timeouts 1\n'
            'bytes_tx 3686400\nbytes_rx 409600\ndrop_no_peer 7\n'
            'drop_queue_full 2\nlend_puts 0\nlend_hits 0\n'
            'lend_drop_capacity 0\nrtt_us 1500\nremote_pages 800\n'
            'hosted_pages 0\nlender_busy 0\n')
LENDER = ('puts 0\nhits 0\nlend_puts 900\nlend_gets 120\nlend_hits 100\n'
          'lend_suspends 1\nlend_drop_capacity 3\nhosted_pages 800\n'
          'lender_busy 1\n')


class FakeDomain(object):

    def __init__(self, name, uuid, job=None, job_error=None,
                 agent='disconnected'):
        self._name, self._uuid = name, uuid
        self.job, self.job_error = job or {'type': 0}, job_error
        self.agent = agent

    def XMLDesc(self, flags):
        if isinstance(self.agent, Exception):
            raise self.agent
        return test_guest_agent.CONNECTED % self.agent

    def name(self):
        return self._name

    def UUIDString(self):
        return self._uuid

    def jobStats(self):
        if self.job_error:
            raise self.job_error
        return self.job


class FakeMonitor(object):
    """libvirt_qemu.qemuMonitorCommand over a table of QMP answers."""

    def __init__(self, kvm=False, split=True, shoot4u=True):
        self.kvm, self.split, self.shoot4u = kvm, split, shoot4u
        self.commands = []
        self.requests = []

    def __call__(self, dom, request, flags):
        req = json.loads(request)
        self.commands.append(req['execute'])
        self.requests.append(req)
        cmd = req['execute']
        if cmd == 'query-stats' and self.kvm:
            # KVM's binary statistics of each vCPU; our KVM series adds
            # the shoot4u counter (Debian's KVM has none: no such stat).
            return json.dumps({'return': [
                {'provider': 'kvm', 'qom-path': '/machine/cpu[%d]' % i,
                 'stats': [{'name': 'shoot4u', 'value': 40 + i}]
                 if self.shoot4u else []} for i in range(2)]})
        if cmd == 'x-query-split' and self.split:
            return json.dumps({'return': X_QUERY_SPLIT})
        if cmd == 'query-kvm':
            return json.dumps({'return': {'enabled': self.kvm,
                                          'present': self.kvm}})
        if cmd == 'query-cpus-fast':
            return json.dumps({'return': [
                {'cpu-index': i, 'qom-path': '/machine/cpu[%d]' % i}
                for i in range(2)]})
        path = req.get('arguments', {}).get('path', '')
        if cmd == 'qom-get' and self.shoot4u and path.endswith(']'):
            return json.dumps({'return': 100 + int(path[-2])})
        if cmd == 'qom-get':
            return json.dumps({'error': {
                'class': 'GenericError',
                'desc': "Property 'x-shoot4u-hypercalls' not found"}})
        return json.dumps({'error': {'class': 'CommandNotFound',
                                     'desc': 'The command %s has not been '
                                             'found' % cmd}})


class FakeSource(object):

    def __init__(self, vms=(), error=None):
        self.vms, self.error = list(vms), error

    def domains(self):
        if self.error:
            raise self.error
        return self.vms


def scrape(src, memory_servers=None):
    reg = prom_registry.CollectorRegistry()
    reg.register(collector.PumaCollector(src, memory_servers))
    text = prometheus_client.generate_latest(reg).decode()
    samples = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, text


def labels(**kw):
    base = {'domain': 'vm1', 'uuid': 'u1'}
    base.update(kw)
    return tuple(sorted(base.items()))


class CollectorTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # The host's KSM counters: 2 MiB saved.
        self.ksm_dir = self.useFixture(fixtures.TempDir()).path
        self._ksm(pages_sharing='500\n', ksm_zero_pages='12\n')
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.compute.ksm.SYSFS', self.ksm_dir))

    def _ksm(self, **counters):
        for name, text in counters.items():
            with open('%s/%s' % (self.ksm_dir, name), 'w') as f:
                f.write(text)

    def test_host_page_merging_savings(self):
        samples, text = scrape(FakeSource([]))
        self.assertEqual(512 * 4096, samples[(
            'puma_host_page_merging_saved_bytes', ())])
        self.assertEqual(0, samples[('puma_exporter_errors_total', ())])
        self._ksm(pages_sharing='garbage\n')
        samples, text = scrape(FakeSource([]))
        self.assertNotIn('puma_host_page_merging_saved_bytes', text)
        self.assertEqual(1, samples[('puma_exporter_errors_total', ())])

    def test_exclusive_cache_savings(self):
        saved = {'u1': 3 << 20, 'u2': 0, 'u3': None}
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.compute.host_cache.domain_saved_bytes',
            lambda dom: saved[dom.UUIDString()]))
        vms = [source.VM(FakeDomain('vm%d' % i, 'u%d' % i), {})
               for i in (1, 2, 3)]
        samples, _text = scrape(FakeSource(vms))
        self.assertEqual(3 << 20, samples[(
            'puma_host_exclusive_cache_saved_bytes', ())])
        # Per VM: only those with exclusive-cache disks.
        family = 'puma_exclusive_cache_saved_bytes'
        self.assertEqual(3 << 20, samples[(family, labels())])
        self.assertEqual(0, samples[(family, labels(domain='vm2',
                                                    uuid='u2'))])
        self.assertNotIn((family, labels(domain='vm3', uuid='u3')), samples)
        samples, _text = scrape(FakeSource([]))
        self.assertEqual(0, samples[(
            'puma_host_exclusive_cache_saved_bytes', ())])

    def test_memory_servers_of_this_host(self):
        servers = {
            'u7': {'port': 7900, 'size_mb': 384, 'tls': True, 'restarts': 2,
                   'hangs': 1, 'up': True, 'resident_bytes': 300 << 20,
                   'counters': {'namespaces': 1, 'pages': 70000,
                                'limit': 98304, 'puts': 90000, 'gets': 20000,
                                'discards': 100, 'errors': 3,
                                'connections': 2}},
            'u8': {'port': 7901, 'size_mb': 64, 'tls': False, 'restarts': 0,
                   'up': False, 'resident_bytes': 0}}
        samples, text = scrape(FakeSource([]), lambda: servers)
        u7, u8 = (('uuid', 'u7'),), (('uuid', 'u8'),)
        self.assertEqual(1, samples[('puma_memory_server_up', u7)])
        self.assertEqual(0, samples[('puma_memory_server_up', u8)])
        self.assertEqual(384 << 20,
                         samples[('puma_memory_server_limit_bytes', u7)])
        self.assertEqual(300 << 20,
                         samples[('puma_memory_server_resident_bytes', u7)])
        self.assertEqual(2, samples[('puma_memory_server_restarts_total',
                                     u7)])
        self.assertEqual(0, samples[('puma_memory_server_restarts_total',
                                     u8)])
        self.assertEqual(1, samples[('puma_memory_server_hangs_total', u7)])
        # A record without hangs (written before the watchdog): 0.
        self.assertEqual(0, samples[('puma_memory_server_hangs_total', u8)])
        # What u7 said of itself; nothing of u8, which is down.
        for name, value in (
                ('puma_memory_server_pages', 70000),
                ('puma_memory_server_connections', 2),
                ('puma_memory_server_put_pages_total', 90000),
                ('puma_memory_server_get_pages_total', 20000),
                ('puma_memory_server_discarded_pages_total', 100),
                ('puma_memory_server_refused_requests_total', 3)):
            self.assertEqual(value, samples[(name, u7)])
            self.assertNotIn((name, u8), samples)
        self.assertEqual(0, samples[('puma_exporter_errors_total', ())])

    def test_memory_servers_unreadable_or_not_asked(self):
        def broken():
            raise ValueError('not JSON')
        samples, text = scrape(FakeSource([]), broken)
        self.assertNotIn('puma_memory_server_up', text)
        self.assertEqual(1, samples[('puma_exporter_errors_total', ())])
        samples, text = scrape(FakeSource([]))
        self.assertNotIn('puma_memory_server', text)
        self.assertEqual(0, samples[('puma_exporter_errors_total', ())])

    def test_split_vm_from_libvirt_statistics_only(self):
        monitor = FakeMonitor()
        vm = source.VM(FakeDomain('vm1', 'u1'), SPLIT_STATS)
        samples, text = scrape(FakeSource([vm]))
        self.assertEqual(1, samples[('puma_split_state',
                                     labels(state='degraded'))])
        self.assertEqual(0, samples[('puma_split_state',
                                     labels(state='active'))])
        self.assertEqual(448 << 20, samples[('puma_split_remote_bytes',
                                             labels())])
        self.assertEqual(64 << 20, samples[('puma_split_resident_bytes',
                                            labels())])
        self.assertEqual(4727, samples[('puma_split_page_ins_total',
                                        labels())])
        self.assertEqual(4740, samples[('puma_split_page_outs_total',
                                        labels())])
        # Without monitor details QEMU is never asked, nothing tainted.
        self.assertEqual([], monitor.commands)
        self.assertNotIn('puma_split_fault_latency_seconds_bucket{', text)
        self.assertNotIn('puma_shoot4u_hypercalls_total{', text)
        self.assertEqual(0, samples[('puma_exporter_errors_total', ())])

    def test_vm_not_split_has_no_split_samples(self):
        vm = source.VM(FakeDomain('vm1', 'u1'), {}, FakeMonitor())
        samples, text = scrape(FakeSource([vm]))
        self.assertNotIn('puma_split_state{', text)
        self.assertNotIn('puma_split_memory_server_up{', text)
        # Shoot4U is asked all the same (TCG, the property exists).
        self.assertEqual(201, samples[('puma_shoot4u_hypercalls_total',
                                       labels())])

    def test_monitor_details(self):
        monitor = FakeMonitor()
        vm = source.VM(FakeDomain('vm1', 'u1'), SPLIT_STATS, monitor)
        samples, text = scrape(FakeSource([vm]))
        # Element N of QEMU's histogram is [2^N, 2^(N+1)) microseconds:
        # cumulative buckets in seconds.
        bucket = 'puma_split_fault_latency_seconds_bucket'
        self.assertEqual(0, samples[(bucket, labels(le='3.2e-05'))])
        self.assertEqual(10, samples[(bucket, labels(le='6.4e-05'))])
        self.assertEqual(110, samples[(bucket, labels(le='0.000128'))])
        self.assertEqual(120, samples[(bucket, labels(le='0.000512'))])
        self.assertEqual(120, samples[(bucket, labels(le='+Inf'))])
        self.assertEqual(1, samples[('puma_split_memory_server_up', labels(
            server='tcp:10.77.0.13:7800'))])
        self.assertEqual(0, samples[('puma_split_memory_server_up', labels(
            server='tcp:10.77.0.14:7800'))])
        self.assertEqual(12, samples[(
            'puma_split_memory_server_stale_pages',
            labels(server='tcp:10.77.0.14:7800'))])
        self.assertEqual(3, samples[('puma_split_unused_faults_total',
                                     labels())])
        self.assertEqual(201, samples[('puma_shoot4u_hypercalls_total',
                                       labels())])

    def test_paused_for_a_lost_server_without_asking_qemu(self):
        # libvirt says so from QEMU's event; QEMU's main loop may wait for
        # a page of that server, and its monitor with it.
        monitor = FakeMonitor()
        vm = source.VM(FakeDomain('vm1', 'u1'), {'split.state': 'paused'},
                       monitor)
        samples, text = scrape(FakeSource([vm]))
        self.assertEqual(1, samples[('puma_split_state',
                                     labels(state='paused'))])
        self.assertEqual([], monitor.commands)
        self.assertNotIn('puma_shoot4u_hypercalls_total{', text)
        self.assertEqual(0, samples[('puma_exporter_errors_total', ())])

    def test_kvm_and_qemu_without_our_series(self):
        # Debian's KVM has no shoot4u statistic; a QEMU without the split
        # command or the Shoot4U property has neither.
        kvm = source.VM(FakeDomain('vm1', 'u1'), SPLIT_STATS,
                        FakeMonitor(kvm=True, shoot4u=False))
        plain = source.VM(FakeDomain('vm2', 'u2'), {},
                          FakeMonitor(split=False, shoot4u=False))
        samples, text = scrape(FakeSource([kvm, plain]))
        self.assertNotIn('puma_shoot4u_hypercalls_total{', text)
        self.assertNotIn('domain="vm2"', text)
        self.assertEqual(0, samples[('puma_exporter_errors_total', ())])

    def test_shoot4u_under_our_kvm_from_kvm_statistics(self):
        # Under KVM the kernel counts the hypercalls (the shoot4u vCPU
        # statistic of our KVM series); QEMU reads them for query-stats.
        monitor = FakeMonitor(kvm=True)
        vm = source.VM(FakeDomain('vm1', 'u1'), {}, monitor)
        samples, text = scrape(FakeSource([vm]))
        self.assertEqual(81, samples[('puma_shoot4u_hypercalls_total',
                                      labels())])
        self.assertIn({'execute': 'query-stats', 'arguments': {
            'target': 'vcpu', 'providers': [
                {'provider': 'kvm', 'names': ['shoot4u']}]}},
            monitor.requests)
        # TCG's per-vCPU property is not asked under KVM.
        self.assertNotIn('qom-get', monitor.commands)

    def test_running_migration(self):
        job = {'type': 2, 'memory_remaining': 1 << 30,
               'memory_processed': 3 << 30, 'memory_dirty_rate': 2500,
               'memory_page_size': 4096}
        vm = source.VM(FakeDomain('vm1', 'u1', job=job), {})
        samples, _ = scrape(FakeSource([vm]))
        self.assertEqual(1 << 30, samples[('puma_migration_remaining_bytes',
                                           labels())])
        self.assertEqual(3 << 30, samples[('puma_migration_processed_bytes',
                                           labels())])
        self.assertEqual(2500 * 4096, samples[(
            'puma_migration_dirty_rate_bytes_per_second', labels())])

    def test_vm_that_fails_is_left_out_and_counted(self):
        bad = source.VM(FakeDomain('vm1', 'u1', job_error=OSError('gone')),
                        SPLIT_STATS)
        good = source.VM(FakeDomain('vm2', 'u2'), SPLIT_STATS)
        src = FakeSource([bad, good])
        samples, text = scrape(src)
        self.assertNotIn('domain="vm1"', text)
        self.assertIn('domain="vm2"', text)
        self.assertEqual(1, samples[('puma_exporter_errors_total', ())])

    def test_libvirt_that_fails_is_counted(self):
        samples, _ = scrape(FakeSource(error=OSError('no libvirtd')))
        self.assertEqual(1, samples[('puma_exporter_errors_total', ())])

    def test_other_qmp_errors_are_errors(self):
        monitor = FakeMonitor()
        vm = source.VM(FakeDomain('vm1', 'u1'), {}, monitor)
        self.assertRaises(source.QMPError, vm.qmp, 'qom-get',
                          path='/x', property='y')


def lending_vm(name, uuid, files=None, answers=None, agent='connected'):
    """A VM whose guest agent answers from FILES (its guest's)."""
    fake = test_guest_agent.FakeAgent(files or {}, answers)
    return source.VM(FakeDomain(name, uuid, agent=agent), {},
                     agent=lambda dom: guest_agent.Agent(dom, 2,
                                                         command=fake)), fake


class LendingTest(testtools.TestCase):

    def test_borrower_and_lender_from_their_modules(self):
        borrower, _ = lending_vm('vm1', 'u1',
                                 {guest_agent.PUMA_STATS: BORROWER})
        lender, fake = lending_vm('vm2', 'u2',
                                  {guest_agent.PUMA_STATS: LENDER})
        samples, _ = scrape(FakeSource([borrower, lender]))
        b, ld = labels(), labels(domain='vm2', uuid='u2')
        for name, value in (('puma_lending_puts_total', 900),
                            ('puma_lending_gets_total', 120),
                            ('puma_lending_hits_total', 100),
                            ('puma_lending_misses_total', 20),
                            ('puma_lending_get_timeouts_total', 1),
                            ('puma_lending_transmitted_bytes_total', 3686400),
                            ('puma_lending_received_bytes_total', 409600),
                            ('puma_lending_round_trip_seconds', 0.0015),
                            ('puma_lending_remote_bytes', 800 * 4096),
                            ('puma_lending_lender_busy', 0)):
            self.assertEqual(value, samples[(name, b)], name)
        for reason, value in (('no_peer', 7), ('queue_full', 2)):
            self.assertEqual(value, samples[(
                'puma_lending_dropped_puts_total',
                labels(reason=reason))])
        for name, value in (('puma_lending_lender_puts_total', 900),
                            ('puma_lending_lender_gets_total', 120),
                            ('puma_lending_lender_hits_total', 100),
                            ('puma_lending_lender_suspensions_total', 1),
                            ('puma_lending_hosted_bytes', 800 * 4096),
                            ('puma_lending_lender_busy', 1)):
            self.assertEqual(value, samples[(name, ld)], name)
        self.assertEqual(3, samples[(
            'puma_lending_lender_dropped_puts_total',
            labels(domain='vm2', uuid='u2', reason='capacity'))])
        # A counter the lender's module did not report is left out.
        self.assertNotIn(('puma_lending_gets_total', ld), samples)
        self.assertEqual(0, samples[(
            'puma_exporter_guest_agent_errors_total', ())])
        self.assertEqual({}, fake.open)  # every handle closed

    def test_no_agent_no_module_no_option_no_figures(self):
        stats = {guest_agent.PUMA_STATS: BORROWER}
        vms = [lending_vm('vm1', 'u1', stats, agent='disconnected')[0],
               lending_vm('vm2', 'u2', {})[0],
               source.VM(FakeDomain('vm3', 'u3', agent='connected'), {})]
        samples, text = scrape(FakeSource(vms))
        self.assertNotIn('puma_lending_puts_total{', text)
        self.assertEqual(0, samples[(
            'puma_exporter_guest_agent_errors_total', ())])

    def test_a_guest_that_lies_loses_only_its_lending_figures(self):
        job = {'type': 2, 'memory_remaining': 1, 'memory_processed': 2,
               'memory_dirty_rate': 0, 'memory_page_size': 4096}
        liar = source.VM(FakeDomain('vm1', 'u1', job=job, agent='connected'),
                         SPLIT_STATS, agent=lambda dom: guest_agent.Agent(
                             dom, 2, command=test_guest_agent.FakeAgent(
                                 {guest_agent.PUMA_STATS:
                                  'hits -1\nrm -rf /\n'})))
        silent, _ = lending_vm('vm2', 'u2', answers={
            'guest-file-open': RuntimeError('Guest agent is not responding')})
        samples, text = scrape(FakeSource([liar, silent]))
        self.assertNotIn('puma_lending_', text.replace(
            '# HELP puma_lending_', '').replace('# TYPE puma_lending_', ''))
        self.assertEqual(448 << 20, samples[('puma_split_remote_bytes',
                                             labels())])
        self.assertEqual(1, samples[('puma_migration_remaining_bytes',
                                     labels())])
        self.assertEqual(2, samples[(
            'puma_exporter_guest_agent_errors_total', ())])
        self.assertEqual(0, samples[('puma_exporter_errors_total', ())])

    def test_a_libvirt_failure_is_not_the_guest_agents(self):
        # libvirt cannot give the domain's XML (the domain went away under
        # the scrape): the VM is left out as a libvirt error, and the
        # tenant's agent, never asked, is not blamed.
        gone, fake = lending_vm('vm1', 'u1', {
            guest_agent.PUMA_STATS: BORROWER},
            agent=RuntimeError('Domain not found'))
        ok, _ = lending_vm('vm2', 'u2', {guest_agent.PUMA_STATS: LENDER})
        samples, text = scrape(FakeSource([gone, ok]))
        self.assertEqual(1, samples[('puma_exporter_errors_total', ())])
        self.assertEqual(0, samples[(
            'puma_exporter_guest_agent_errors_total', ())])
        self.assertNotIn(('puma_lending_puts_total', labels()), samples)
        self.assertEqual(900, samples[(
            'puma_lending_lender_puts_total',
            labels(domain='vm2', uuid='u2'))])
        self.assertEqual([], fake.calls)


class FakeConnection(object):

    def __init__(self, split_group=True):
        self.split_group = split_group
        self.doms = [FakeDomain('vm1', 'u1'), FakeDomain('vm2', 'u2')]

    def isAlive(self):
        return True

    def getAllDomainStats(self, stats, flags):
        self.flags = flags
        if not self.split_group:
            raise OSError('unsupported flags (0x800)')
        return [(self.doms[0], SPLIT_STATS), (self.doms[1], {})]

    def listAllDomains(self, flags):
        return self.doms


class LibvirtSourceTest(testtools.TestCase):

    def source(self, conn):
        src = source.LibvirtSource('qemu:///system')
        src._conn = conn
        return src

    def test_split_group_of_our_libvirt(self):
        conn = FakeConnection()
        vms = self.source(conn).domains()
        # Never waiting for a domain's job (one may wait for QEMU).
        self.assertEqual(source.STATS_ACTIVE | source.STATS_NOWAIT,
                         conn.flags)
        self.assertEqual(['vm1', 'vm2'], [vm.name for vm in vms])
        self.assertEqual('degraded', vms[0].split['state'])
        self.assertIsNone(vms[1].split)

    def test_libvirt_without_the_split_group(self):
        vms = self.source(FakeConnection(split_group=False)).domains()
        self.assertEqual(['vm1', 'vm2'], [vm.name for vm in vms])
        self.assertEqual([None, None], [vm.split for vm in vms])


class ServerTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(cfg.ConfigOpts()))
        exporter_conf.register_opts(self.conf.conf)
        self.conf.config(group='puma_exporter', port=0)
        vm = source.VM(FakeDomain('vm1', 'u1'), SPLIT_STATS)
        self.useFixture(fixtures.MockPatchObject(
            source, 'LibvirtSource', lambda *a, **k: FakeSource([vm])))

    def test_metrics_over_http(self):
        server, thread = exporter_cmd.serve(self.conf.conf)
        self.addCleanup(thread.join)
        self.addCleanup(server.shutdown)
        url = 'http://127.0.0.1:%d/metrics' % server.server_port
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        self.assertIn('puma_split_remote_bytes{domain="vm1",uuid="u1"} '
                      '4.69762048e+08', text)

    def test_tls_options_go_together(self):
        self.conf.config(group='puma_exporter', tls_cert_file='/c.pem')
        self.assertRaises(SystemExit, exporter_cmd.serve, self.conf.conf)
        self.conf.config(group='puma_exporter', tls_cert_file=None,
                         tls_client_ca_file='/ca.pem')
        self.assertRaises(SystemExit, exporter_cmd.serve, self.conf.conf)
