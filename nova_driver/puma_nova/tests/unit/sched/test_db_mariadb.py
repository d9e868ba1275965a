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
"""test_db's database API and ledger tests, on a real MariaDB.

Deployments run puma-scheduler on MariaDB or MySQL, not SQLite: row
locking, transactions and types differ, so the same tests run on the
tests' private MariaDB server (puma_nova.tests.mariadb).
"""

import threading

import testtools

from puma_nova.db import api as db_api
from puma_nova import exception
from puma_nova.tests import mariadb
from puma_nova.tests.unit.sched import base
from puma_nova.tests.unit.sched import test_db


@testtools.skipUnless(*mariadb.AVAILABLE)
class TestMigrationMariaDB(test_db.TestMigration):
    DATABASE = base.MariaDBDatabaseFixture


@testtools.skipUnless(*mariadb.AVAILABLE)
class TestHostReportMariaDB(test_db.TestHostReport):
    DATABASE = base.MariaDBDatabaseFixture


@testtools.skipUnless(*mariadb.AVAILABLE)
class TestLedgerMariaDB(test_db.TestLedger):
    DATABASE = base.MariaDBDatabaseFixture


@testtools.skipUnless(*mariadb.AVAILABLE)
class TestPlanGuardMariaDB(base.TestCase):
    """Two schedulers (two guards, two connections) plan one at a time."""

    DATABASE = base.MariaDBDatabaseFixture

    def test_second_scheduler_waits_for_the_first(self):
        first, second = db_api.PlanGuard(), db_api.PlanGuard()
        entered = threading.Event()

        def other_scheduler():
            with second:
                entered.set()

        with first:
            t = threading.Thread(target=other_scheduler)
            t.start()
            # Not a timing: the other scheduler must not get in at all
            # while the first holds the lock.
            self.assertFalse(entered.wait(2))
        self.assertTrue(entered.wait(60))
        t.join(60)

    def test_a_lock_held_elsewhere_times_out_with_a_clear_error(self):
        first, second = db_api.PlanGuard(), db_api.PlanGuard(timeout=1)
        errors = []

        def other_scheduler():
            try:
                with second:
                    pass
            except exception.PumaException as e:
                errors.append(str(e))

        with first:
            t = threading.Thread(target=other_scheduler)
            t.start()
            t.join(60)
        self.assertEqual(['another puma-scheduler held the planning lock '
                          'for 1 s'], errors)
        with second:    # released: free again
            pass
