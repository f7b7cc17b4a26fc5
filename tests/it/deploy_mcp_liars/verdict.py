#!/usr/bin/env python3
"""verdict.py OUT LIE CASE RC: one line per case of OUT/report.json (verdict, failures, harness)."""
import json, sys
out, lie, case, rc = sys.argv[1:5]
try:
    r = json.load(open(f"{out}/report.json"))
except Exception as e:
    print(f"{lie:24} {case:8} rc={rc} NO REPORT ({e})")
    sys.exit()
def cases(x):
    if isinstance(x, dict):
        if "verdict" in x and str(x.get("id", "")).startswith("MCP-"):
            yield x
        for v in x.values():
            yield from cases(v)
    elif isinstance(x, list):
        for v in x:
            yield from cases(v)
for c in cases(r):
    fails = "; ".join(f"{f.get('requirement')}: {f.get('msg','')[:160]}" for f in c.get("failures", []))
    extra = c.get("harness") or ""
    ne = c.get("not_established") or []
    print(f"{lie:24} {c['id']:8} rc={rc} {c['verdict']:18} {('not_established=' + ','.join(ne)) if ne else ''} {fails} {extra[:200]}")
