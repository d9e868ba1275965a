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
"""Both Puma RPC APIs over one real RabbitMQ broker, in both directions.

One private broker (lab/rabbitmq) carries:

* topic puma-scheduler, served by the real SchedulerService (manager,
  SQLite database migrated with alembic);
* topic puma-compute, served for hosts h1, h2 by the real
  PumaComputeEndpoint in front of each host's real ComputeAgent (what
  puma-compute-agent runs); only what needs a hypervisor is faked
  (Nova's Host: memory totals, no guests). Memory servers are real
  processes (the test double of qemu-memory-server), the lending channel
  records pairs without nft.

Each host's PumaLibvirtDriver methods (what nova-compute runs) share the
host's file of split plans with its agent. The driver calls the
scheduler with SchedulerAPI and other compute hosts with ComputeAPI, the
scheduler calls the hosts with ComputeAPI, all over oslo.messaging's
rabbit driver.
"""

import os
import sys
import threading

import fixtures
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
import oslo_messaging as messaging
import testtools

from puma_nova.compute import agent as compute_agent
from puma_nova.compute import lending
from puma_nova.compute import manager as compute_manager
from puma_nova.compute import memory_server
from puma_nova.compute import rpcapi as compute_rpcapi
from puma_nova.compute import split_plans
from puma_nova import context
from puma_nova.db import api as db_api
from puma_nova import exception
from puma_nova import lending_address
from puma_nova import rpc
from puma_nova.scheduler import rpcapi as scheduler_rpcapi
from puma_nova.scheduler import service
from puma_nova.tests import rabbitmq
from puma_nova.tests.unit.sched import base
from puma_nova.tests.unit.virt import test_split
from puma_nova.virt import driver as puma_driver
from puma_nova.virt import ledger

CONF = base.CONF
# Host memory (total, used) in MiB as the fake Nova Host reports it.
HOSTS = {'h1': (6144, 2048), 'h2': (32768, 2048)}


class FakeHost(object):
    """What the driver reads from nova.virt.libvirt.host.Host."""

    def __init__(self, total_mb, used_mb):
        self.total_mb, self.used_mb = total_mb, used_mb

    def get_memory_mb_total(self):
        return self.total_mb

    def get_memory_mb_used(self):
        return self.used_mb

    def list_guests(self, only_running=True):
        return []


@testtools.skipUnless(*rabbitmq.AVAILABLE)
class TestBothAPIsOverRabbitMQ(base.TestCase):

    def setUp(self):
        super().setUp()
        objects.register_all()
        self.flags(group='puma_scheduler', host='sched-test',
                   planning_interval=3600, reserve_mb=512, rpc_timeout=30,
                   miss_rate_threshold=0.1)
        self.flags(group='puma', split_allowed=True, free_ram_margin_mb=0,
                   lendable_max_mb=0, rpc_timeout=30,
                   memory_server_address='127.0.0.1')
        broker = self.useFixture(rabbitmq.RabbitMQFixture())
        self.assertTrue(broker.url.startswith('rabbit://'), broker.url)
        self.transport = rpc.get_transport(CONF, url=broker.url)
        self.addCleanup(rpc.cleanup)

        self.sched = service.SchedulerService(self.transport)
        self.sched.start()
        self.addCleanup(self.sched.stop)

        tmp = self.useFixture(fixtures.TempDir()).path
        binary = os.path.join(tmp, 'qemu-memory-server')
        with open(binary, 'w') as f:
            f.write('#!%s\nimport sys\nsys.path[:0] = %r\n'
                    'from puma_nova.tests import memory_server_double\n'
                    'sys.exit(memory_server_double.main())\n'
                    % (sys.executable, sys.path))
        os.chmod(binary, 0o755)
        port = rabbitmq.free_port_block(8)
        self.drivers = {}
        self.agents = {}
        for i, host in enumerate(sorted(HOSTS)):
            agent = self.agents[host] = self._agent(
                host, os.path.join(tmp, host), binary, port + 4 * i)
            endpoint = compute_manager.PumaComputeEndpoint(agent)
            server = rpc.get_server(self.transport, rpc.COMPUTE_TOPIC, host,
                                    [endpoint])
            server.start()
            self.addCleanup(server.wait)
            self.addCleanup(server.stop)
            self.drivers[host] = self._driver(host, agent.plans.path)

        self.scheduler_api = scheduler_rpcapi.SchedulerAPI(self.transport,
                                                           timeout=60)
        self.compute_api = compute_rpcapi.ComputeAPI(self.transport,
                                                     timeout=60)
        self.ctxt = context.get_admin_context()
        self.nova_ctxt = nova_context.get_admin_context()
        # Until the scheduler's queue exists, calls to it are dropped.
        self.scheduler_api.get_ledger(self.ctxt, 'nowhere')

    def _agent(self, host, instances_path, binary, port_min):
        """HOST's real ComputeAgent, without a hypervisor."""
        self.flags(group='puma', memory_server_binary=binary,
                   memory_server_port_min=port_min,
                   memory_server_port_max=port_min + 3,
                   memory_server_check_interval=0, shoot4u_allowed=False,
                   lending_channel_enabled=False)
        self.flags(instances_path=instances_path)
        agent = compute_agent.ComputeAgent(host, FakeHost(*HOSTS[host]),
                                           self.transport)
        self.addCleanup(self._stop_memory_servers, agent)
        return agent

    def _driver(self, host, plans_path):
        """The real PumaLibvirtDriver methods, without a hypervisor."""
        drv = puma_driver.PumaLibvirtDriver.__new__(
            puma_driver.PumaLibvirtDriver)
        drv._puma_host = host
        drv._host = FakeHost(*HOSTS[host])
        drv._puma_shoot4u = False
        drv._puma_plans = split_plans.SplitPlans(plans_path, host)
        drv._puma_lock = threading.Lock()
        drv._puma_scheduler_api = scheduler_rpcapi.SchedulerAPI(
            self.transport, timeout=60)
        drv._puma_compute_api = compute_rpcapi.ComputeAPI(self.transport,
                                                          timeout=60)
        drv._puma_reserved = ledger.ReservedKeeper()
        drv._puma_ledger = ledger.LedgerCache(drv._puma_fetch_ledger, 0)
        return drv

    @staticmethod
    def _stop_memory_servers(agent):
        for uuid in list(agent.memory_servers.list()):
            agent.memory_servers.stop(uuid)

    def _instance(self, memory_mb):
        inst = test_split._instance({'puma:split': 'allowed'})
        inst.flavor.memory_mb = memory_mb
        inst.project_id = 'p1'
        # Its source (never its sub host) is a host this test does not
        # run; h2 acts for it where the source's part is tested.
        inst.host = 'h0'
        return inst

    def test_compute_to_scheduler(self):
        h1, h2 = self.drivers['h1'], self.drivers['h2']
        # report_host with the agents' own statistics.
        for host, agent in self.agents.items():
            agent._scheduler.report_host(self.nova_ctxt, host,
                                         agent.memory_stats())
        self.assertEqual([('h1', 6144, 4096), ('h2', 32768, 30720)],
                         [(h['name'], h['memory_mb'], h['free_mb'])
                          for h in db_api.host_list(self.ctxt)])
        # A document the scheduler refuses: the driver's client names the
        # problem before sending; a 1.0 client gets a clear RemoteError.
        bad = self.agents['h1'].memory_stats()
        del bad['free_mb']
        e = self.assertRaises(exception.InvalidStats,
                              h1._puma_scheduler.report_host,
                              self.nova_ctxt, 'h1', bad)
        self.assertIn("'free_mb' is a required property", str(e))
        e = self.assertRaises(
            messaging.RemoteError,
            h1._puma_scheduler.client.prepare(version='1.0').call,
            self.nova_ctxt, 'report_host', host='h1', stats=bad)
        self.assertEqual('InvalidStats', e.exc_type)
        self.assertIn("'free_mb' is a required property", e.value)

        # h1 as destination of an 8 GiB instance with 4 GiB free: the
        # driver plans with the scheduler (plan_split, get_ledger) and
        # starts the memory server on h2 (ComputeAPI, host to host).
        inst = self._instance(8192)
        plan = h1._puma_plan_if_needed(self.nova_ctxt, inst, None)
        self.assertEqual(('h1', 'h2', 3584, 4608),
                         (plan['main_host'], plan['sub_host'],
                          plan['main_limit_mb'], plan['remote_mb']))
        served = self.agents['h2'].memory_servers.list()[inst.uuid]
        self.assertEqual(4608, served['size_mb'])
        self.assertEqual('tcp:127.0.0.1:%d' % served['port'],
                         plan['sub_uri'])
        self.assertTrue(memory_server._alive(served['pid']))
        self.assertEqual([{'instance_uuid': inst.uuid, 'main_host': 'h1',
                           'sub_host': 'h2', 'mb': 4608,
                           'state': 'planned'}],
                         h2._puma_scheduler.get_ledger(self.nova_ctxt,
                                                       'h2'))
        # The source asks h1 for the plan of this instance: h1's agent
        # answers with what h1's driver kept.
        self.assertEqual(plan, h2._puma_compute.get_split_plan(
            self.nova_ctxt, 'h1', inst.uuid))
        self.assertIsNone(h2._puma_compute.get_split_plan(
            self.nova_ctxt, 'h1', inst.uuid, 'another-migration'))

        # The state machine, and its refusal as a RemoteError.
        h2._puma_scheduler.split_state(self.nova_ctxt, inst.uuid, 'running')
        e = self.assertRaises(messaging.RemoteError,
                              h2._puma_scheduler.split_state,
                              self.nova_ctxt, inst.uuid, 'planned')
        self.assertEqual('Invalid', e.exc_type)
        self.assertEqual(
            [('h1', 'running')],
            [(x['main_host'], x['state']) for x in
             h1._puma_scheduler.get_ledger(self.nova_ctxt, 'h1')])

        # Rollback as the source does it: failed, memory server stopped
        # on h2, release_split(main_host='h1') (API 1.1), plan dropped.
        h2._puma_release_main(self.nova_ctxt, inst.uuid, 'h1',
                              state='failed')
        h2._puma_compute.drop_split_plan(self.nova_ctxt, 'h1', inst.uuid)
        self.assertEqual({}, self.agents['h2'].memory_servers.list())
        self.assertFalse(memory_server._alive(served['pid']))
        self.assertIsNone(h1._puma_plans.get(inst.uuid))
        self.assertEqual([], h1._puma_scheduler.get_ledger(self.nova_ctxt,
                                                           'h1'))
        self.assertEqual(['released'],
                         [x['state'] for x in db_api.ledger_list(self.ctxt)])

        # No sub host for 64 GiB: the scheduler's PlanError reaches the
        # compute caller as a RemoteError, and the driver refuses the
        # migration with the scheduler's reason.
        e = self.assertRaises(messaging.RemoteError,
                              h1._puma_scheduler.plan_split,
                              self.nova_ctxt, 'huge', 65536, 'h1', 'p1')
        self.assertEqual('PlanError', e.exc_type)
        ex = self.assertRaises(nova_exception.MigrationPreCheckError,
                               h1._puma_plan_if_needed, self.nova_ctxt,
                               self._instance(65536), None)
        self.assertIn('no sub host for a split migration', str(ex))
        self.assertIn('can keep only 3584 MiB of the 65536 MiB', str(ex))
        self.assertEqual(['released'],
                         [x['state'] for x in db_api.ledger_list(self.ctxt)])

    def test_scheduler_to_compute(self):
        api = self.compute_api
        # Memory servers: started, idempotent, stopped, idempotent.
        uri = api.start_memory_server(self.ctxt, 'h2', 'inst', 64)
        self.assertEqual(uri, api.start_memory_server(self.ctxt, 'h2',
                                                      'inst', 64))
        pid = self.agents['h2'].memory_servers.list()['inst']['pid']
        self.assertTrue(uri['uri'].startswith('tcp:127.0.0.1:'))
        self.assertTrue(memory_server._alive(pid))
        self.assertIsNone(api.stop_memory_server(self.ctxt, 'h2', 'inst'))
        self.assertIsNone(api.stop_memory_server(self.ctxt, 'h2', 'inst'))
        self.assertFalse(memory_server._alive(pid))
        # With TLS, the clients (RPC 1.1) make the server's admission
        # list; a caller capped at 1.0 does not send them.
        servers = self.agents['h2'].memory_servers
        certs = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MockPatchObject(servers, '_tls_x509_dir',
                                                 certs))
        self.useFixture(fixtures.MockPatchObject(servers, '_client_dn',
                                                 'CN={host}'))
        api.start_memory_server(self.ctxt, 'h2', 'inst', 64,
                                clients=['h1', 'h2'])
        self.assertEqual(['h1', 'h2'], servers.list()['inst']['clients'])
        api.stop_memory_server(self.ctxt, 'h2', 'inst')
        old = compute_rpcapi.ComputeAPI(self.transport, timeout=60,
                                        version_cap='1.0')
        old.start_memory_server(self.ctxt, 'h2', 'inst', 64,
                                clients=['h1', 'h2'])
        self.assertNotIn('clients', servers.list()['inst'])
        old.stop_memory_server(self.ctxt, 'h2', 'inst')

        # A host that does not take part in split migrations says so.
        self.flags(group='puma', split_allowed=False)
        e = self.assertRaises(messaging.RemoteError, api.start_memory_server,
                              self.ctxt, 'h1', 'inst', 64)
        self.assertEqual('MemoryServerError', e.exc_type)
        self.assertIn('host h1 does not take part in split migrations',
                      e.value)

        # Statistics as the agent computes them.
        stats = api.get_memory_stats(self.ctxt, 'h1')
        self.assertEqual((6144, 4096, '127.0.0.1', False, []),
                         (stats['memory_mb'], stats['free_mb'],
                          stats['address'], stats['split'], stats['vms']))

        # A planning round pushes the pair to both hosts' endpoints.
        self.scheduler_api.report_host(self.ctxt, 'h1', base.stats(
            2000, [base.vm('lender', free_mb=3000, lendable=True)],
            address='127.0.0.11'))
        self.scheduler_api.report_host(self.ctxt, 'h2', base.stats(
            30000, [base.vm('borrower', miss=0.5, refaults=262144)],
            address='127.0.0.12'))
        self.sched.manager.run_planning_round(self.ctxt)
        pairs = {h: a.lending.pairs for h, a in self.agents.items()}
        self.assertEqual(pairs['h1'], pairs['h2'])
        self.assertEqual(
            [('lender', 'borrower', lending_address.address('lender'),
              lending_address.address('borrower'), 1024)],
            [(p['lender'], p['borrower'], p['lender_address'],
              p['borrower_address'], p['capacity_mb'])
             for p in pairs['h1']])
        # Invalid pairs are refused with the reason; the set in force
        # stays.
        e = self.assertRaises(lending.InvalidPairs, api.apply_pairs,
                              self.ctxt, 'h1', [{'borrower': 'b'}])
        self.assertIn('pair 0 lacks', str(e))
        e = self.assertRaises(
            messaging.RemoteError,
            api.client.prepare(server='h1', version='1.0').call,
            self.ctxt, 'apply_pairs', pairs=[{'borrower': 'b'}])
        self.assertEqual('InvalidPairs', e.exc_type)
        self.assertIn('pair 0 lacks', e.value)
        self.assertEqual(pairs['h2'], self.agents['h1'].lending.pairs)
        self.assertIsNone(api.apply_pairs(self.ctxt, 'h1', []))
        self.assertEqual([], self.agents['h1'].lending.pairs)
