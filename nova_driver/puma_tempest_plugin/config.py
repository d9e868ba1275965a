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

"""tempest.conf options of the Puma plugin."""

from oslo_config import cfg

service_available_group = cfg.OptGroup(
    name='service_available', title='Available OpenStack Services')

ServiceAvailableGroup = [
    cfg.BoolOpt('puma', default=False,
                help='Whether puma-api (service type memory-pool) is '
                     'expected to be available'),
]

memory_pool_group = cfg.OptGroup(
    name='memory_pool', title='Puma memory pool (puma-api) options')

MemoryPoolGroup = [
    cfg.StrOpt('catalog_type', default='memory-pool',
               help='Catalog type of puma-api.'),
    cfg.StrOpt('endpoint_type', default='public',
               choices=['public', 'admin', 'internal', 'publicURL',
                        'adminURL', 'internalURL'],
               help='The endpoint type to use for puma-api.'),
    cfg.StrOpt('region', default='',
               help='The region of puma-api; empty means '
                    '[identity] region.'),
    cfg.StrOpt('min_microversion', default=None,
               help='Lowest puma-api microversion the tests may use.'),
    cfg.StrOpt('max_microversion', default='latest',
               help='Highest puma-api microversion the tests may use.'),
]
