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

"""Split migrations through Nova's own live-migration flow.

Real Nova API, conductor, scheduler and placement in-process, three
libvirt computes (src, dest, sub) on fakelibvirt running the Puma driver,
each with its Puma compute agent (what puma-compute-agent runs, serving
topic puma-compute on the same fake RPC transport against the compute's
libvirt host); the Puma scheduler is a test double on that transport; the
memory server is a test double run as a real process.
"""

import contextlib
import io
import os
import socket
import sys
import time

import fixtures
from keystoneauth1 import adapter as ka
from keystoneauth1 import session as ks
from lxml import etree
from nova.cmd import manage
from nova.conductor.tasks import live_migrate
import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import rpc as nova_rpc
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client
from nova.tests.functional import integrated_helpers
from nova.tests.functional.libvirt import base
import os_resource_classes as orc

from puma_nova.compute import agent as compute_agent
from puma_nova.compute import lending
from puma_nova.compute import manager as compute_manager
from puma_nova.compute import memory_server
from puma_nova.compute import rpcapi
from puma_nova.conf import compute as puma_conf
from puma_nova import rpc as puma_rpc
from puma_nova.scheduler import placement
from puma_nova.tests.functional import scheduler_double
from puma_nova.virt import lending_vif
from puma_nova.virt import split

GIB = 1024


def _port_range(n=8):
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    return port, port + n - 1


class PumaServersTestBase(base.LibvirtMigrationMixin,
                          base.ServersTestBase,
                          integrated_helpers.InstanceHelperMixin):

    microversion = '2.74'
    ADMIN_API = True

    def _record_defined_xml(self):
        """The domain XMLs the fake libvirt is given, in a list kept fresh."""
        defined = []
        real_define = fakelibvirt.Connection.defineXML

        def define(conn, xml):
            defined.append(xml)
            return real_define(conn, xml)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Connection.defineXML', define))
        return defined
    # Host memory as Nova sees it (total, used) in MiB.
    HOSTS = {
        'src': (16 * GIB, 2 * GIB),
        'dest': (4 * GIB, 2 * GIB),
        'sub': (16 * GIB, 2 * GIB),
    }

    def setUp(self):
        # pip installs Nova's data files under the environment's prefix.
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        puma_conf.register_opts(nova.conf.CONF)
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        binary = os.path.join(tmp, 'qemu-memory-server')
        with open(binary, 'w') as f:
            f.write('#!%s\nimport sys\nsys.path[:0] = %r\n'
                    'from puma_nova.tests import memory_server_double\n'
                    'sys.exit(memory_server_double.main())\n'
                    % (sys.executable, sys.path))
        os.chmod(binary, 0o755)
        port_min, port_max = _port_range()
        self.flags(memory_server_binary=binary,
                   memory_server_address='127.0.0.1',
                   memory_server_port_min=port_min,
                   memory_server_port_max=port_max,
                   report_interval=0, free_ram_margin_mb=0,
                   ledger_cache_seconds=0, rpc_timeout=10, group='puma')
        # Placement lets the 4 GiB flavor onto dest; its RAM does not.
        self.flags(ram_allocation_ratio=2.0, reserved_host_memory_mb=0)

        # The hosts' KSM counters (Nova's fixtures refuse reads of /sys):
        # 512 MiB saved by merging, in pages of 4 KiB.
        ksm_dir = os.path.join(tmp, 'ksm')
        os.mkdir(ksm_dir)
        for name, pages in (('pages_sharing', 131000),
                            ('ksm_zero_pages', 72)):
            with open(os.path.join(ksm_dir, name), 'w') as f:
                f.write('%d\n' % pages)
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.compute.ksm.SYSFS', ksm_dir))

        # Real free memory per host (Nova reads /proc/meminfo).
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.host.Host.get_memory_mb_used',
            lambda host_obj: self._used_mb(host_obj)))

        # The scheduler double writes what it lends to placement with
        # the service's client, as puma-scheduler does.
        self.lending = placement.PlacementLending(adapter=ka.Adapter(
            ks.Session(auth=None), service_type='placement',
            endpoint_override=self.placement.fixture.endpoint,
            additional_headers={'x-auth-token': 'admin'}))
        self.sched = scheduler_double.SchedulerDouble(
            sub_hosts=['sub'], main_limits={'dest': 2 * GIB},
            placement=self.lending)
        self.sched_server = scheduler_double.serve(self.sched)
        self.addCleanup(self._stop_scheduler)

        self.migrations = []
        self.agents = {}
        for host, (total, _used) in self.HOSTS.items():
            self.start_compute(host, host_info=fakelibvirt.HostInfo(
                cpu_nodes=1, cpu_sockets=1, cpu_cores=4, cpu_threads=1,
                kB_mem=total))
        self.src = self.computes['src']
        self.dest = self.computes['dest']
        self.sub = self.computes['sub']
        self.addCleanup(self._stop_memory_servers)

    def _stop_scheduler(self):
        if self.sched_server is not None:
            self.sched_server.stop()
            self.sched_server.wait()
            self.sched_server = None

    def _setup_compute_service(self):
        self.flags(compute_driver='puma.PumaLibvirtDriver')

    def start_compute(self, hostname='compute1', *args, **kwargs):
        """Nova's, and the host's Puma compute agent beside it.

        A restarted compute (restart_compute_service) keeps its agent, as
        a restart of nova-compute keeps puma-compute-agent running.
        """
        hostname = super().start_compute(hostname, *args, **kwargs)
        if hostname not in self.agents:
            self._start_agent(hostname)
        return hostname

    def _start_agent(self, host):
        agent = compute_agent.ComputeAgent(
            host, self.computes[host].driver._host, nova_rpc.TRANSPORT)
        server = puma_rpc.get_server(
            nova_rpc.TRANSPORT, puma_rpc.COMPUTE_TOPIC, host,
            [compute_manager.PumaComputeEndpoint(agent)])
        server.start()
        agent.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        self.addCleanup(agent.stop)
        self.agents[host] = agent

    def _used_mb(self, host_obj):
        for name, compute in self.computes.items():
            if compute.driver._host is host_obj:
                return self.HOSTS[name][1]
        # An agent's, whose compute restarted since.
        for name, agent in self.agents.items():
            if agent._libvirt is host_obj:
                return self.HOSTS[name][1]
        return 0

    def _stop_memory_servers(self):
        for agent in self.agents.values():
            servers = agent.memory_servers
            for uuid in list(servers.list()):
                servers.stop(uuid)

    def _migrate_stub(self, domain, destination, params, flags):
        self.migrations.append((destination, dict(params), flags))
        super()._migrate_stub(domain, destination, params, flags)

    def _rp(self, host):
        return self._get_provider_uuid_by_host(host)

    def _memory_inventory(self, host):
        return self._get_provider_inventory(self._rp(host))[orc.MEMORY_MB]

    def _audit(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = manage.PlacementCommands().audit(verbose=True)
        return rc, out.getvalue()

    def _assert_placement_clean(self):
        rc, out = self._audit()
        self.assertEqual(0, rc, out)
        self.assertNotIn('allocations remaining', self.stdlog.logger.output)
        self.assertNotIn('There are allocations remaining',
                         self.stdlog.logger.output)
        # The resource tracker never failed. (Nova's report client may
        # log one placement generation conflict when the ledger changes
        # the inventory right after allocations moved; it retries, and
        # the tests check the inventories it ends with.)
        self.assertNotIn('Error updating resources',
                         self.stdlog.logger.output)
        # And it logged no warning at all (over-allocation, unknown
        # allocations, instances it cannot account for...) but the one
        # every compute logs when it first starts.
        warnings = [line for line in self.stdlog.logger.output.splitlines()
                    if 'WARNING' in line and 'resource_tracker' in line and
                    'No compute node record for' not in line]
        self.assertEqual([], warnings)

    def _split_flavor(self, **extra):
        spec = {'puma:split': 'allowed'}
        spec.update(extra)
        return self._create_flavor(memory_mb=4 * GIB, vcpu=1, disk=1,
                                   ephemeral=0, extra_spec=spec)

    def _boot(self, flavor_id, host='src', expected_state='ACTIVE'):
        self.server = self._create_server(flavor_id=flavor_id, host=host,
                                          networks='none',
                                          expected_state=expected_state)
        return self.server

    def _assert_refused(self, server, words):
        try:
            self.api.post_server_action(
                server['id'],
                {'os-migrateLive': {'host': 'dest',
                                    'block_migration': 'auto'}})
        except client.OpenStackApiException:
            # CastAsCall hands the conductor's precheck error back to the
            # API, which a real deployment answers 202 to.
            pass
        self._wait_for_migration_status(server, ['error'])
        self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual([], self.migrations)
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertEqual({}, self.sched.ledger)
        # The refusal reaches the conductor's log as the cause.
        self.assertIn(words, self.stdlog.logger.output)
        self.assertEqual('src',
                         self.api.get_server(server['id'])
                         ['OS-EXT-SRV-ATTR:host'])
        self._assert_placement_clean()

    def _fail_port_binding_on(self, host):
        """The conductor fails binding the ports on HOST, after its checks.

        HOST's driver has planned by then (its destination checks ran).
        """
        checks = live_migrate.LiveMigrationTask._call_livem_checks_on_host

        def bind_fails(task_self, destination, *args, **kwargs):
            checks(task_self, destination, *args, **kwargs)
            if destination == host:
                raise exception.MigrationPreCheckError(
                    reason='binding the ports on %s failed' % host)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.conductor.tasks.live_migrate.LiveMigrationTask.'
            '_call_livem_checks_on_host', bind_fails))


class SplitLiveMigrationTest(PumaServersTestBase):

    def test_split_then_delete(self):
        base_dest = self._memory_inventory('dest')
        base_sub = self._memory_inventory('sub')
        server = self._boot(self._split_flavor())

        self._live_migrate(server, 'completed', host='dest')

        # The destination named the server's host to the scheduler,
        # which never makes it the sub host.
        self.assertEqual({server['id']: 'src'}, self.sched.sources)
        # The source passed the split to libvirt.
        self.assertEqual(1, len(self.migrations))
        _dest, params, flags = self.migrations[0]
        self.assertTrue(flags & split.VIR_MIGRATE_SPLIT)
        servers = self.agents['sub'].memory_servers.list()
        self.assertEqual([server['id']], list(servers))
        self.assertEqual(2 * GIB, servers[server['id']]['size_mb'])
        self.assertEqual('tcp:127.0.0.1:%d' % servers[server['id']]['port'],
                         params['split.sub-host-uri'])
        self.assertEqual(2 * GIB * 1024 * 1024, params['split.main-limit'])
        self.assertIn('destination_xml', params)
        pid = servers[server['id']]['pid']
        self.assertTrue(memory_server._alive(pid))

        # The ledger: planned, running, then done.
        states = [c[2] for c in self.sched.calls if c[0] == 'split_state']
        self.assertEqual(['running', 'done'], states)
        self.assertEqual('done', self.sched.ledger[server['id']]['state'])
        server = self.api.get_server(server['id'])
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])

        # Placement: whole flavor on dest, the ledger on both inventories.
        self._run_periodics()
        allocs = self._get_allocations_by_server_uuid(server['id'])
        self.assertEqual({self._rp('dest')}, set(allocs))
        self.assertEqual(4 * GIB,
                         allocs[self._rp('dest')]['resources']['MEMORY_MB'])
        dest_inv = self._memory_inventory('dest')
        sub_inv = self._memory_inventory('sub')
        self.assertEqual(base_dest['total'] + 2 * GIB, dest_inv['total'])
        self.assertEqual(base_dest['max_unit'] + 2 * GIB,
                         dest_inv['max_unit'])
        self.assertEqual(base_sub['reserved'] + 2 * GIB, sub_inv['reserved'])
        self.assertEqual(base_sub['total'], sub_inv['total'])
        self._assert_placement_clean()

        # Delete releases everything on every host.
        self._delete_server(server)
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertFalse(memory_server._alive(pid))
        self.assertEqual({}, self.sched.ledger)
        self._run_periodics()
        self.assertEqual(base_dest, self._memory_inventory('dest'))
        self.assertEqual(base_sub, self._memory_inventory('sub'))
        self._assert_placement_clean()

    def test_scheduler_away_keeps_ledger(self):
        base_dest = self._memory_inventory('dest')
        server = self._boot(self._split_flavor())
        self._live_migrate(server, 'completed', host='dest')
        self._run_periodics()
        self.assertEqual(base_dest['total'] + 2 * GIB,
                         self._memory_inventory('dest')['total'])

        self._stop_scheduler()
        self.flags(rpc_timeout=1, group='puma')
        self._run_periodics()
        self.assertIn('Could not read the Puma lending ledger',
                      self.stdlog.logger.output)
        # The last ledger read stays applied; the RT keeps working.
        self.assertEqual(base_dest['total'] + 2 * GIB,
                         self._memory_inventory('dest')['total'])
        self._assert_placement_clean()

    def test_fits_no_split(self):
        self.HOSTS = dict(self.HOSTS, dest=(4 * GIB, 0))
        server = self._boot(self._split_flavor())
        self._live_migrate(server, 'completed', host='dest')
        _dest, params, flags = self.migrations[0]
        self.assertFalse(flags & split.VIR_MIGRATE_SPLIT)
        self.assertNotIn('split.sub-host-uri', params)
        self.assertEqual([], [c for c in self.sched.calls
                              if c[0] == 'plan_split'])
        self._assert_placement_clean()

    def test_rollback_releases(self):
        server = self._boot(self._split_flavor())
        base_dest = self._memory_inventory('dest')
        base_sub = self._memory_inventory('sub')
        seen = {}

        def fail(domain, destination, params, flags):
            # The split is in place while libvirt migrates...
            seen['servers'] = self.agents['sub'].memory_servers.list()
            seen['params'] = dict(params)
            conn = self.src.driver._host.get_connection()
            conn.lookupByUUIDString(server['id']).fail_job()

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3', fail))
        self._live_migrate(server, 'failed', host='dest')

        self.assertIn(server['id'], seen['servers'])
        self.assertIn('split.sub-host-uri', seen['params'])
        pid = seen['servers'][server['id']]['pid']
        # ...and gone after the rollback.
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertFalse(memory_server._alive(pid))
        self.assertEqual({}, self.sched.ledger)
        self.assertIn(('split_state', server['id'], 'failed'),
                      self.sched.calls)
        self.assertIsNone(self.dest.driver._puma_plans.get(server['id']))
        server = self.api.get_server(server['id'])
        self.assertEqual('src', server['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        self.assertEqual(base_dest, self._memory_inventory('dest'))
        self.assertEqual(base_sub, self._memory_inventory('sub'))
        allocs = self._get_allocations_by_server_uuid(server['id'])
        self.assertEqual({self._rp('src')}, set(allocs))
        self._assert_placement_clean()

    def test_lost_plan_fails_and_releases(self):
        real_check = self.dest.driver.check_source_migrate_data_at_dest

        def check_then_restart(*args, **kwargs):
            data = real_check(*args, **kwargs)
            # dest's file of plans damaged (or lost) after its checks.
            with open(self.dest.driver._puma_plans.path, 'w') as f:
                f.write('{"plans": [')
            return data

        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.virt.driver.PumaLibvirtDriver.'
            'check_source_migrate_data_at_dest',
            lambda drv, *a, **kw: (check_then_restart(*a, **kw)
                                   if drv is self.dest.driver else None)))
        server = self._boot(self._split_flavor())
        self._live_migrate(server, 'failed', host='dest')
        self.assertEqual([], self.migrations)
        self.assertIn('split plan of %s on dest was lost' % server['id'],
                      self.stdlog.logger.output)
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertEqual({}, self.sched.ledger)
        self.assertEqual('src', self.api.get_server(server['id'])
                         ['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        self._assert_placement_clean()

    def test_abort_releases(self):
        server = self._boot(self._split_flavor())
        seen = {}

        def running(domain, destination, params, flags):
            # libvirt is migrating: the job runs until aborted.
            seen['params'] = dict(params)
            seen['servers'] = self.agents['sub'].memory_servers.list()
            domain._job_type = fakelibvirt.VIR_DOMAIN_JOB_UNBOUNDED

        def abort(domain):
            domain._job_type = fakelibvirt.VIR_DOMAIN_JOB_CANCELLED

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3', running))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.abortJob', abort))
        self._live_migrate(server, 'running', host='dest',
                           server_expected_state='MIGRATING')
        migration = self.api.api_get(
            '/os-migrations?instance_uuid=%s' % server['id']
        ).body['migrations'].pop()
        for _ in range(100):
            if 'params' in seen:
                break
            time.sleep(0.1)
        self.assertIn('split.sub-host-uri', seen['params'])
        self.assertIn(server['id'], seen['servers'])
        self.api.api_delete('/servers/%s/migrations/%s'
                            % (server['id'], migration['id']))
        self._wait_for_migration_status(server, ['cancelled'])
        self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertEqual({}, self.sched.ledger)
        self.assertEqual('src', self.api.get_server(server['id'])
                         ['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        self._assert_placement_clean()

    def test_shoot4u_destination_refused(self):
        flavor = self._create_flavor(memory_mb=GIB, vcpu=1, disk=1,
                                     ephemeral=0,
                                     extra_spec={'puma:shoot4u': 'true'})
        server = self._boot(flavor)
        self.dest.driver._puma_shoot4u = False
        self._assert_refused(server, 'uses Shoot4U (puma:shoot4u) but host '
                                     'dest cannot provide it')

    def test_without_extra_spec_nova_decides(self):
        # An instance that does not allow splitting migrates as Nova
        # alone would migrate it: placement accepted it, nothing else is
        # checked, nothing is split, and the scheduler is not asked.
        flavor = self._create_flavor(memory_mb=4 * GIB, vcpu=1, disk=1,
                                     ephemeral=0)
        server = self._boot(flavor)
        self._live_migrate(server, 'completed', host='dest')
        _dest, params, flags = self.migrations[0]
        self.assertFalse(flags & split.VIR_MIGRATE_SPLIT)
        self.assertNotIn('split.sub-host-uri', params)
        self.assertEqual([], self.sched.calls)
        self._delete_server(server)
        self.assertEqual([], self.sched.calls)
        self._assert_placement_clean()

    def test_huge_pages_refused(self):
        # Validated by the API at boot, so set it on the instance record.
        server = self._boot(self._split_flavor())
        inst = objects.Instance.get_by_uuid(
            nova_context.get_admin_context(), server['id'])
        inst.flavor.extra_specs['hw:mem_page_size'] = 'large'
        inst.save()
        self._assert_refused(server, 'instances with huge pages cannot be '
                                     'split')

    def test_refused_without_sub_host(self):
        self.sched.sub_hosts = []
        server = self._boot(self._split_flavor())
        self._assert_refused(server, 'no sub host for a split migration')

    def test_unusable_plan(self):
        # The scheduler thinks dest keeps 3 GiB; only 2 GiB are free.
        self.sched.main_limits['dest'] = 3 * GIB
        server = self._boot(self._split_flavor())
        self._assert_refused(server, 'resident limit 3072 MiB exceeds the '
                                     '2048 MiB free here')
        self.assertIn(('release_split', server['id'], 'dest'),
                      self.sched.calls)

    def test_memory_server_fails(self):
        self.agents['sub'].memory_servers._binary = '/bin/false'
        server = self._boot(self._split_flavor())
        self._assert_refused(server, 'memory server for')
        self.assertIn(('release_split', server['id'], 'dest'),
                      self.sched.calls)


class PlannedBeforeNovaTest(PumaServersTestBase):
    """Splits planned by puma-api before it asks Nova to migrate.

    POST /v1/split-migrations records a planned split with the Puma
    scheduler, then asks Nova for the live migration; whatever Nova does
    next, the plan must not outlive the migration.
    """

    def _plan(self, server):
        self.sched.plan_split(nova_context.get_admin_context(),
                              server['id'], 4 * GIB, 'dest', 'p')
        self.assertEqual('planned', self.sched.ledger[server['id']]['state'])

    def test_planned_split_that_fits_migrates_whole(self):
        # dest has room now: a plain live migration, the plan given back.
        self.HOSTS = dict(self.HOSTS, dest=(4 * GIB, 0))
        server = self._boot(self._split_flavor())
        base_dest = self._memory_inventory('dest')
        base_sub = self._memory_inventory('sub')
        self._plan(server)
        self._live_migrate(server, 'completed', host='dest')
        _dest, params, flags = self.migrations[0]
        self.assertFalse(flags & split.VIR_MIGRATE_SPLIT)
        self.assertNotIn('split.sub-host-uri', params)
        self.assertEqual({}, self.sched.ledger)
        self.assertIn(('release_split', server['id'], 'dest'),
                      self.sched.calls)
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self._run_periodics()
        self.assertEqual(base_dest, self._memory_inventory('dest'))
        self.assertEqual(base_sub, self._memory_inventory('sub'))
        self._assert_placement_clean()

    def test_destination_precheck_failure_releases_the_plan(self):
        # e.g. the CPU comparison with the source fails on dest.
        def refuse(*args, **kwargs):
            raise exception.MigrationPreCheckError(
                reason='CPU of the source is not compatible')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'check_can_live_migrate_destination', refuse))
        server = self._boot(self._split_flavor())
        self._plan(server)
        self._assert_refused(server, 'CPU of the source is not compatible')
        self.assertIn(('release_split', server['id'], 'dest'),
                      self.sched.calls)

    def test_source_precheck_failure_releases_the_plan(self):
        # The conductor's check of the source, run from dest, fails.
        def refuse(*args, **kwargs):
            raise exception.MigrationPreCheckError(
                reason='source refuses the move')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'check_can_live_migrate_source', refuse))
        server = self._boot(self._split_flavor())
        self._plan(server)
        self._assert_refused(server, 'source refuses the move')
        self.assertIn(('release_split', server['id'], 'dest'),
                      self.sched.calls)


class LandsWhereAskedMixin(object):
    """Migrations land on the host in their URI.

    Nova's stub always goes from src to dest; these tests migrate to
    other hosts (dest2) or from dest.
    """

    def _migrate_stub(self, domain, destination, params, flags):
        self.migrations.append((destination, dict(params), flags))
        host = destination.split('//', 1)[1].split('/', 1)[0]
        self.computes[host].driver._host.get_connection().createXML(
            params['destination_xml'],
            'fake-createXML-doesnt-care-about-flags')
        domain.complete_job()


class GivenUpDestinationTest(LandsWhereAskedMixin, PumaServersTestBase):
    """Nova gives a destination up after its checks passed."""

    HOSTS = dict(PumaServersTestBase.HOSTS, dest2=(4 * GIB, 2 * GIB),
                 sub2=(16 * GIB, 2 * GIB))

    def setUp(self):
        super().setUp()
        self.sched.main_limits['dest2'] = 2 * GIB
        self.sched.sub_hosts = ['sub', 'sub2']
        self.sched.compute = rpcapi.ComputeAPI(nova_rpc.TRANSPORT,
                                               timeout=10)
        self._fail_port_binding_on('dest')

    def test_next_destination_supersedes_the_plan(self):
        server = self._boot(self._split_flavor())
        try:
            self.api.post_server_action(
                server['id'],
                {'os-migrateLive': {'host': 'dest',
                                    'block_migration': 'auto'}})
        except client.OpenStackApiException:
            pass  # CastAsCall: the conductor's error reaches the API.
        self._wait_for_migration_status(server, ['error'])
        self._wait_for_state_change(server, 'ACTIVE')
        # dest planned and started the memory server; nothing told it
        # that Nova gave it up.
        self.assertEqual(('dest', 'sub', 'planned'), tuple(
            self.sched.ledger[server['id']][k]
            for k in ('main_host', 'sub_host', 'state')))
        self.assertIn(server['id'],
                      self.agents['sub'].memory_servers.list())
        # The next attempt goes to dest2: it splits, the plan left on
        # dest is given back.
        self._live_migrate(server, 'completed', host='dest2')
        self.assertEqual(('dest2', 'sub2', 'done'), tuple(
            self.sched.ledger[server['id']][k]
            for k in ('main_host', 'sub_host', 'state')))
        self.assertEqual(1, len(self.sched.entries))
        self.assertIn(('superseded', server['id'], 'dest'),
                      self.sched.calls)
        (dest, params, flags), = self.migrations
        self.assertIn('dest2', dest)
        self.assertTrue(flags & split.VIR_MIGRATE_SPLIT)
        self.assertIn(server['id'],
                      self.agents['sub2'].memory_servers.list())
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self._run_periodics()
        self._assert_placement_clean()


class SplitAgainTest(LandsWhereAskedMixin, PumaServersTestBase):
    """A split instance migrated again (a second hop)."""

    HOSTS = dict(PumaServersTestBase.HOSTS, sub2=(16 * GIB, 2 * GIB))

    def _split_to_dest(self):
        server = self._boot(self._split_flavor())
        self._live_migrate(server, 'completed', host='dest')
        first = dict(self.sched.ledger[server['id']])
        self.assertEqual(('dest', 'sub', 'done'), (
            first['main_host'], first['sub_host'], first['state']))
        pid = self.agents['sub'].memory_servers.list()[server['id']][
            'pid']
        self._run_periodics()
        return server, first, pid

    def _make_src_short(self):
        # src keeps 2 GiB resident; the sub host of the first split is
        # busy, so the second split goes to sub2.
        self.HOSTS = dict(self.HOSTS, src=(16 * GIB, 14 * GIB))
        self.sched.main_limits['src'] = 2 * GIB
        self.sched.sub_hosts = ['sub', 'sub2']

    def test_second_hop_whole(self):
        server, first, pid = self._split_to_dest()
        base_dest = self._memory_inventory('dest')
        base_dest['total'] -= 2 * GIB
        base_dest['max_unit'] -= 2 * GIB
        base_sub = self._memory_inventory('sub')
        base_sub['reserved'] -= 2 * GIB
        # src has room for all of it: dest's QEMU pages the remote memory
        # in and migrates it whole; the split is over.
        self._live_migrate(server, 'completed', host='src')
        self.assertEqual('src', self.api.get_server(server['id'])
                         ['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(2, len(self.migrations))
        _dest, params, flags = self.migrations[1]
        self.assertFalse(flags & split.VIR_MIGRATE_SPLIT)
        self.assertNotIn('split.sub-host-uri', params)
        self.assertEqual({}, self.sched.ledger)
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertFalse(memory_server._alive(pid))
        self._run_periodics()
        self.assertEqual(base_dest, self._memory_inventory('dest'))
        self.assertEqual(base_sub, self._memory_inventory('sub'))
        self._assert_placement_clean()

    def test_rollback_of_second_split_keeps_the_first(self):
        server, first, pid = self._split_to_dest()
        dest_inv = self._memory_inventory('dest')
        sub_inv = self._memory_inventory('sub')
        sub2_inv = self._memory_inventory('sub2')
        self._make_src_short()
        seen = {}

        def fail(domain, destination, params, flags):
            seen['params'] = dict(params)
            seen['servers'] = self.agents['sub2'].memory_servers.list()
            conn = self.dest.driver._host.get_connection()
            conn.lookupByUUIDString(server['id']).fail_job()

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3', fail))
        self._live_migrate(server, 'failed', host='src')

        # The second hop was a split onto sub2...
        self.assertIn(server['id'], seen['servers'])
        self.assertEqual('tcp:127.0.0.1:%d'
                         % seen['servers'][server['id']]['port'],
                         seen['params']['split.sub-host-uri'])
        # ...and its rollback released only what it reserved.
        releases = [c for c in self.sched.calls if c[0] == 'release_split']
        self.assertTrue(releases)
        self.assertEqual({('release_split', server['id'], 'src')},
                         set(releases))
        self.assertEqual({server['id']: first}, self.sched.ledger)
        self.assertEqual({}, self.agents['sub2'].memory_servers.list())
        self.assertEqual([server['id']],
                         list(self.agents['sub'].memory_servers.list()))
        self.assertTrue(memory_server._alive(pid))
        self.assertIsNone(self.src.driver._puma_plans.get(server['id']))
        self.assertEqual('dest', self.api.get_server(server['id'])
                         ['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        self.assertEqual(dest_inv, self._memory_inventory('dest'))
        self.assertEqual(sub_inv, self._memory_inventory('sub'))
        self.assertEqual(sub2_inv, self._memory_inventory('sub2'))
        self._assert_placement_clean()

        # Deleting the server still releases the first split.
        self._delete_server(server)
        self.assertEqual({}, self.sched.ledger)
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertFalse(memory_server._alive(pid))

    def test_second_split_replaces_the_first(self):
        server, first, pid = self._split_to_dest()
        base_dest = self._memory_inventory('dest')
        base_dest['total'] -= 2 * GIB
        base_dest['max_unit'] -= 2 * GIB
        self._make_src_short()
        self._live_migrate(server, 'completed', host='src')
        self.assertEqual('src', self.api.get_server(server['id'])
                         ['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(2, len(self.migrations))
        _dest, params, flags = self.migrations[1]
        self.assertTrue(flags & split.VIR_MIGRATE_SPLIT)
        self.assertEqual(2 * GIB * 1024 * 1024, params['split.main-limit'])

        self.assertEqual({server['id']: {
            'instance_uuid': server['id'], 'main_host': 'src',
            'sub_host': 'sub2', 'mb': 2 * GIB, 'state': 'done'}},
            self.sched.ledger)
        self.assertEqual([server['id']], list(
            self.agents['sub2'].memory_servers.list()))
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertFalse(memory_server._alive(pid))
        self._run_periodics()
        self.assertEqual(base_dest, self._memory_inventory('dest'))
        self.assertEqual(2 * GIB, self._memory_inventory('sub2')['reserved'])
        self._assert_placement_clean()


class PageMergingTest(PumaServersTestBase):

    def _defined(self, spec):
        defined = self._record_defined_xml()
        flavor = self._create_flavor(memory_mb=GIB, vcpu=1, disk=1,
                                     ephemeral=0, extra_spec=spec)
        server = self._boot(flavor)
        return server, [etree.fromstring(x) for x in defined
                        if server['id'] in x][-1]

    def test_opted_out_server_is_never_merged(self):
        server, xml = self._defined({'puma:page_merging': 'false'})
        self.assertEqual(1, len(xml.findall('./memoryBacking/nosharepages')))
        # The opt-out travels with the domain XML of a live migration.
        self._live_migrate(server, 'completed', host='dest')

    def test_default_server_may_be_merged(self):
        _server, xml = self._defined(None)
        self.assertEqual([], xml.findall('./memoryBacking/nosharepages'))


class ExtraSpecValidationTest(PumaServersTestBase):

    def test_puma_namespace_validated(self):
        flavor = self._create_flavor(memory_mb=GIB, vcpu=1, disk=1,
                                     ephemeral=0)
        admin = self.api_fixture.admin_api
        admin.microversion = '2.86'
        for spec in ({'puma:split': 'yes'}, {'puma:shoot4u': 'maybe'},
                     {'puma:splitt': 'allowed'},
                     {'puma:page_merging': 'maybe'}):
            ex = self.assertRaises(
                client.OpenStackApiException, admin.post_extra_spec,
                flavor, {'extra_specs': spec})
            self.assertEqual(400, ex.response.status_code)
        admin.post_extra_spec(flavor, {'extra_specs': {
            'puma:split': 'allowed', 'puma:shoot4u': 'true',
            'puma:page_merging': 'false'}})


class ComputeRPCTest(PumaServersTestBase):
    """The puma-compute endpoint as the Puma scheduler calls it."""

    def setUp(self):
        super().setUp()
        self.rpc = rpcapi.ComputeAPI(nova_rpc.TRANSPORT, timeout=10)
        self.ctxt = nova_context.get_admin_context()

    def test_memory_stats(self):
        server = self._boot(self._create_flavor(memory_mb=GIB, vcpu=1,
                                                disk=1, ephemeral=0))
        stats = self.rpc.get_memory_stats(self.ctxt, 'src')
        self.assertEqual(16 * GIB, stats['memory_mb'])
        self.assertEqual(14 * GIB, stats['free_mb'])
        self.assertEqual('127.0.0.1', stats['address'])
        self.assertTrue(stats['split'])
        self.assertEqual([server['id']], [v['uuid'] for v in stats['vms']])
        self.assertEqual(GIB, stats['vms'][0]['memory_mb'])
        self.assertEqual(512, stats['merged_mb'])
        # No disk of the fake libvirt has exclusive caching.
        self.assertEqual(0, stats['cache_saved_mb'])

    def test_periodic_report(self):
        server = self._boot(self._create_flavor(memory_mb=GIB, vcpu=1,
                                                disk=1, ephemeral=0))
        agent = self.agents['src']
        agent.stop()
        self.flags(report_interval=1, group='puma')
        agent.start()
        try:
            for _ in range(100):
                if 'src' in self.sched.reports:
                    break
                time.sleep(0.1)
        finally:
            agent.stop()
        report = self.sched.reports['src']
        self.assertEqual(16 * GIB, report['memory_mb'])
        self.assertEqual(512, report['merged_mb'])
        self.assertEqual([server['id']], [v['uuid'] for v in report['vms']])
        # PumaVMReport 1.1 (RPC 1.7): a guest's first report is neither
        # lendable nor in grace.
        self.assertEqual((False, False), (report['vms'][0]['lendable'],
                                          report['vms'][0]['lending_grace']))

    def test_apply_pairs(self):
        pair = {'borrower': 'b', 'lender': 'l',
                'borrower_address': '10.9.0.2',
                'lender_address': '10.9.0.3', 'capacity_mb': 256,
                'key': 'k'}
        self.assertIsNone(self.rpc.apply_pairs(self.ctxt, 'src', [pair]))
        self.assertEqual([pair], self.agents['src'].lending.pairs)
        try:
            self.rpc.apply_pairs(self.ctxt, 'src', [{'borrower': 'b'}])
        except Exception as e:
            # A RemoteError, or the InvalidPairs itself on the fake driver.
            self.assertIn('pair 0 lacks', str(e))
        else:
            self.fail('invalid pairs were accepted')
        self.assertEqual([pair], self.agents['src'].lending.pairs)

    def test_memory_server_calls(self):
        uri = self.rpc.start_memory_server(self.ctxt, 'sub', 'inst', 64)
        self.assertEqual(uri, self.rpc.start_memory_server(
            self.ctxt, 'sub', 'inst', 64))
        self.assertTrue(uri['uri'].startswith('tcp:127.0.0.1:'))
        self.assertIsNone(self.rpc.stop_memory_server(self.ctxt, 'sub',
                                                      'inst'))
        self.assertIsNone(self.rpc.stop_memory_server(self.ctxt, 'sub',
                                                      'inst'))
        self.assertEqual({}, self.agents['sub'].memory_servers.list())


class LendingChannelTest(PumaServersTestBase):

    def _flavor(self):
        return self._create_flavor(memory_mb=GIB, vcpu=1, disk=1,
                                   ephemeral=0,
                                   extra_spec={'puma:lending': 'true'})

    def test_interface_and_stats(self):
        self.flags(lending_channel_enabled=True, group='puma')
        defined = self._record_defined_xml()
        server = self._boot(self._flavor())
        xml = [etree.fromstring(x) for x in defined
               if server['id'] in x][-1]
        vifs = [i for i in xml.findall('./devices/interface')
                if i.find('source').get('bridge') == 'br-puma']
        self.assertEqual(1, len(vifs))
        self.assertEqual(lending.tap_name(server['id']),
                         vifs[0].find('target').get('dev'))
        api = rpcapi.ComputeAPI(nova_rpc.TRANSPORT, timeout=10)
        ctxt = nova_context.get_admin_context()
        # Idle is CPU time over an interval: not known at the first
        # report of a guest, then its (fake) CPU has done nothing.
        vm = api.get_memory_stats(ctxt, 'src')['vms'][0]
        self.assertFalse(vm['lendable'])
        vm = api.get_memory_stats(ctxt, 'src')['vms'][0]
        self.assertTrue(vm['lendable'])
        self.assertEqual(server['tenant_id'], vm['project_id'])
        self.assertEqual(lending_vif.address(server['id']),
                         vm['lending_address'])
        # The extra interface does not get in the way of a migration.
        self._live_migrate(server, 'completed', host='dest')

    def test_refused_when_disabled(self):
        server = self._boot(self._flavor(), expected_state='ERROR')
        self.assertIn('lending_channel_enabled is false',
                      server['fault']['message'])


class Shoot4UTest(PumaServersTestBase):

    def test_feature_in_domain_xml(self):
        defined = self._record_defined_xml()
        flavor = self._create_flavor(memory_mb=GIB, vcpu=1, disk=1,
                                     ephemeral=0,
                                     extra_spec={'puma:shoot4u': 'true'})
        server = self._boot(flavor)
        xml = [etree.fromstring(x) for x in defined
               if server['id'] in x][-1]
        kvm = xml.findall('./features/kvm')
        self.assertEqual(1, len(kvm))
        self.assertEqual('on', kvm[0].find('pv-tlb-shootdown').get('state'))
        traits = self._get_provider_traits(self._rp('src'))
        self.assertIn('CUSTOM_PUMA_SHOOT4U', traits)

    def test_refused_without_support(self):
        for compute in self.computes.values():
            compute.driver._puma_shoot4u = False
        flavor = self._create_flavor(memory_mb=GIB, vcpu=1, disk=1,
                                     ephemeral=0,
                                     extra_spec={'puma:shoot4u': 'true'})
        server = self._boot(flavor, expected_state='ERROR')
        self.assertIn('Shoot4U', server['fault']['message'])
