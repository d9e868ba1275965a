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
"""SQLAlchemy models of the Puma database.

hosts          one row per compute host, replaced by each report_host call
vm_stats       the latest statistics of each VM, owned by its host's row
pairs          lending pairs in force (lender VM -> borrower VM)
memory_servers memory servers holding the remote part of split servers
ledger         split-migration accounting (see LEDGER_TRANSITIONS)

Memory is in MiB everywhere.  The schema is created and upgraded only by
the alembic migrations in puma_nova/db/migrations (puma-manage db sync).
"""

import datetime

import sqlalchemy as sa
from sqlalchemy import orm

# Ledger states.  An entry is born 'planned' (the scheduler reserved the
# memory), becomes 'running' when the migration starts, then 'done' (the
# server now runs split) or 'failed'; 'released' ends every path (delete,
# migrate away, rollback).  planned/running/done entries hold memory.
PLANNED = 'planned'
RUNNING = 'running'
DONE = 'done'
FAILED = 'failed'
RELEASED = 'released'
LEDGER_STATES = (PLANNED, RUNNING, DONE, FAILED, RELEASED)
ACTIVE_STATES = (PLANNED, RUNNING, DONE)
# Entries an operator or the plan expiry may release: no migration uses
# them (a planned one whose migration has not started, a failed one).
STALE_STATES = (PLANNED, FAILED)
LEDGER_TRANSITIONS = {
    PLANNED: (RUNNING, FAILED, RELEASED),
    RUNNING: (DONE, FAILED, RELEASED),
    DONE: (RELEASED,),
    FAILED: (RELEASED,),
    RELEASED: (),
}


def _now():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class Base(orm.DeclarativeBase):
    pass


class Host(Base):
    __tablename__ = 'hosts'

    name: orm.Mapped[str] = orm.mapped_column(sa.String(255),
                                              primary_key=True)
    address: orm.Mapped[str] = orm.mapped_column(sa.String(255), default='')
    memory_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    free_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    lendable_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    # Memory the host's page merging (KSM) saves.
    merged_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0,
                                                   server_default='0')
    # Host page cache that exclusive host/guest caching saves.
    cache_saved_mb: orm.Mapped[int] = orm.mapped_column(
        sa.Integer, default=0, server_default='0')
    shoot4u: orm.Mapped[bool] = orm.mapped_column(sa.Boolean, default=False)
    split: orm.Mapped[bool] = orm.mapped_column(sa.Boolean, default=False)
    updated_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        sa.DateTime, default=_now)

    vms: orm.Mapped[list['VMStats']] = orm.relationship(
        back_populates='host_ref', cascade='all, delete-orphan')


class VMStats(Base):
    __tablename__ = 'vm_stats'

    uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36),
                                              primary_key=True)
    host: orm.Mapped[str] = orm.mapped_column(
        sa.String(255), sa.ForeignKey('hosts.name', ondelete='CASCADE'),
        index=True)
    project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(255),
                                                           nullable=True)
    memory_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    rss_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    free_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer, default=0)
    cache_miss_rate: orm.Mapped[float] = orm.mapped_column(sa.Float,
                                                           default=0.0)
    refaults: orm.Mapped[int] = orm.mapped_column(sa.BigInteger, default=0)
    lendable: orm.Mapped[bool] = orm.mapped_column(sa.Boolean,
                                                   default=False)
    lending_grace: orm.Mapped[bool] = orm.mapped_column(
        sa.Boolean, default=False, server_default=sa.false())
    counters: orm.Mapped[dict | None] = orm.mapped_column(sa.JSON,
                                                          nullable=True)

    host_ref: orm.Mapped[Host] = orm.relationship(back_populates='vms')


class Pair(Base):
    __tablename__ = 'pairs'
    __table_args__ = (sa.UniqueConstraint('lender', 'borrower',
                                          name='uniq_pairs0lender0borrower'),)

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    lender: orm.Mapped[str] = orm.mapped_column(sa.String(36), index=True)
    borrower: orm.Mapped[str] = orm.mapped_column(sa.String(36),
                                                  index=True)
    lender_host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    borrower_host: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    capacity_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    key: orm.Mapped[str] = orm.mapped_column(sa.String(64))
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        sa.DateTime, default=_now)


class MemoryServer(Base):
    __tablename__ = 'memory_servers'

    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36),
                                                       primary_key=True)
    host: orm.Mapped[str] = orm.mapped_column(sa.String(255), index=True)
    size_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    uri: orm.Mapped[str | None] = orm.mapped_column(sa.String(255),
                                                    nullable=True)
    # 'reserved' (planned), 'active' (migration running or done),
    # 'stopped' (released).
    state: orm.Mapped[str] = orm.mapped_column(sa.String(16))
    updated_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        sa.DateTime, default=_now, onupdate=_now)


class LedgerEntry(Base):
    __tablename__ = 'ledger'

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    instance_uuid: orm.Mapped[str] = orm.mapped_column(sa.String(36),
                                                       index=True)
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    main_host: orm.Mapped[str] = orm.mapped_column(sa.String(255),
                                                   index=True)
    sub_host: orm.Mapped[str] = orm.mapped_column(sa.String(255),
                                                  index=True)
    # MiB lent by the sub host (borrowed by the main host).
    mb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    main_limit_mb: orm.Mapped[int] = orm.mapped_column(sa.Integer)
    state: orm.Mapped[str] = orm.mapped_column(sa.String(16), index=True)
    created_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        sa.DateTime, default=_now)
    updated_at: orm.Mapped[datetime.datetime] = orm.mapped_column(
        sa.DateTime, default=_now, onupdate=_now)
