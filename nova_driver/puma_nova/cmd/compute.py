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

"""``puma-nova-compute``: nova-compute that can load the Puma driver.

Nova imports ``nova.virt.<compute_driver>``. A regular ``pip install``
of puma-nova ships the shim package ``nova.virt.puma``; an editable
install (devstack's ``pip install -e``) cannot place files inside Nova.
This command registers ``nova.virt.puma`` as an alias of the Puma driver
module, then runs Nova's own nova-compute entry point unchanged.
"""

import importlib
import importlib.abc
import importlib.util
import sys

ALIAS = 'nova.virt.puma'
TARGET = 'puma_nova.virt.driver'


class _AliasLoader(importlib.abc.Loader):

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        driver = importlib.import_module(TARGET)
        module.PumaLibvirtDriver = driver.PumaLibvirtDriver


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves the alias lazily, when Nova loads the driver.

    Importing the driver here would import nova.virt before
    nova.cmd.compute set the concurrency mode up.
    """

    def find_spec(self, fullname, path, target=None):
        if fullname != ALIAS:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader())


def register_alias():
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


def main():
    register_alias()
    from nova.cmd import compute
    return compute.main()


if __name__ == '__main__':
    sys.exit(main())
