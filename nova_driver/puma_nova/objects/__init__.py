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

"""Versioned objects that cross Puma's RPC (oslo.versionedobjects).

Each object carries its version; a service that receives a newer one than
it knows refuses it with IncompatibleObjectVersion instead of reading
fields it does not understand.  Every change of fields or methods bumps
the object's version (tests/unit/objects/test_objects.py holds the
fingerprints, as Nova's test_objects.py does).
"""


def register_all():
    """Register (again) every Puma object; idempotent.

    Importing a module registers its objects once, but a registry can be
    reset after that (Nova's test cases restore the registry they saw at
    setUp): each RPC serializer registers the objects it may meet.
    """
    from puma_nova.objects import base
    from puma_nova.objects import host_report
    from puma_nova.objects import lending_pair
    for cls in host_report.OBJECTS + lending_pair.OBJECTS:
        base.PumaObjectRegistry.register(cls)
