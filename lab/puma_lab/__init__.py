# SPDX-License-Identifier: Apache-2.0
"""Puma lab: guests under QEMU TCG and emulated hosts in network namespaces."""
