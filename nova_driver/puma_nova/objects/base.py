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

"""Base class and registry of Puma's versioned objects."""

from oslo_versionedobjects import base as ovo_base


class PumaObjectRegistry(ovo_base.VersionedObjectRegistry):
    """Puma's objects, in a namespace of their own.

    Nova's objects live in the same oslo registry inside nova-compute:
    Puma's names start with 'Puma' and never replace one of Nova's.
    """


class PumaObject(ovo_base.VersionedObject):
    OBJ_PROJECT_NAMESPACE = 'puma'
    OBJ_SERIAL_NAMESPACE = 'puma_object'


class PumaObjectSerializer(ovo_base.VersionedObjectSerializer):
    OBJ_BASE_CLASS = PumaObject


def obj_classes():
    """{name: [classes]} of Puma's objects only.

    The oslo registry is one per process: in nova-compute it holds Nova's
    objects too.
    """
    return {name: classes for name, classes in
            PumaObjectRegistry.obj_classes().items()
            if classes[0].OBJ_PROJECT_NAMESPACE ==
            PumaObject.OBJ_PROJECT_NAMESPACE}
