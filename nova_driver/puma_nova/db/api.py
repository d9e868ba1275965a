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
"""Database API of the Puma services (oslo.db enginefacade).

Every function takes a puma_nova.context.RequestContext first and returns
plain dictionaries, never ORM objects.  The connection is oslo.db's
[database] connection unless configure() was given one (tests).
"""

import datetime
import threading

from oslo_db.sqlalchemy import enginefacade
import sqlalchemy as sa

from puma_nova.db import models
from puma_nova import exception

_LOCK = threading.Lock()
_CTX = None


def configure(connection=None):
    """Use a new transaction context (on CONNECTION if given)."""
    global _CTX
    with _LOCK:
        ctx = enginefacade.transaction_context()
        opts = {'sqlite_fk': True}
        if connection:
            opts['connection'] = connection
        ctx.configure(**opts)
        _CTX = ctx


def _context():
    if _CTX is None:
        configure()
    return _CTX


def get_engine():
    return _context().writer.get_engine()


class PlanGuard(object):
    """The planning lock: one planner at a time, across schedulers.

    ``with guard:`` holds a thread lock, and on MariaDB/MySQL a named lock
    (GET_LOCK) or on PostgreSQL an advisory lock of the database, on a
    connection kept for the duration: several puma-scheduler processes
    sharing the database read the commitments, plan and write the ledger
    one after the other.  SQLite serves one host only: there the thread
    lock is all (run one puma-scheduler).

    :param timeout: seconds to wait for another scheduler's lock.
    """

    def __init__(self, timeout=60):
        self.timeout = timeout
        self._local = threading.Lock()
        self._conn = None

    def _name(self, engine):
        return 'puma-plan-%s' % (engine.url.database or '')

    def __enter__(self):
        self._local.acquire()
        try:
            engine = get_engine()
            dialect = engine.dialect.name
            if dialect in ('mysql', 'postgresql'):
                conn = engine.connect()
                try:
                    if dialect == 'mysql':
                        got = conn.execute(
                            sa.text('SELECT GET_LOCK(:n, :t)'),
                            {'n': self._name(engine),
                             't': self.timeout}).scalar()
                    else:
                        conn.execute(sa.text(
                            'SELECT pg_advisory_lock(hashtext(:n))'),
                            {'n': self._name(engine)})
                        got = 1
                    if got != 1:
                        raise exception.PumaException(
                            'another puma-scheduler held the planning lock '
                            'for %d s' % self.timeout)
                except BaseException:
                    conn.close()
                    raise
                self._conn = conn
        except BaseException:
            self._local.release()
            raise
        return self

    def __exit__(self, *exc):
        conn, self._conn = self._conn, None
        try:
            if conn is not None:
                engine = conn.engine
                if engine.dialect.name == 'mysql':
                    conn.execute(sa.text('SELECT RELEASE_LOCK(:n)'),
                                 {'n': self._name(engine)})
                else:
                    conn.execute(sa.text(
                        'SELECT pg_advisory_unlock(hashtext(:n))'),
                        {'n': self._name(engine)})
                conn.close()
        finally:
            self._local.release()


def _as_dict(row):
    return {c.key: getattr(row, c.key) for c in sa.inspect(row).mapper
            .column_attrs}


# Hosts and VM statistics.

def host_report(ctxt, name, stats, now=None):
    """Replace what we know of host NAME and its VMs with STATS.

    VMs the host no longer reports are forgotten; a VM reported by a new
    host moves there.  STATS was validated by the caller.
    """
    now = now or models._now()
    with _context().writer.using(ctxt) as session:
        host = session.get(models.Host, name)
        if host is None:
            host = models.Host(name=name)
            session.add(host)
        for key in ('address', 'memory_mb', 'free_mb', 'lendable_mb',
                    'shoot4u', 'split'):
            setattr(host, key, stats[key])
        # Not in the reports of computes older than the field.
        host.merged_mb = stats.get('merged_mb', 0)
        host.cache_saved_mb = stats.get('cache_saved_mb', 0)
        host.updated_at = now
        session.flush()
        reported = {vm['uuid']: vm for vm in stats['vms']}
        session.execute(sa.delete(models.VMStats).where(
            models.VMStats.host == name,
            models.VMStats.uuid.not_in(list(reported))))
        for uuid, vm in reported.items():
            row = session.get(models.VMStats, uuid)
            if row is None:
                row = models.VMStats(uuid=uuid)
                session.add(row)
            row.host = name
            row.project_id = vm['project_id']
            row.memory_mb = vm['memory_mb']
            row.rss_mb = vm['rss_mb']
            row.free_mb = vm['free_mb']
            row.cache_miss_rate = vm['cache_miss_rate']
            row.refaults = vm['refaults']
            row.lendable = vm['lendable']
            # Not in the reports of computes older than the field.
            row.lending_grace = vm.get('lending_grace', False)
            row.counters = vm['puma']


def host_list(ctxt, updated_since=None):
    """Hosts (optionally only those reported since UPDATED_SINCE)."""
    with _context().reader.using(ctxt) as session:
        q = sa.select(models.Host).order_by(models.Host.name)
        if updated_since is not None:
            q = q.where(models.Host.updated_at >= updated_since)
        return [_as_dict(h) for h in session.scalars(q)]


def vm_list(ctxt, hosts=None):
    """VM statistics, optionally only of the hosts named in HOSTS."""
    with _context().reader.using(ctxt) as session:
        q = sa.select(models.VMStats).order_by(models.VMStats.uuid)
        if hosts is not None:
            q = q.where(models.VMStats.host.in_(list(hosts)))
        return [_as_dict(v) for v in session.scalars(q)]


# Lending pairs.

def pair_list(ctxt):
    with _context().reader.using(ctxt) as session:
        q = sa.select(models.Pair).order_by(models.Pair.id)
        return [_as_dict(p) for p in session.scalars(q)]


def pair_update(ctxt, revoke, new):
    """Delete the pairs (lender, borrower) in REVOKE and add NEW (dicts)."""
    with _context().writer.using(ctxt) as session:
        for lender, borrower in revoke:
            session.execute(sa.delete(models.Pair).where(
                models.Pair.lender == lender,
                models.Pair.borrower == borrower))
        for values in new:
            session.add(models.Pair(**values))


# Memory servers.

def memory_server_set(ctxt, instance_uuid, **values):
    """Create or update the memory server record of a server."""
    with _context().writer.using(ctxt) as session:
        row = session.get(models.MemoryServer, instance_uuid)
        if row is None:
            row = models.MemoryServer(instance_uuid=instance_uuid)
            session.add(row)
        for key, value in values.items():
            setattr(row, key, value)


def memory_server_list(ctxt, host=None):
    with _context().reader.using(ctxt) as session:
        q = sa.select(models.MemoryServer).order_by(
            models.MemoryServer.host, models.MemoryServer.instance_uuid)
        if host is not None:
            q = q.where(models.MemoryServer.host == host)
        return [_as_dict(m) for m in session.scalars(q)]


# Ledger.

def ledger_create(ctxt, instance_uuid, project_id, main_host, sub_host, mb,
                  main_limit_mb):
    """A new 'planned' ledger entry."""
    with _context().writer.using(ctxt) as session:
        row = models.LedgerEntry(
            instance_uuid=instance_uuid, project_id=project_id,
            main_host=main_host, sub_host=sub_host, mb=mb,
            main_limit_mb=main_limit_mb, state=models.PLANNED)
        session.add(row)
        session.flush()
        return _as_dict(row)


def ledger_list(ctxt, host=None, instance_uuid=None, active_only=False,
                project_id=None):
    """Ledger entries, oldest first.

    :param host: only entries where HOST is the main or the sub host.
    :param project_id: only the entries of servers of PROJECT_ID.
    :param active_only: only entries that hold memory (planned, running,
        done).
    """
    with _context().reader.using(ctxt) as session:
        q = sa.select(models.LedgerEntry).order_by(models.LedgerEntry.id)
        if host is not None:
            q = q.where(sa.or_(models.LedgerEntry.main_host == host,
                               models.LedgerEntry.sub_host == host))
        if instance_uuid is not None:
            q = q.where(models.LedgerEntry.instance_uuid == instance_uuid)
        if active_only:
            q = q.where(models.LedgerEntry.state.in_(models.ACTIVE_STATES))
        if project_id is not None:
            q = q.where(models.LedgerEntry.project_id == project_id)
        return [_as_dict(e) for e in session.scalars(q)]


def _current_entry(session, instance_uuid):
    q = (sa.select(models.LedgerEntry)
         .where(models.LedgerEntry.instance_uuid == instance_uuid,
                models.LedgerEntry.state != models.RELEASED)
         .order_by(models.LedgerEntry.id.desc()).limit(1))
    return session.scalars(q).first()


def ledger_set_state(ctxt, instance_uuid, state):
    """Move the newest unreleased entry of a server to STATE.

    Setting the state an entry already has does nothing (RPC retries).

    :raises LedgerNotFound: the server has no unreleased entry.
    :raises InvalidTransition: the state machine forbids the move.
    """
    if state not in models.LEDGER_STATES:
        raise exception.Invalid('unknown ledger state %r (one of %s)' %
                                (state, ', '.join(models.LEDGER_STATES)))
    with _context().writer.using(ctxt) as session:
        row = _current_entry(session, instance_uuid)
        if row is None:
            raise exception.LedgerNotFound(
                'server %s has no split migration in the ledger' %
                instance_uuid)
        if row.state != state:
            if state not in models.LEDGER_TRANSITIONS[row.state]:
                raise exception.InvalidTransition(
                    'the split migration of server %s is %s and cannot '
                    'become %s' % (instance_uuid, row.state, state))
            row.state = state
        return _as_dict(row)


def ledger_get(ctxt, entry_id):
    """One ledger entry.

    :raises LedgerNotFound: no entry has this id.
    """
    with _context().reader.using(ctxt) as session:
        row = session.get(models.LedgerEntry, entry_id)
        if row is None:
            raise exception.LedgerNotFound('no ledger entry %s' % entry_id)
        return _as_dict(row)


def ledger_stale(ctxt, updated_before):
    """Planned and failed entries last changed before UPDATED_BEFORE.

    A planned entry that old belongs to a migration that never started;
    a failed one to a rollback that never released it.
    """
    with _context().reader.using(ctxt) as session:
        q = (sa.select(models.LedgerEntry)
             .where(models.LedgerEntry.state.in_(models.STALE_STATES),
                    models.LedgerEntry.updated_at < updated_before)
             .order_by(models.LedgerEntry.id))
        return [_as_dict(e) for e in session.scalars(q)]


def ledger_release(ctxt, instance_uuid, before_id=None, main_host=None,
                   entry_id=None, states=None):
    """Release unreleased entries of a server; return how many.

    :param before_id: only entries older than this one (a server that
        finished moving again gives back its previous split).
    :param main_host: only entries whose main host this is (a move that
        rolls back gives back what it reserved, not the split the server
        still runs with).
    :param entry_id: only this entry.
    :param states: only entries in one of these states, checked in the
        same UPDATE (an entry that just became running is left alone).
    """
    with _context().writer.using(ctxt) as session:
        q = (sa.update(models.LedgerEntry)
             .where(models.LedgerEntry.instance_uuid == instance_uuid,
                    models.LedgerEntry.state != models.RELEASED))
        if before_id is not None:
            q = q.where(models.LedgerEntry.id < before_id)
        if main_host is not None:
            q = q.where(models.LedgerEntry.main_host == main_host)
        if entry_id is not None:
            q = q.where(models.LedgerEntry.id == entry_id)
        if states is not None:
            q = q.where(models.LedgerEntry.state.in_(list(states)))
        result = session.execute(q.values(state=models.RELEASED,
                                          updated_at=models._now()))
        return result.rowcount


def ledger_commitments(ctxt):
    """MiB promised but not yet visible in host reports, per host.

    {host: mb}: a planned or running split takes its remote part from its
    sub host and its resident part from its main host.
    """
    usage = {}
    for e in ledger_list(ctxt, active_only=True):
        if e['state'] in (models.PLANNED, models.RUNNING):
            usage[e['sub_host']] = usage.get(e['sub_host'], 0) + e['mb']
            usage[e['main_host']] = (usage.get(e['main_host'], 0) +
                                     e['main_limit_mb'])
    return usage


def utcnow():
    return models._now()


def since(seconds):
    return utcnow() - datetime.timedelta(seconds=seconds)
