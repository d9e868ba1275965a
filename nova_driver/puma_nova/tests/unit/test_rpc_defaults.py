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
"""Puma's services and nova-compute meet on one exchange."""

from unittest import mock

from oslo_config import cfg
import oslo_messaging as messaging
import testtools

from puma_nova.api import app
from puma_nova.cmd import manage
from puma_nova.cmd import scheduler
from puma_nova import rpc


class TestControlExchange(testtools.TestCase):

    def test_default_is_novas(self):
        # nova.config.parse_args sets 'nova' for Nova's own services.
        self.assertEqual('nova', rpc.CONTROL_EXCHANGE)
        # Whatever the process had before (Nova's fixtures set theirs).
        before = [o.default for o in messaging.transport._transport_opts
                  if o.dest == 'control_exchange'][0]
        self.addCleanup(messaging.set_transport_defaults, before)
        rpc.set_defaults()
        conf = cfg.ConfigOpts()
        transport = messaging.get_rpc_transport(conf, url='fake:/')
        self.addCleanup(transport.cleanup)
        self.assertEqual('nova', conf.control_exchange)

    def test_each_service_sets_it_before_parsing(self):
        class Parsed(Exception):
            pass

        for mod, entry in ((scheduler, scheduler.main),
                           (app, app.init_application),
                           (manage, manage.main)):
            calls = []

            def parse(*args, **kwargs):
                calls.append('parse')
                raise Parsed()

            with mock.patch.object(mod, 'CONF', side_effect=parse), \
                    mock.patch.object(rpc, 'set_defaults',
                                      lambda: calls.append('defaults')), \
                    mock.patch.object(mod, 'logging', create=True), \
                    mock.patch.object(mod, 'sched_conf'):
                self.assertRaises(Parsed, entry, [])
            self.assertEqual(['defaults', 'parse'], calls, mod)
