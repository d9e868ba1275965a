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

import testtools

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
