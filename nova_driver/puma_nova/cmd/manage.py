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
"""puma-manage: administration of the Puma database.

    puma-manage db sync [--revision REV]   upgrade the schema (default head)
    puma-manage db version                 print the schema revision
    puma-manage ledger list-stale          ledger entries planned or failed
                                           for longer than plan_ttl
    puma-manage ledger expire              release them now, as the
                                           scheduler's periodic task does
"""

# Before anything imports oslo.messaging or oslo.service.
from puma_nova import threads
threads.use_native_threads()

import sys  # noqa: E402

from oslo_config import cfg  # noqa: E402

from puma_nova.compute import rpcapi as compute_rpcapi  # noqa: E402
from puma_nova.conf import scheduler as sched_conf  # noqa: E402
from puma_nova import context  # noqa: E402
from puma_nova.db import api as db_api  # noqa: E402
from puma_nova.db import migration  # noqa: E402
from puma_nova import rpc  # noqa: E402
from puma_nova.scheduler import manager  # noqa: E402
from puma_nova.scheduler import placement  # noqa: E402

CONF = cfg.CONF


def _db_sync():
    migration.upgrade(CONF.command.revision)
    print(migration.version())


def _db_version():
    print(migration.version() or 'none')


_COLUMNS = ('id', 'instance_uuid', 'main_host', 'sub_host', 'mb', 'state')


def _print_entries(entries):
    print(' '.join(_COLUMNS))
    for e in entries:
        print(' '.join(str(e[c]) for c in _COLUMNS))


def _ledger_list_stale():
    _print_entries(db_api.ledger_stale(
        context.get_admin_context(),
        db_api.since(CONF.puma_scheduler.plan_ttl)))


def _ledger_expire():
    # The scheduler's own release (a conditional UPDATE per entry, so a
    # migration that starts meanwhile keeps its split); memory servers
    # are stopped over [DEFAULT] transport_url, and what they lent is
    # given back in placement ([placement]).
    compute = compute_rpcapi.ComputeAPI(
        rpc.get_transport(CONF), timeout=CONF.puma_scheduler.rpc_timeout)
    try:
        released = manager.SchedulerManager(
            compute, placement=placement.from_conf()).expire_plans(
                context.get_admin_context())
    finally:
        rpc.cleanup()
    _print_entries(released)


def _add_parsers(subparsers):
    db = subparsers.add_parser('db', help='database schema')
    actions = db.add_subparsers(dest='action')
    actions.required = True
    sync = actions.add_parser('sync', help='upgrade the schema')
    sync.add_argument('--revision', default='head',
                      help='revision to upgrade to (default: head)')
    sync.set_defaults(func=_db_sync)
    version = actions.add_parser('version', help='print the revision')
    version.set_defaults(func=_db_version)
    ledger = subparsers.add_parser('ledger', help='split-migration ledger')
    actions = ledger.add_subparsers(dest='action')
    actions.required = True
    stale = actions.add_parser(
        'list-stale', help='entries planned or failed for longer than '
                           '[puma_scheduler] plan_ttl')
    stale.set_defaults(func=_ledger_list_stale)
    expire = actions.add_parser(
        'expire', help='release those entries and stop their memory '
                       'servers now')
    expire.set_defaults(func=_ledger_expire)


def main(argv=None):
    sched_conf.register_opts(CONF)
    CONF.register_cli_opt(cfg.SubCommandOpt('command', handler=_add_parsers,
                                            title='commands'))
    rpc.set_defaults()
    CONF(sys.argv[1:] if argv is None else argv, project='puma',
         prog='puma-manage')
    CONF.command.func()
    return 0


if __name__ == '__main__':
    sys.exit(main())
