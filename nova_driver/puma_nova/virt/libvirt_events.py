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
"""Handle libvirt's lifecycle events off libvirt's event loop.

Nova 34 on native threads (checked against nova 34.0.0,
nova/virt/libvirt/host.py, ``_ThreadingLibvirtEventHandler._queue_event``)
runs the lifecycle handler on the thread that runs libvirt's event loop:
the compute manager's power-state sync, with its conductor RPC calls,
runs where libvirt also sends and answers its keepalives.  While RabbitMQ
restarts such a call waits up to ``rpc_response_timeout`` (60 s), no
keepalive goes out, and libvirtd closes the connection (seen in the lab
cloud on 2026-12-01; docs/nova-compute.md).  With eventlet, Nova queued
the events to a green thread of their own.

``dispatch_lifecycle_events`` gives the host's event handler a queue and
one thread that drains it: events are handled in the order libvirt sent
them, as before, and the event loop only puts them on the queue.
"""

import queue
import threading

from nova.virt.libvirt import host as nova_host
from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class QueuedHandler:
    """Calls HANDLER with each event, in order, on a thread of its own.

    The thread starts with the first event (a driver that never sees one
    starts none) and is a daemon, as Nova's own event thread is.
    """

    def __init__(self, handler, name='puma-libvirt-events'):
        self.handler = handler
        self._name = name
        self._queue = queue.SimpleQueue()
        self._thread = None
        self._lock = threading.Lock()

    def __call__(self, event):
        self._queue.put(event)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def _run(self):
        while True:
            event = self._queue.get()
            try:
                self.handler(event)
            except Exception:
                # Raised into libvirt's callback, it was printed and lost.
                LOG.exception('Puma: libvirt event %s was not handled',
                              event)


def dispatch_lifecycle_events(host):
    """Move HOST's lifecycle event handling off libvirt's event loop.

    HOST is a nova.virt.libvirt.host.Host whose events have not started.
    Only native threading needs it: eventlet's handler queues already.
    """
    handler = host._event_handler
    if not isinstance(handler, nova_host._ThreadingLibvirtEventHandler):
        return False
    if not isinstance(handler._lifecycle_event_handler, QueuedHandler):
        handler._lifecycle_event_handler = QueuedHandler(
            handler._lifecycle_event_handler)
    return True
