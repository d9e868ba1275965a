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
"""

# Before anything imports oslo.messaging or oslo.service.
from puma_nova import threads
threads.use_native_threads()

import sys  # noqa: E402

from oslo_config import cfg  # noqa: E402

from puma_nova.conf import scheduler as sched_conf  # noqa: E402
from puma_nova.db import migration  # noqa: E402

CONF = cfg.CONF


def _db_sync():
    migration.upgrade(CONF.command.revision)
    print(migration.version())


def _db_version():
    print(migration.version() or 'none')


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


def main(argv=None):
    sched_conf.register_opts(CONF)
    CONF.register_cli_opt(cfg.SubCommandOpt('command', handler=_add_parsers,
                                            title='commands'))
    CONF(sys.argv[1:] if argv is None else argv, project='puma',
         prog='puma-manage')
    CONF.command.func()
    return 0
