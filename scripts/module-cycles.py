#!/usr/bin/env python3
"""Module dependency cycles in Rust crates, from their `crate::`/`super::`/`self::` paths.

Usage: python3 scripts/module-cycles.py crates/shoal-store crates/shoal-server ...
Exits 1 and names the modules and the paths that form each cycle, if there is one.

Every .rs file under a crate's src/ is a module (foo.rs and foo/mod.rs are `foo`); the
files of binaries under src/bin/ are not checked. Each path a file names
(in `use` lines, grouped or not, and inline) is resolved to the deepest existing module,
following `pub use` re-exports to the module that defines the name. An edge a::x::.. ->
a::y::.. counts as x -> y among the children of a; edges between a module and its own
ancestors or descendants are not cycles. Cycles (strongly connected components of more
than one module) are reported per parent. Comments, and test modules at the end of a file
(`#[cfg(test)] mod tests`), are ignored. Paths through external crates, and methods of a
type implemented in another module, are not seen.
"""
import os, re, sys
from collections import defaultdict

def modules(src):
    mods = {}
    for root, dirs, files in os.walk(src):
        if root == src and 'bin' in dirs:
            dirs.remove('bin')
        for f in files:
            if not f.endswith('.rs'): continue
            p = os.path.join(root, f)
            rel = os.path.relpath(p, src)[:-3].split(os.sep)
            if rel[-1] in ('mod',): rel = rel[:-1]
            if rel in (['lib'], ['main']): rel = []
            mods[tuple(rel)] = p
    return mods

PATH = re.compile(r'\b((?:crate|super|self)(?:::\w+)+)')
USE_GROUP = re.compile(r'\buse\s+((?:crate|super|self)(?:::\w+)*)::\{([^;]*)\};', re.S)

def strip_tests(text):
    i = text.find('#[cfg(test)]\nmod tests')
    if i < 0: i = text.find('#[cfg(test)]\n    mod tests')
    text = text if i < 0 else text[:i]
    text = re.sub(r'//[^\n]*', '', text)  # comments, incl. doc links
    return text

REEXPORTS = {}  # module -> {name: path it re-exports}

def reexports(mods):
    """`pub use` lines of every module: the names they re-export and from where."""
    for mod, path in mods.items():
        text = strip_tests(open(path).read())
        names = {}
        for m in re.finditer(r'\bpub(?:\([^)]*\))?\s+use\s+([^;]+);', text):
            spec = re.sub(r'\s+', '', m.group(1))
            if '{' in spec:
                prefix, items = spec.split('{', 1)
                items = items.rstrip('}').split(',')
                prefix = prefix.rstrip(':')
            elif '::' in spec:
                prefix, item = spec.rsplit('::', 1)
                items = [item]
            else:
                prefix, items = '', [spec]
            for it in items:
                if not it:
                    continue
                name = it.split(' as ')[-1].split('::')[-1]
                src = it.split(' as ')[0]
                names[name] = (prefix + '::' + src) if prefix else src
        REEXPORTS[mod] = names

def resolve(mod, path, mods, depth=0):
    parts = path.split('::')
    if parts[0] == 'crate': base = []
    elif parts[0] == 'self': base = list(mod)
    else:
        base = list(mod)
        while parts and parts[0] == 'super':
            base = base[:-1]; parts = parts[1:]
        parts = ['x'] + parts
    target = base
    rest = parts[1:]
    for i, p in enumerate(rest):
        if tuple(target + [p]) in mods:
            target = target + [p]
            continue
        # A name the module re-exports from one of its children: the child is the target.
        src = REEXPORTS.get(tuple(target), {}).get(p)
        if src and depth < 5:
            first = src.split('::')[0]
            if first in ('crate', 'super', 'self'):
                return resolve(tuple(target), src, mods, depth + 1)
            if tuple(target + [first]) in mods:
                return resolve(tuple(target), 'self::' + src, mods, depth + 1)
        break
    return tuple(target)

def refs(mod, text, mods):
    out = set()
    for m in USE_GROUP.finditer(text):
        prefix = m.group(1)
        for item in re.split(r'[,\s{}]+', m.group(2)):
            item = item.strip()
            if item and re.match(r'\w', item):
                out.add(resolve(mod, prefix + '::' + item.split('::')[0], mods))
    for m in PATH.finditer(text):
        out.add(resolve(mod, m.group(1), mods))
    return out

def sccs(nodes, edges):
    index, low, stack, on, res, i = {}, {}, [], set(), [], [0]
    def strong(v):
        index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index: strong(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: res.append(sorted(comp))
    for v in nodes:
        if v not in index: strong(v)
    return res

def check(crate):
    src = os.path.join(crate, 'src')
    mods = modules(src)
    REEXPORTS.clear()
    reexports(mods)
    # parent -> child-name graph
    graphs = defaultdict(lambda: defaultdict(set))
    why = defaultdict(set)
    for mod, path in mods.items():
        text = strip_tests(open(path).read())
        for t in refs(mod, text, mods):
            # common prefix
            k = 0
            while k < min(len(mod), len(t)) and mod[k] == t[k]: k += 1
            if k == len(mod) or k == len(t): continue  # ancestor/descendant
            parent, a, b = mod[:k], mod[k], t[k]
            graphs[parent][a].add(b)
            why[(parent, a, b)].add('::'.join(mod) + ' -> ' + '::'.join(t))
    found = False
    for parent, g in sorted(graphs.items()):
        nodes = sorted(set(g) | {b for s in g.values() for b in s})
        for v in nodes: g.setdefault(v, set())
        for comp in sccs(nodes, g):
            found = True
            print(f"{crate}: cycle under {'::'.join(parent) or 'crate'}: {' <-> '.join(comp)}")
            for a in comp:
                for b in comp:
                    for w in sorted(why.get((parent, a, b), ())):
                        print('    ', w)
    return found

if __name__ == '__main__':
    bad = [c for c in sys.argv[1:] if check(c)]
    if not bad: print('no module cycles in', ' '.join(sys.argv[1:]))
    sys.exit(1 if bad else 0)
