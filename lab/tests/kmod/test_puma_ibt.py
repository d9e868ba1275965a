# SPDX-License-Identifier: Apache-2.0
"""The IBT rule of docs/puma.md, checked on the module's source.

Debian's 6.12 kernel seals the ENDBR of functions whose address is never
taken; calling one through a pointer is fatal on IBT hardware, which the
lab's TCG guests do not emulate.  So the rule is checked here: no kallsyms
lookups, and the only indirect calls are the address_space_operations
pointers, the filler the kernel passed to filemap_read_folio(), and the
module's own transport ops (struct puma_xport_ops, peer.h), called as
p->xops->NAME(): const tables of our functions, whose address is taken
in the table, so they keep their ENDBR (rule 4).
"""

import glob
import os
import re

from puma_lab import kmod

SOURCES = sorted(glob.glob(os.path.join(kmod.KMOD_SRC, 'puma', '*.[ch]')))
ALLOWED_MEMBER_CALLS = {'readahead', 'read_folio'}
ALLOWED_POINTER_CALLS = {'filler'}
XPORT_OPS = {'connect', 'send', 'recv', 'shutdown', 'release', 'error'}
XPORT_CALL = re.compile(r'->\s*xops\s*->\s*(\w+)\s*\(')


def _code(path):
    with open(path) as f:
        text = f.read()
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def test_sources_found():
    assert any(p.endswith('get.c') for p in SOURCES)


# kallsyms functions that find an address by name or walk the symbols:
# what a module would need to call an unexported function (rule 2).
# sprint_symbol(), which only names an address the module already has
# (readpath.c: the size of read_pages), is not one of them.
KALLSYMS_LOOKUPS = re.compile(r'\b(?:kallsyms_\w+|module_kallsyms_\w+|'
                              r'lookup_symbol_\w+|sprint_backtrace\w*)\b')


def test_no_kallsyms_lookups():
    for path in SOURCES:
        found = KALLSYMS_LOOKUPS.findall(_code(path))
        assert not found, (path, found)


def test_lookup_check_can_fail():
    assert KALLSYMS_LOOKUPS.findall('p = kallsyms_lookup_name("x");')
    assert KALLSYMS_LOOKUPS.findall('kallsyms_on_each_symbol(fn, NULL);')
    assert not KALLSYMS_LOOKUPS.findall('sprint_symbol(buf, addr);')


def _member_calls(code):
    """Names called through a member, but our transport ops'."""
    for name in XPORT_CALL.findall(code):
        assert name in XPORT_OPS, name
    code = XPORT_CALL.sub('(', code)
    return re.findall(r'(?:->|\.)\s*(\w+)\s*\(', code), code


def test_indirect_calls_are_ops_pointers_only():
    for path in SOURCES:
        names, code = _member_calls(_code(path))
        for name in names:
            assert name in ALLOWED_MEMBER_CALLS, (path, name)
        # A function pointer we declare (our callbacks handed to the
        # kernel) must never be called by us, but through p->xops.
        for name in re.findall(r'\(\s*\*\s*(\w+)\s*\)\s*\(', code):
            if name in XPORT_OPS:
                continue
            calls = re.findall(r'(?<![*\w])%s\s*\(' % name, code)
            assert not calls, (path, 'call through pointer', name)
        for name in re.findall(r'\bfiller_t\s+(\w+)', code):
            assert name in ALLOWED_POINTER_CALLS, (path, name)


def test_member_call_check_can_fail():
    # Only p->xops->NAME() of the transport ops is let through.
    names, _ = _member_calls('ret = p->xops->send(p, v, 1, n, false);')
    assert names == []
    names, _ = _member_calls('ret = p->ops->send(p); q.fn(1);')
    assert names == ['send', 'fn']
