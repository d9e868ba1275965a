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
"""VMs report whether their CPU is in its grace report as lenders.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from alembic import op
import sqlalchemy as sa

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade():
    # VMs that reported before it: lendable or not, never in grace.
    op.add_column('vm_stats', sa.Column('lending_grace', sa.Boolean,
                                        nullable=False,
                                        server_default=sa.false()))
