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
"""Hosts report the host page cache exclusive caching saves.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07
"""

from alembic import op
import sqlalchemy as sa

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade():
    # Hosts that reported before it saved nothing that we know of.
    op.add_column('hosts', sa.Column('cache_saved_mb', sa.Integer,
                                     nullable=False, server_default='0'))
