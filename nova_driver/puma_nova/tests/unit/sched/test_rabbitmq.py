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
"""The real puma-scheduler process over a real, private RabbitMQ broker.

The broker comes from lab/rabbitmq (loopback only, its own ports, node
name and directories, stopped by PID); the test plays the compute hosts:
it serves the puma-compute endpoint of the contract for two hosts and
calls the scheduler with SchedulerAPI; the real puma-api process shows
what the scheduler stored.  Skipped only when Debian's rabbitmq-server
is not installed.
"""

import os
import signal
import socket
import subprocess
import sys
import time

import fixtures
from keystoneauth1 import session as ks_session
from oslo_config import fixture as config_fixture
import oslo_messaging as messaging
from oslo_messaging import opts as messaging_opts
import testtools
from testtools import content

from puma_nova import context
from puma_nova import exception
from puma_nova import lending_address
from puma_nova.osc import client as puma_client
from puma_nova import rpc
from puma_nova.scheduler import rpcapi
from puma_nova.tests import rabbitmq
from puma_nova.tests.unit.sched import base


def _script(name):
    return os.path.join(os.path.dirname(sys.executable), name)


@testtools.skipUnless(*rabbitmq.AVAILABLE)
class TestSchedulerOverRabbitMQ(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.rabbit = self.useFixture(rabbitmq.RabbitMQFixture())
        tmp = self.useFixture(fixtures.TempDir()).path
        self.conf_file = os.path.join(tmp, 'puma.conf')
        self.log_file = os.path.join(tmp, 'puma-scheduler.log')
        with open(self.conf_file, 'w') as f:
            f.write('[DEFAULT]\ntransport_url = %s\n'
                    '[database]\nconnection = sqlite:///%s/puma.sqlite\n'
                    '[puma_scheduler]\nhost = sched-test\n'
                    'planning_interval = 1\nrpc_timeout = 10\n'
                    'miss_rate_threshold = 0.1\n'
                    # No placement service here (test_placement,
                    # the functional tests).
                    'placement_lending = false\n'
                    '[puma_api]\nauth_strategy = noauth\nport = %d\n'
                    % (self.rabbit.url, tmp, rabbitmq.free_port_block(1)))
        subprocess.run([_script('puma-manage'), '--config-file',
                        self.conf_file, 'db', 'sync'], check=True,
                       timeout=120)
        self.proc = subprocess.Popen(
            [_script('puma-scheduler'), '--config-file', self.conf_file,
             '--log-file', self.log_file])
        self.addCleanup(self._stop_scheduler)
        self.api_proc = subprocess.Popen(
            [_script('puma-api'), '--config-file', self.conf_file,
             '--log-file', os.path.join(tmp, 'puma-api.log')])
        self.addCleanup(self._stop, self.api_proc)

        # h1 and h2 below stand for nova-compute, whose transport publishes
        # on Nova's exchange, the default of puma-scheduler too
        # (rpc.set_defaults): a test transport on oslo.messaging's default
        # exchange would never reach the scheduler.
        conf = self.useFixture(config_fixture.Config(base.CONF))
        conf.register_opts(dict(messaging_opts.list_opts())[None])
        conf.config(control_exchange=rpc.CONTROL_EXCHANGE)
        self.transport = rpc.get_transport(base.CONF, url=self.rabbit.url)
        self.addCleanup(rpc.cleanup)
        self.computes = {}
        for host in ('h1', 'h2'):
            ep = base.ComputeEndpoint(host)
            server = rpc.get_server(self.transport, rpc.COMPUTE_TOPIC, host,
                                    [ep])
            server.start()
            self.addCleanup(server.wait)
            self.addCleanup(server.stop)
            self.computes[host] = ep
        self.api = rpcapi.SchedulerAPI(self.transport, timeout=60)
        self.ctxt = context.get_admin_context()
        self._wait_ready()

    def _wait_ready(self):
        """Until the scheduler's queue exists, calls to it are dropped."""
        probe = rpcapi.SchedulerAPI(self.transport, timeout=2)
        deadline = time.monotonic() + 120
        while True:
            self.assertIsNone(self.proc.poll(), 'puma-scheduler exited')
            try:
                return probe.get_ledger(self.ctxt, 'nowhere')
            except messaging.MessagingTimeout:
                if time.monotonic() > deadline:
                    raise

    @staticmethod
    def _stop(proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _stop_scheduler(self):
        self._stop(self.proc)
        if os.path.exists(self.log_file) and \
                'puma-scheduler.log' not in self.getDetails():
            self.addDetail('puma-scheduler.log', content.content_from_file(
                self.log_file, buffer_now=True))

    def _wait_for(self, what, predicate, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            self.assertIsNone(self.proc.poll(), 'puma-scheduler exited')
            time.sleep(0.2)
        self.fail('timed out waiting for %s' % what)

    def _api_port(self):
        with open(self.conf_file) as f:
            return f.read().rsplit('port = ', 1)[1].strip()

    def _api_up(self):
        self.assertIsNone(self.api_proc.poll(), 'puma-api exited')
        with socket.socket() as s:
            return s.connect_ex(('127.0.0.1', int(self._api_port()))) == 0

    def _report(self, lender_idle):
        # 262144 refaulted pages of 4 KiB: 1024 MiB of missing cache.
        self.api.report_host(self.ctxt, 'h1', base.stats(
            2000, [base.vm('lender', free_mb=3000, lendable=lender_idle)],
            address='127.0.0.11'))
        self.api.report_host(self.ctxt, 'h2', base.stats(
            30000, [base.vm('borrower', miss=0.5, refaults=262144)],
            address='127.0.0.12'))

    def test_rpc_api_and_pair_push(self):
        self._report(lender_idle=True)

        # A planning round pushes the new pair to both hosts.
        h1, h2 = self.computes['h1'].applied, self.computes['h2'].applied
        self._wait_for('pairs pushed', lambda: h1 and h2)
        self.assertEqual(h1[-1], h2[-1])
        pair = h1[-1][0]
        # The instances' own lending-channel addresses, not their hosts'.
        self.assertEqual(
            ('lender', 'borrower', lending_address.address('lender'),
             lending_address.address('borrower'), 1024),
            (pair['lender'], pair['borrower'], pair['lender_address'],
             pair['borrower_address'], pair['capacity_mb']))

        # Split migration of a 4 GiB server to h1: 1488 MiB stay there
        # (2000 - 512 reserve), the rest goes to h2.
        plan = self.api.plan_split(self.ctxt, 'big', 4096, 'h1', 'p1')
        self.assertEqual({'sub_host': 'h2', 'main_limit_mb': 1488,
                          'remote_mb': 2608}, plan)
        self.assertEqual([{'instance_uuid': 'big', 'main_host': 'h1',
                           'sub_host': 'h2', 'mb': 2608,
                           'state': 'planned'}],
                         self.api.get_ledger(self.ctxt, 'h2'))
        self.api.split_state(self.ctxt, 'big', 'running')
        self.assertEqual('running',
                         self.api.get_ledger(self.ctxt, 'h1')[0]['state'])
        e = self.assertRaises(messaging.RemoteError, self.api.split_state,
                              self.ctxt, 'big', 'planned')
        self.assertEqual('Invalid', e.exc_type)
        # The real puma-api process reads the same database.
        client = puma_client.Client(
            ks_session.Session(), endpoint_override='http://127.0.0.1:%s' %
            self._api_port())
        self._wait_for('puma-api', self._api_up)
        self.assertEqual([('big', 'h1', 'h2', 'running')],
                         [(e['instance_uuid'], e['main_host'],
                           e['sub_host'], e['state'])
                          for e in client.list('ledger', active='true')])
        self.assertEqual([('lender', 'borrower', 1024)],
                         [(p['lender'], p['borrower'], p['capacity_mb'])
                          for p in client.list('pairs')])
        self.api.release_split(self.ctxt, 'big')
        self.api.release_split(self.ctxt, 'big')
        self.assertEqual([], client.list('ledger', active='true'))
        self.assertEqual([], self.api.get_ledger(self.ctxt, 'h1'))

        # No sub host for 64 GiB: PlanError, nothing recorded.
        e = self.assertRaises(messaging.RemoteError, self.api.plan_split,
                              self.ctxt, 'huge', 65536, 'h1', 'p1')
        self.assertEqual('PlanError', e.exc_type)
        self.assertEqual([], self.api.get_ledger(self.ctxt, 'h1'))

        # Bad statistics are refused with the reason: by the client before
        # it sends them, and by the scheduler when a 1.0 client sends them.
        bad = base.stats(10, [base.vm('x')])
        del bad['vms'][0]['project_id']
        e = self.assertRaises(exception.InvalidStats, self.api.report_host,
                              self.ctxt, 'h3', bad)
        self.assertIn("'project_id' is a required property", str(e))
        e = self.assertRaises(
            messaging.RemoteError,
            self.api.client.prepare(version='1.0').call, self.ctxt,
            'report_host', host='h3', stats=bad)
        self.assertEqual('InvalidStats', e.exc_type)
        self.assertIn("'project_id' is a required property", e.value)

        # The lender wakes up: both hosts get an empty set.
        self._report(lender_idle=False)
        self._wait_for('pair revoked', lambda: h1[-1] == [] and h2[-1] == [])

        self._stop_scheduler()
        self.assertEqual(0, self.proc.returncode)
