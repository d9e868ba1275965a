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
"""``[upgrade_levels]``: caps of the Puma RPC APIs, for rolling upgrades.

The same group as Nova's own (``[upgrade_levels] compute`` and others):
while services of the previous release still run, an operator caps what
the upgraded ones send, then removes the caps once every service is
upgraded.  Registered by the RPC client modules, in every process that
sends (nova-compute, puma-scheduler, puma-api).
"""

from oslo_config import cfg

GROUP = cfg.OptGroup('upgrade_levels', title='RPC API version caps')

_VERSION = r'^[0-9]+\.[0-9]+$'

OPTS = [
    cfg.StrOpt('puma_scheduler', regex=_VERSION,
               help='Newest version of the puma-scheduler RPC API to send '
                    '(e.g. 1.2 while a puma-scheduler of the previous '
                    'release runs). Unset: the newest this release knows.'),
    cfg.StrOpt('puma_compute', regex=_VERSION,
               help='Newest version of the Puma compute RPC API (topic '
                    'puma-compute) to send, while some compute hosts run '
                    'the previous release. Unset: the newest this release '
                    'knows.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return [(GROUP, OPTS)]
