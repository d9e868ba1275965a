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
"""Shared fixtures: a migrated database (SQLite, or MariaDB) per test."""

import datetime
import os

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import oslo_messaging as messaging
import testtools

from puma_nova.conf import scheduler as sched_conf
from puma_nova import context
from puma_nova.db import api as db_api
from puma_nova.db import migration
from puma_nova.db import models
from puma_nova import policy
from puma_nova import rpc
from puma_nova.scheduler import placement
from puma_nova.scheduler import rpcapi
from puma_nova.scheduler import service
from puma_nova.tests import mariadb

CONF = cfg.CONF
sched_conf.register_opts(CONF)


class DatabaseFixture(fixtures.Fixture):
    """A file-backed SQLite database, migrated to head with alembic."""

    def _setUp(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        self.url = 'sqlite:///' + os.path.join(tmp, 'puma.sqlite')
        db_api.configure(self.url)
        migration.upgrade()


class MariaDBDatabaseFixture(fixtures.Fixture):
    """A database of the tests' private MariaDB, migrated to head."""

    def _setUp(self):
        self.url = self.useFixture(mariadb.MariaDBFixture()).url
        db_api.configure(self.url)
        self.addCleanup(self._forget)
        migration.upgrade()

    @staticmethod
    def _forget():
        """Close the pool's connections before the database is dropped."""
        db_api.get_engine().dispose()
        db_api.configure()


class PolicyFixture(fixtures.Fixture):
    """A new puma-api policy enforcer, CONF parsed as a service does.

    The enforcer looks its policy file up with CONF.find_file, which
    needs a parsed CONF; the Config fixture clears the parse at cleanup.
    """

    def _setUp(self):
        CONF([], project='puma', default_config_files=[],
             default_config_dirs=[])
        policy.reset()
        self.addCleanup(policy.reset)


class FakePlacement(object):
    """What the scheduler lends in placement, per sub host.

    ``room`` caps what a host may have reserved (None: no cap).
    """

    def __init__(self):
        self.reserved = {}
        self.room = {}
        self.calls = []

    def lend(self, host, mb):
        self.calls.append(('lend', host, mb))
        new = self.reserved.get(host, 0) + mb
        room = self.room.get(host)
        if room is not None and new > room:
            raise placement.NoRoom('host %s cannot lend %d MiB' % (host, mb))
        self.reserved[host] = new
        return new

    def give_back(self, host, mb):
        self.calls.append(('give_back', host, mb))
        self.reserved[host] = max(0, self.reserved.get(host, 0) - mb)
        return self.reserved[host]

    def lent(self):
        """{host: MiB} of the hosts that lend something."""
        return {h: mb for h, mb in self.reserved.items() if mb}


class FakeNova(object):
    """Nova's live-migration records per server, as NovaClient reads them.

    ``error``, when set, is raised by every read (Nova unreachable).
    """

    def __init__(self):
        self.records = {}
        self.error = None
        self.reads = []

    def add(self, server_id, status, created_at, updated_at=None):
        """Record a live migration of SERVER_ID (the newest); return it."""
        mid = sum(len(r) for r in self.records.values()) + 1
        record = {'uuid': 'migration-%d' % mid,
                  'status': status, 'dest_compute': 'm',
                  'created_at': created_at, 'updated_at': updated_at}
        self.records.setdefault(server_id, []).insert(0, record)
        return record

    def live_migrations(self, server_id):
        self.reads.append(server_id)
        if self.error is not None:
            raise self.error
        return [dict(r) for r in self.records.get(server_id, ())]


class TestCase(testtools.TestCase):

    # MariaDBDatabaseFixture in the tests that run on MariaDB too.
    DATABASE = DatabaseFixture

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(CONF))
        self.db = self.useFixture(self.DATABASE())
        self.ctxt = context.get_admin_context()
        # The services' placement client (scheduler.placement).
        self.placement = FakePlacement()
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.scheduler.placement.from_conf',
            lambda: self.placement))
        # The scheduler service's Nova client (NovaClient.live_migrations).
        self.nova = FakeNova()
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.scheduler.service.nova_client', lambda: self.nova))

    def flags(self, group=None, **kw):
        self.conf.config(group=group, **kw)


def vm(uuid, project='p1', memory_mb=4096, free_mb=0, lendable=False,
       miss=0.0, refaults=0, grace=False):
    return {'uuid': uuid, 'project_id': project, 'memory_mb': memory_mb,
            'rss_mb': memory_mb - free_mb, 'free_mb': free_mb,
            'cache_miss_rate': miss, 'refaults': refaults, 'puma': None,
            'lendable': lendable, 'lending_grace': grace}


def stats(free_mb, vms=(), memory_mb=65536, address=None):
    return {'memory_mb': memory_mb, 'free_mb': free_mb,
            'lendable_mb': sum(v['free_mb'] for v in vms if v['lendable']),
            'address': address or '192.0.2.1', 'shoot4u': False,
            'split': True, 'vms': list(vms)}


class ComputeEndpoint(object):
    """The compute side of the contract as a test endpoint."""

    target = messaging.Target(version='1.2')

    def __init__(self, host):
        self.host = host
        self.applied = []
        # Type names of what each apply_pairs call carried.
        self.kinds = []
        self.stopped = []

    def apply_pairs(self, ctxt, pairs):
        """PumaLendingPair objects (1.2) or dictionaries, kept as dicts."""
        self.kinds.append(sorted({type(p).__name__ for p in pairs}))
        self.applied.append([p if isinstance(p, dict) else p.to_dict()
                             for p in pairs])

    def stop_memory_server(self, ctxt, instance_uuid):
        self.stopped.append(instance_uuid)


class RPCFixture(fixtures.Fixture):
    """puma-scheduler on an in-process fake:// bus, plus computes."""

    def __init__(self, compute_hosts=()):
        self.compute_hosts = compute_hosts

    def _setUp(self):
        self.transport = rpc.get_transport(CONF, url='fake://')
        self.addCleanup(rpc.cleanup)
        self.service = service.SchedulerService(self.transport)
        self.service.start()
        self.addCleanup(self.service.stop)
        self.computes = {}
        for host in self.compute_hosts:
            ep = ComputeEndpoint(host)
            server = rpc.get_server(self.transport, rpc.COMPUTE_TOPIC, host,
                                    [ep])
            server.start()
            self.addCleanup(server.wait)
            self.addCleanup(server.stop)
            self.computes[host] = ep
        self.api = rpcapi.SchedulerAPI(self.transport)


def age_ledger(seconds, **where):
    """Make ledger entries (all, or those matching WHERE) SECONDS older."""
    table = models.LedgerEntry.__table__
    with db_api.get_engine().begin() as conn:
        for row in conn.execute(table.select()):
            if all(row._mapping[c] == v for c, v in where.items()):
                conn.execute(table.update().where(
                    table.c.id == row.id).values(
                        updated_at=row.updated_at -
                        datetime.timedelta(seconds=seconds),
                        created_at=row.created_at -
                        datetime.timedelta(seconds=seconds)))


def rpc_error(test, func, *args):
    """(exception class name, message) of a failing RPC call.

    Over RabbitMQ the caller gets a RemoteError naming the server-side
    exception; the in-process fake driver re-raises the exception itself.
    """
    e = test.assertRaises(Exception, func, *args)
    if isinstance(e, messaging.RemoteError):
        return e.exc_type, e.value
    return type(e).__name__, str(e)
