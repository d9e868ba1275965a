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
"""Options of puma-scheduler ([puma_scheduler]) and puma-api ([puma_api]).

The database is oslo.db's own [database] group (connection = any
SQLAlchemy URL); RPC uses oslo.messaging's [DEFAULT] transport_url.
"""

import socket

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_db import options as db_options
from oslo_middleware import cors

from puma_nova.conf import upgrade_levels

scheduler_group = cfg.OptGroup(
    'puma_scheduler', title='Puma datacenter scheduler',
    help='The puma-scheduler service: statistics, lending pairs and '
         'split-migration plans.')

scheduler_opts = [
    cfg.StrOpt('host', default=socket.gethostname(),
               sample_default='<hostname>',
               help='Name of this puma-scheduler on the message bus.'),
    cfg.IntOpt('planning_interval', default=30, min=1, mutable=True,
               help='Seconds between two lending-pair planning rounds '
                    '(re-read on SIGHUP).'),
    cfg.IntOpt('host_timeout', default=180, min=1,
               help='Seconds after its last report_host call after which a '
                    'host (and its VMs) no longer takes part in planning.'),
    cfg.IntOpt('min_lend_mb', default=256, min=0,
               help='MiB an idle VM must still have free to lend.'),
    cfg.IntOpt('max_per_borrower_mb', default=0, min=0,
               help='MiB one borrower may receive per round (0: no cap).'),
    cfg.FloatOpt('miss_rate_threshold', default=0.05, min=0.0, max=1.0,
                 help='A non-idle VM whose page-cache miss rate reaches '
                      'this fraction is a borrower; its demand is its '
                      'refaulted pages (4 KiB each) in MiB.'),
    cfg.IntOpt('reserve_mb', default=512, min=0,
               help='MiB every host keeps for itself when planning a '
                    'split migration.'),
    cfg.FloatOpt('min_resident_ratio', default=0.25, min=0.0, max=1.0,
                 help='Refuse a split migration that keeps less than this '
                      'fraction of the server resident on its main host.'),
    cfg.DictOpt('host_racks', default={},
                help='host:rack pairs.  Hosts in the same rack are close '
                     '(low RTT); a host not listed is its own rack.'),
    cfg.IntOpt('rpc_timeout', default=30, min=1,
               help='Seconds the scheduler waits for a compute host to '
                    'accept a pair assignment.'),
    cfg.IntOpt('plan_ttl', default=900, min=1,
               help='Seconds a split migration may stay planned.  A plan '
                    'whose live migration has not started by then (Nova '
                    'refused or failed it before the destination took '
                    'it: no valid host, a failed precheck, ...) is '
                    'released by the scheduler\'s periodic task, as are '
                    'failed splits left unreleased that long (sooner '
                    'when Nova\'s migration record shows the migration '
                    'failed: release_failed_migrations).  It must '
                    'exceed the longest time from a plan to the start of '
                    'its migration.'),
    cfg.BoolOpt('release_failed_migrations', default=True,
                help='At each periodic run, release the planned and '
                     'failed split migrations whose live migration Nova '
                     'ended in failure (its migration record, created '
                     'or changed since the plan, is error, failed or '
                     'cancelled, and no live migration of the server is '
                     'in progress), instead of waiting for plan_ttl.  '
                     'It reads Nova\'s os-migrations (microversion '
                     '2.59) with the [nova] credentials, which need '
                     'Nova\'s os-migrations:index and '
                     'index:all_projects policies (admin by default).  '
                     'While Nova cannot be read, plan_ttl alone '
                     'applies.'),
    cfg.BoolOpt('placement_lending', default=True,
                help='Write what a split migration lends to its sub '
                     'host\'s MEMORY_MB reserved in placement when the '
                     'split is planned, and give it back when the split '
                     'is released (generation-checked, with the '
                     '[placement] credentials), so that Nova never places '
                     'an instance on memory a memory server is about to '
                     'fill.  A sub host placement has no room on makes '
                     'the plan fail.  Turned off, only the sub host\'s '
                     'nova-compute applies the ledger, at its next '
                     'periodic update.'),
]

api_group = cfg.OptGroup(
    'puma_api', title='Puma REST API',
    help='The puma-api WSGI application.')

api_opts = [
    cfg.HostAddressOpt('host', default='127.0.0.1',
                       help='Address puma-api listens on when run as a '
                            'standalone server.'),
    cfg.PortOpt('port', default=9891,
                help='Port puma-api listens on when run standalone.'),
    cfg.StrOpt('auth_strategy', default='keystone',
               choices=[('keystone', 'keystonemiddleware auth_token '
                                     'validates every request'),
                        ('noauth', 'no authentication: tests and '
                                   'development only')],
               help='How requests are authenticated.'),
    cfg.StrOpt('admin_role', default='admin',
               deprecated_for_removal=True,
               deprecated_reason='puma-api is authorized by oslo.policy '
                                 '(rules puma:*, policy in code); set a '
                                 'rule in the [oslo_policy] policy_file '
                                 'instead.',
               help='Ignored.  It was the role a token needed to use the '
                    'API; the context_is_admin rule (default role:admin) '
                    'and the puma:* rules now decide.'),
    cfg.IntOpt('max_limit', default=1000, min=1,
               help='Most items one list request returns.'),
]

# Credentials puma-scheduler uses to write to placement.
placement_group = cfg.OptGroup(
    'placement', title='Placement client of puma-scheduler',
    help='Session, auth and adapter options (keystoneauth1) of the '
         'placement service, as in Nova\'s own [placement] group.')

# Credentials puma-api uses to ask Nova for live migrations, and
# puma-scheduler to read Nova's migration records.
nova_group = cfg.OptGroup(
    'nova', title='Nova client of puma-api and puma-scheduler',
    help='Session and auth options (keystoneauth1) of the Nova compute '
         'API: puma-api asks it for live migrations, puma-scheduler '
         'reads its migration records ([puma_scheduler] '
         'release_failed_migrations).  Set the session\'s timeout: '
         'puma-scheduler reads Nova from its periodic task.')
nova_opts = [
    cfg.StrOpt('region_name', help='Region of the Nova endpoint.'),
    cfg.StrOpt('endpoint_type', default='public',
               help='Interface of the Nova endpoint.'),
]


def _register_placement_opts(conf):
    if (placement_group.name in conf and
            'service_type' in conf[placement_group.name]):
        # Registered by Nova, whose options are the same keystoneauth1
        # ones (a process that loads both, as the tests do).
        return
    conf.register_group(placement_group)
    ks_loading.register_session_conf_options(conf, placement_group.name)
    ks_loading.register_auth_conf_options(conf, placement_group.name)
    ks_loading.register_adapter_conf_options(conf, placement_group.name,
                                             include_deprecated=False)
    conf.set_default('service_type', 'placement',
                     group=placement_group.name)
    conf.set_default('valid_interfaces', ['internal', 'public'],
                     group=placement_group.name)


def register_opts(conf):
    conf.register_group(scheduler_group)
    conf.register_opts(scheduler_opts, group=scheduler_group)
    conf.register_group(api_group)
    conf.register_opts(api_opts, group=api_group)
    conf.register_group(nova_group)
    conf.register_opts(nova_opts, group=nova_group)
    ks_loading.register_session_conf_options(conf, nova_group.name)
    ks_loading.register_auth_conf_options(conf, nova_group.name)
    _register_placement_opts(conf)
    db_options.set_defaults(conf, connection='sqlite:///puma.sqlite')
    # puma-api's CORS middleware reads [cors] (oslo.middleware).
    conf.register_opts(cors.CORS_OPTS, group='cors')


def list_opts():
    return [
        (scheduler_group, scheduler_opts),
        (api_group, api_opts),
        (nova_group, nova_opts +
         ks_loading.get_session_conf_options() +
         ks_loading.get_auth_common_conf_options()),
        (placement_group,
         ks_loading.get_session_conf_options() +
         ks_loading.get_auth_common_conf_options() +
         ks_loading.get_adapter_conf_options(include_deprecated=False)),
    ] + upgrade_levels.list_opts()
