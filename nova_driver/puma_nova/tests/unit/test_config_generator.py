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

"""The generator files of etc/ give every option our services read."""

import os

import fixtures
from oslo_config import cfg
from oslo_config import generator
import testtools

import puma_nova

ETC = os.path.join(os.path.dirname(puma_nova.__file__), os.pardir, 'etc')


def generate(name, out):
    conf = cfg.ConfigOpts()
    generator.register_cli_opts(conf)
    conf(['--config-file', os.path.join(ETC, name), '--output-file', out])
    generator.generate(conf)
    with open(out) as f:
        return f.read()


class TestConfigGenerator(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if not os.path.isdir(ETC):
            self.skipTest('no source tree')
        self.out = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'sample.conf')

    def test_puma_conf_has_every_service_group(self):
        # puma-scheduler, puma-api and puma-manage read /etc/puma/puma.conf.
        text = generate('puma-config-generator.conf', self.out)
        for group in ('DEFAULT', 'puma_scheduler', 'puma_api', 'nova',
                      'upgrade_levels', 'database', 'keystone_authtoken',
                      'oslo_messaging_rabbit', 'oslo_policy', 'cors'):
            self.assertIn('\n[%s]\n' % group, '\n' + text)
        for opt in ('planning_interval', 'plan_ttl',
                    'release_failed_migrations', 'transport_url',
                    'connection'):
            self.assertIn('#%s = ' % opt, text)

    def test_compute_sample_is_current(self):
        # etc/puma-compute.conf.sample: nova.conf's [puma], ours only.
        text = generate('puma-compute-config-generator.conf', self.out)
        with open(os.path.join(ETC, 'puma-compute.conf.sample')) as f:
            self.assertEqual(f.read(), text, 'run tox -e genconfig')

    def test_exporter_sample_is_current(self):
        # etc/puma-exporter.conf.sample: puma-exporter's [puma_exporter].
        text = generate('puma-exporter-config-generator.conf', self.out)
        self.assertIn('\n[puma_exporter]\n', text)
        with open(os.path.join(ETC, 'puma-exporter.conf.sample')) as f:
            self.assertEqual(f.read(), text, 'run tox -e genconfig')
