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

"""Tempest plugin of Puma: API tests of puma-api (memory-pool)."""

import os

from tempest import config
from tempest.test_discover import plugins

from puma_tempest_plugin import config as puma_config


class PumaTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        base_path = os.path.split(os.path.dirname(
            os.path.abspath(__file__)))[0]
        test_dir = 'puma_tempest_plugin/tests'
        return os.path.join(base_path, test_dir), base_path

    def register_opts(self, conf):
        config.register_opt_group(conf, puma_config.service_available_group,
                                  puma_config.ServiceAvailableGroup)
        config.register_opt_group(conf, puma_config.memory_pool_group,
                                  puma_config.MemoryPoolGroup)

    def get_opt_lists(self):
        return [
            (puma_config.service_available_group.name,
             puma_config.ServiceAvailableGroup),
            (puma_config.memory_pool_group.name,
             puma_config.MemoryPoolGroup),
        ]

    def get_service_clients(self):
        params = config.service_client_config('memory_pool')
        params.update({
            'name': 'memory_pool',
            'service_version': 'memory_pool',
            'module_path': 'puma_tempest_plugin.services',
            'client_names': ['MemoryPoolClient'],
        })
        return [params]
