# SPDX-License-Identifier: Apache-2.0
"""Benchmarks run by ``lab/bench NAME``, one module each."""
