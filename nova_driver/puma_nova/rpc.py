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
"""oslo.messaging helpers shared by the Puma services.

Every Puma RPC server runs the 'threading' executor (no eventlet anywhere:
Nova 34 runs its services with native threads).  Arguments and results
are JSON-serialisable primitives or Puma's versioned objects
(puma_nova.objects), which travel as their versioned primitives.  The
request context travels as the oslo.context dictionary and comes back as
a puma_nova.context.RequestContext.

Topics, each with exactly one client class in the rpcapi module next to
the service that serves it:
    puma-scheduler serves 'puma-scheduler' (puma_nova.scheduler.rpcapi),
    nova-compute serves 'puma-compute', one server per Nova host
    (puma_nova.compute.rpcapi).

Inside nova-compute the transport is Nova's own (nova.rpc.TRANSPORT): no
second connection to configure.  Elsewhere it is [DEFAULT] transport_url.
Targets are only built here (get_client, get_server).
"""

import oslo_messaging as messaging
from oslo_serialization import jsonutils
from oslo_versionedobjects import exception as ovo_exception

from puma_nova import context as puma_context
from puma_nova import exception
from puma_nova import objects
from puma_nova.objects import base as objects_base

EXECUTOR = 'threading'
SCHEDULER_TOPIC = 'puma-scheduler'
COMPUTE_TOPIC = 'puma-compute'
# Nova's services default [DEFAULT] control_exchange to 'nova'
# (nova.config.parse_args), and the Puma driver in nova-compute talks
# through Nova's transport: Puma's own services default to the same
# exchange, or their topics and nova-compute's never meet.
CONTROL_EXCHANGE = 'nova'

_TRANSPORTS = {}


class ContextSerializer(objects_base.PumaObjectSerializer):
    """Contexts as oslo.context dicts; Puma's objects as versioned objects.

    Everything else travels as primitives.  A versioned primitive that
    does not make a valid object (a bad field, an unknown object, a newer
    version than this service knows) is refused with InvalidPayload
    before any endpoint sees it.
    """

    def serialize_entity(self, ctxt, entity):
        entity = super().serialize_entity(ctxt, entity)
        return jsonutils.to_primitive(entity, convert_instances=True)

    def deserialize_entity(self, ctxt, entity):
        try:
            return super().deserialize_entity(ctxt, entity)
        except (ovo_exception.VersionedObjectsException, ValueError,
                KeyError, TypeError) as e:
            raise exception.InvalidPayload(
                'refused a versioned object: %s' % e)

    def serialize_context(self, ctxt):
        return ctxt.to_dict()

    def deserialize_context(self, ctxt):
        return puma_context.RequestContext.from_dict(ctxt)


def get_serializer():
    objects.register_all()
    return ContextSerializer()


def set_defaults():
    """Before parsing a Puma service's configuration: Nova's exchange."""
    messaging.set_transport_defaults(control_exchange=CONTROL_EXCHANGE)


def get_transport(conf, url=None):
    """The RPC transport for URL (default: CONF.transport_url), cached."""
    transport = _TRANSPORTS.get(url)
    if transport is None:
        transport = messaging.get_rpc_transport(conf, url=url)
        _TRANSPORTS[url] = transport
    return transport


def cleanup():
    """Close the cached transports (service shutdown, test teardown)."""
    while _TRANSPORTS:
        _TRANSPORTS.popitem()[1].cleanup()


def get_client(transport, topic, version, version_cap=None, timeout=None):
    """An RPC client of TOPIC at VERSION with the Puma serializer.

    The caller picks the server (if any) and the version of each call with
    ``prepare()``.
    """
    target = messaging.Target(topic=topic, version=version)
    return messaging.get_rpc_client(transport, target,
                                    version_cap=version_cap,
                                    serializer=get_serializer(),
                                    timeout=timeout)


def get_server(transport, topic, server, endpoints):
    """An RPC server of TOPIC for SERVER running ENDPOINTS on native threads.

    Each endpoint declares the API version it serves in its own
    ``target``.  Only the endpoints' public methods are exposed (no '_'
    names).
    """
    target = messaging.Target(topic=topic, server=server)
    return messaging.get_rpc_server(
        transport, target, endpoints, executor=EXECUTOR,
        serializer=get_serializer(),
        access_policy=messaging.DefaultRPCAccessPolicy)
