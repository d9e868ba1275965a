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
"""The models match what the alembic migrations build (oslo.db's check).

On SQLite and on a real MariaDB (the tests' private server): a column,
index or constraint that the models have and the migrations do not (or
the other way round) fails here before an operator's db sync meets it.
"""

import os

import fixtures
from oslo_db.sqlalchemy import test_migrations
import sqlalchemy as sa
import testtools

from puma_nova.db import api as db_api
from puma_nova.db import migration
from puma_nova.db import models
from puma_nova.tests import mariadb


class _ModelsMatchMigrations(test_migrations.ModelsMigrationsSync):

    def get_metadata(self):
        return models.Base.metadata

    def get_engine(self):
        return db_api.get_engine()

    def db_sync(self, engine):
        migration.upgrade()


class TestModelsMatchMigrationsSQLite(_ModelsMatchMigrations,
                                      testtools.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        db_api.configure('sqlite:///' + os.path.join(tmp, 'puma.sqlite'))
        self.addCleanup(db_api.configure)


@testtools.skipUnless(*mariadb.AVAILABLE)
class TestModelsMatchMigrationsMariaDB(_ModelsMatchMigrations,
                                       testtools.TestCase):

    def setUp(self):
        super().setUp()
        db_api.configure(self.useFixture(mariadb.MariaDBFixture()).url)
        self.addCleanup(db_api.configure)
        self.addCleanup(lambda: db_api.get_engine().dispose())


class TestUpgradeKeepsHosts(testtools.TestCase):
    """0002 to 0004 keep what hosts reported before them."""

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        db_api.configure('sqlite:///' + os.path.join(tmp, 'puma.sqlite'))
        self.addCleanup(db_api.configure)

    @staticmethod
    def _host_at_0001(conn):
        """Host 'a' as schema 0001 stores it."""
        conn.execute(sa.text(
            "INSERT INTO hosts (name, address, memory_mb, free_mb, "
            "lendable_mb, shoot4u, split, updated_at) VALUES "
            "('a', '10.0.0.1', 4096, 2048, 1024, 0, 1, "
            "'2026-11-29 00:00:00')"))

    def test_0002_host_merged_mb(self):
        migration.upgrade('0001')
        engine = db_api.get_engine()
        with engine.begin() as conn:
            self._host_at_0001(conn)
        migration.upgrade('0002')
        self.assertEqual('0002', migration.version())
        with engine.connect() as conn:
            row = conn.execute(sa.text(
                'SELECT name, free_mb, merged_mb FROM hosts')).one()
        self.assertEqual(('a', 2048, 0), tuple(row))

    def test_0003_vm_lending_grace(self):
        migration.upgrade('0001')
        engine = db_api.get_engine()
        with engine.begin() as conn:
            self._host_at_0001(conn)
            conn.execute(sa.text(
                "INSERT INTO vm_stats (uuid, host, project_id, memory_mb, "
                "rss_mb, free_mb, cache_miss_rate, refaults, lendable) "
                "VALUES ('v', 'a', 'p', 2048, 1024, 1024, 0, 0, 1)"))
        migration.upgrade('0003')
        self.assertEqual('0003', migration.version())
        with engine.connect() as conn:
            row = conn.execute(sa.text(
                'SELECT uuid, lendable, lending_grace FROM vm_stats')).one()
        # Reported before it: lendable as it was, not in grace.
        self.assertEqual(('v', True, False),
                         (row[0], bool(row[1]), bool(row[2])))

    def test_0004_host_cache_saved_mb(self):
        migration.upgrade('0001')
        engine = db_api.get_engine()
        with engine.begin() as conn:
            self._host_at_0001(conn)
        migration.upgrade('0003')
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE hosts SET merged_mb = 300"))
        migration.upgrade()
        self.assertEqual('0004', migration.version())
        with engine.connect() as conn:
            row = conn.execute(sa.text(
                'SELECT name, merged_mb, cache_saved_mb FROM hosts')).one()
        self.assertEqual(('a', 300, 0), tuple(row))
