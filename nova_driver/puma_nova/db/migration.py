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
"""Schema upgrades with alembic (puma-manage db sync)."""

import os

from alembic import command
from alembic import config as alembic_config
from alembic import migration as alembic_migration

from puma_nova.db import api

MIGRATIONS = os.path.join(os.path.dirname(__file__), 'migrations')


def _config(connection):
    cfg = alembic_config.Config()
    cfg.set_main_option('script_location', MIGRATIONS)
    cfg.attributes['connection'] = connection
    return cfg


def upgrade(revision='head'):
    """Bring the [database] connection's schema to REVISION."""
    engine = api.get_engine()
    with engine.begin() as connection:
        command.upgrade(_config(connection), revision)


def version():
    """The schema revision of the database, None if it has none."""
    engine = api.get_engine()
    with engine.connect() as connection:
        return alembic_migration.MigrationContext.configure(
            connection).get_current_revision()
