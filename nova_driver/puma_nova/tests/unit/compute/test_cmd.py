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

import importlib
import sys

import testtools

from puma_nova.cmd import compute as cmd_compute


class AliasTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        saved_path = list(sys.meta_path)
        saved = sys.modules.pop(cmd_compute.ALIAS, None)

        def restore():
            sys.meta_path[:] = saved_path
            sys.modules.pop(cmd_compute.ALIAS, None)
            if saved is not None:
                sys.modules[cmd_compute.ALIAS] = saved
        self.addCleanup(restore)

    def test_alias_loads_the_driver(self):
        cmd_compute.register_alias()
        cmd_compute.register_alias()
        finders = [f for f in sys.meta_path
                   if isinstance(f, cmd_compute._AliasFinder)]
        self.assertEqual(1, len(finders))
        module = importlib.import_module(cmd_compute.ALIAS)
        from puma_nova.virt import driver
        self.assertIs(driver.PumaLibvirtDriver, module.PumaLibvirtDriver)

    def test_nova_loads_it(self):
        cmd_compute.register_alias()
        from nova.virt import driver as nova_driver
        from oslo_utils import importutils
        # What load_compute_driver imports for puma.PumaLibvirtDriver.
        cls = importutils.import_class('nova.virt.puma.PumaLibvirtDriver')
        from puma_nova.virt import driver
        self.assertIs(driver.PumaLibvirtDriver, cls)
        self.assertTrue(hasattr(nova_driver, 'load_compute_driver'))

    def test_other_names_untouched(self):
        finder = cmd_compute._AliasFinder()
        self.assertIsNone(finder.find_spec('nova.virt.libvirt', None))
