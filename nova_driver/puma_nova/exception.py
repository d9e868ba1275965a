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
"""Exceptions of the Puma services; messages are whole sentences."""


class PumaException(Exception):
    """Base class; CODE is the HTTP status puma-api answers with."""

    code = 500


class Invalid(PumaException):
    code = 400


class Forbidden(PumaException):
    code = 403


class NotFound(PumaException):
    code = 404


class Conflict(PumaException):
    code = 409


class TooLarge(PumaException):
    code = 413


class InvalidStats(Invalid):
    """A report_host call carried statistics we cannot store."""


class InvalidTransition(Conflict):
    """A ledger entry cannot go from its state to the requested one."""


class LedgerNotFound(NotFound):
    pass


class ServerNotFound(NotFound):
    pass


class NovaError(PumaException):
    """Nova refused or failed a request on our behalf."""

    code = 502


class SchedulerTooOld(PumaException):
    """The RPC version cap does not allow the call that was asked for."""


class InvalidPayload(Invalid):
    """An RPC message carried a versioned object this service refuses."""
