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

"""Base class of puma-api's tempest tests."""

from tempest import config
import tempest.test

CONF = config.CONF


class BaseMemoryPoolTest(tempest.test.BaseTestCase):
    """puma-api with an admin and a member of another project."""

    credentials = ['admin', 'primary']

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.puma:
            raise cls.skipException('puma-api is not available')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.admin_client = cls.os_admin.memory_pool.MemoryPoolClient()
        cls.member_client = cls.os_primary.memory_pool.MemoryPoolClient()
