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

"""puma-api's WSGI application finds its configuration as Nova's does."""

import os
from unittest import mock

import fixtures
import testtools

from puma_nova.api import wsgi


class TestConfigFile(testtools.TestCase):

    def test_config_dir_from_the_environment(self):
        d = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(d, 'puma.conf'), 'w') as f:
            f.write('[DEFAULT]\n')
        self.useFixture(fixtures.EnvironmentVariable('OS_PUMA_CONFIG_DIR',
                                                     d))
        self.assertEqual(['--config-file', os.path.join(d, 'puma.conf')],
                         wsgi.config_args())
        with mock.patch.object(wsgi.app, 'init_application') as init:
            wsgi.init_application()
        init.assert_called_once_with(
            ['--config-file', os.path.join(d, 'puma.conf')])

    def test_no_file_leaves_oslo_config_its_search(self):
        d = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable('OS_PUMA_CONFIG_DIR',
                                                     d))
        self.assertEqual([], wsgi.config_args())
