# SPDX-License-Identifier: Apache-2.0
"""The IBT rule of docs/puma.md, checked on the module's source.

Debian's 6.12 kernel seals the ENDBR of functions whose address is never
taken; calling one through a pointer is fatal on IBT hardware, which the
lab's TCG guests do not emulate.  So the rule is checked here: no kallsyms
lookups, and the only indirect calls are the address_space_operations
pointers and the filler the kernel passed to filemap_read_folio().
"""

import glob
import os
import re

from puma_lab import kmod

SOURCES = sorted(glob.glob(os.path.join(kmod.KMOD_SRC, 'puma', '*.[ch]')))
ALLOWED_MEMBER_CALLS = {'readahead', 'read_folio'}
ALLOWED_POINTER_CALLS = {'filler'}


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


def test_indirect_calls_are_ops_pointers_only():
    for path in SOURCES:
        code = _code(path)
        for name in re.findall(r'(?:->|\.)\s*(\w+)\s*\(', code):
            assert name in ALLOWED_MEMBER_CALLS, (path, name)
        # A function pointer we declare (our callbacks handed to the
        # kernel) must never be called by us.
        for name in re.findall(r'\(\s*\*\s*(\w+)\s*\)\s*\(', code):
            calls = re.findall(r'(?<![*\w])%s\s*\(' % name, code)
            assert not calls, (path, 'call through pointer', name)
        for name in re.findall(r'\bfiller_t\s+(\w+)', code):
            assert name in ALLOWED_POINTER_CALLS, (path, name)
