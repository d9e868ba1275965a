# SPDX-License-Identifier: Apache-2.0
"""The one exception type lab code raises for a failed lab operation."""


class LabError(Exception):
    """A lab step failed; the message names what is wrong."""
