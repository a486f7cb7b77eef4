#!/usr/bin/env bash
# Counts the library's public items, the way BENCHMARKS.md reports them: rustdoc's JSON
# (stable toolchain, RUSTC_BOOTSTRAP for the unstable output format), walked from the
# crate root through public modules and re-exports; every module, type, trait, function,
# method of an inherent impl, public field, enum variant and constant reached counts once.
# Trait impls (Debug, Clone…) are not counted.
#
#   scripts/public-items.sh [CARGO FEATURE FLAGS…]     e.g. --no-default-features
#   TOOLLOOP_PUBLIC_LIST=1 scripts/public-items.sh     also lists every item
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTC_BOOTSTRAP=1 cargo rustdoc --lib -q "$@" -- -Z unstable-options --output-format json 2>/dev/null
python3 - target/doc/toolloop.json <<'PY'
import collections, json, os, sys

d = json.load(open(sys.argv[1]))
idx = d["index"]
seen, counts, names = set(), collections.Counter(), []

def kind(v):
    return next(iter(v["inner"]))

def public(i):
    v = idx.get(str(i))
    return v is not None and (v.get("visibility") == "public" or kind(v) == "use")

def inherent(impls, path):
    for im in impls:
        imp = idx[str(im)]["inner"]["impl"]
        if imp["trait"] is None:
            for it in imp["items"]:
                if public(it):
                    visit(it, path)

def visit(i, path):
    i = str(i)
    if i in seen or i not in idx or idx[i].get("crate_id") != 0:
        return
    v = idx[i]
    k = kind(v)
    inner = v["inner"][k]
    if k == "use":
        if inner.get("id") is not None:
            visit(inner["id"], path)
        return
    seen.add(i)
    here = f"{path}::{v.get('name') or ''}"
    counts[k] += 1
    names.append(f"{k} {here}")
    if k == "module":
        for it in inner["items"]:
            if public(it):
                visit(it, here)
    elif k == "struct":
        fields = inner["kind"].get("plain", {}).get("fields", []) if isinstance(inner["kind"], dict) else []
        for f in fields:
            if public(f):
                visit(f, here)
        inherent(inner["impls"], here)
    elif k == "enum":
        for var in inner["variants"]:
            visit(var, here)
        inherent(inner["impls"], here)
    elif k == "trait":
        for it in inner["items"]:
            visit(it, here)

visit(d["root"], "")
print(sum(counts.values()), "public items:", ", ".join(f"{n} {k}" for k, n in counts.most_common()))
if os.environ.get("TOOLLOOP_PUBLIC_LIST"):
    print("\n".join(sorted(names)))
PY
