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
"""Keep nova-compute alive when its libvirt connection is closed.

Nova 34 on native threads (checked against nova 34.0.0,
nova/virt/libvirt/host.py): ``Host._get_connection`` holds
``_wrapped_conn_lock`` (a ``threading.Lock``) while it tests the current
connection with ``getLibVersion()``.  When libvirtd has closed that
connection, libvirt-python runs the connection's close callback inside
that call, on the calling thread; in native threading mode Nova's event
handler dispatches it at once to ``Host._connection_closed``, which takes
``_wrapped_conn_lock`` again.  The thread waits for itself, and every
later libvirt call of the service waits for that thread: nova-compute
takes no build, migration or delete from then on and logs nothing.
(With eventlet the callback was queued to another green thread.)

Seen in the lab cloud on 2026-12-01: a RabbitMQ restart made a lifecycle
event's RPC call, run on libvirt's event loop thread, wait 60 s for its
reply; libvirtd's keepalive gave up on the connection meanwhile; the
next ``_get_connection`` (``live_migration_abort`` after the failed
migration monitor) deadlocked as above (py-spy: the thread in
``Host._connection_closed`` under ``_test_connection`` under
``_get_connection``, every other libvirt caller waiting in
``_get_connection``).

A reentrant lock lets the callback run: it clears the connection, the
test then fails, and ``_get_connection`` opens a new one, as it does for
a connection found broken without a callback.
"""

import threading


def reentrant_connection_lock(host):
    """Make HOST's (nova.virt.libvirt.host.Host) connection lock reentrant.

    Called before the driver opens its first connection.
    """
    host._wrapped_conn_lock = threading.RLock()
