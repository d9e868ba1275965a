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
"""Initial schema: hosts, vm_stats, pairs, memory_servers, ledger.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from alembic import op
import sqlalchemy as sa

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'hosts',
        sa.Column('name', sa.String(255), primary_key=True),
        sa.Column('address', sa.String(255), nullable=False),
        sa.Column('memory_mb', sa.Integer, nullable=False),
        sa.Column('free_mb', sa.Integer, nullable=False),
        sa.Column('lendable_mb', sa.Integer, nullable=False),
        sa.Column('shoot4u', sa.Boolean, nullable=False),
        sa.Column('split', sa.Boolean, nullable=False),
        sa.Column('updated_at', sa.DateTime, nullable=False))
    op.create_table(
        'vm_stats',
        sa.Column('uuid', sa.String(36), primary_key=True),
        sa.Column('host', sa.String(255),
                  sa.ForeignKey('hosts.name', ondelete='CASCADE'),
                  nullable=False, index=True),
        sa.Column('project_id', sa.String(255), nullable=True),
        sa.Column('memory_mb', sa.Integer, nullable=False),
        sa.Column('rss_mb', sa.Integer, nullable=False),
        sa.Column('free_mb', sa.Integer, nullable=False),
        sa.Column('cache_miss_rate', sa.Float, nullable=False),
        sa.Column('refaults', sa.BigInteger, nullable=False),
        sa.Column('lendable', sa.Boolean, nullable=False),
        sa.Column('counters', sa.JSON, nullable=True))
    op.create_table(
        'pairs',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('lender', sa.String(36), nullable=False, index=True),
        sa.Column('borrower', sa.String(36), nullable=False, index=True),
        sa.Column('lender_host', sa.String(255), nullable=False),
        sa.Column('borrower_host', sa.String(255), nullable=False),
        sa.Column('capacity_mb', sa.Integer, nullable=False),
        sa.Column('key', sa.String(64), nullable=False),
        sa.Column('created_at', sa.DateTime, nullable=False),
        sa.UniqueConstraint('lender', 'borrower',
                            name='uniq_pairs0lender0borrower'))
    op.create_table(
        'memory_servers',
        sa.Column('instance_uuid', sa.String(36), primary_key=True),
        sa.Column('host', sa.String(255), nullable=False, index=True),
        sa.Column('size_mb', sa.Integer, nullable=False),
        sa.Column('uri', sa.String(255), nullable=True),
        sa.Column('state', sa.String(16), nullable=False),
        sa.Column('updated_at', sa.DateTime, nullable=False))
    op.create_table(
        'ledger',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('instance_uuid', sa.String(36), nullable=False,
                  index=True),
        sa.Column('project_id', sa.String(255), nullable=False),
        sa.Column('main_host', sa.String(255), nullable=False, index=True),
        sa.Column('sub_host', sa.String(255), nullable=False, index=True),
        sa.Column('mb', sa.Integer, nullable=False),
        sa.Column('main_limit_mb', sa.Integer, nullable=False),
        sa.Column('state', sa.String(16), nullable=False, index=True),
        sa.Column('created_at', sa.DateTime, nullable=False),
        sa.Column('updated_at', sa.DateTime, nullable=False))
