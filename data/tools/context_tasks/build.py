"""Write data-B's bundled JSONL files (run: python3 build.py OUT_DIR)."""
import json, sys
from pathlib import Path
from docs import DOCS
from rows import OPEN_ENDED, WCTX, REFUSAL

out = Path(sys.argv[1])

def words(t): return len(t.split())

def dump(name, rows):
    with open(out / name, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(name, len(rows))

for k, (_, _, t) in DOCS.items():
    assert 60 <= words(t) <= 150, (k, words(t))

qs = [q for q, _ in OPEN_ENDED]
assert len(set(qs)) == len(qs)
for q, a in OPEN_ENDED:
    assert q.endswith("?") and a
dump("open_ended.jsonl", [{"Question": q, "Answer": a} for q, a in OPEN_ENDED])

rows = []
for q, a, keys, null_absent in WCTX:
    assert 1 <= len(keys) <= 3 and len(set(keys)) == len(keys)
    r = {"Question": q, "Answer": a}
    absent = None if null_absent else ""
    for i in range(3):
        if i < len(keys):
            src, path, text = DOCS[keys[i]]
            r[f"Doc {i+1}"] = text
        else:
            r[f"Doc {i+1}"] = absent
    for i in range(3):
        r[f"Source {i+1}"] = DOCS[keys[i]][0] if i < len(keys) else absent
    for i in range(3):
        r[f"file_path_{i+1}"] = DOCS[keys[i]][1] if i < len(keys) else absent
    rows.append(r)
assert len({r["Question"] for r in rows}) == len(rows)
dump("open_ended_w_context.jsonl", rows)

rows = [{"Question": q, "Context": DOCS[k][2]} for q, k in REFUSAL]
assert len({r["Question"] for r in rows}) == len(rows)
dump("refusal.jsonl", rows)
