"""cycle import openai-evals over the real openai/evals registry (not part of the test
suite: it needs the evals wheel, 46 MB, whose registry data is not in LFS):
  pip download evals==3.0.1.post1 --no-deps -d /tmp/oaievals
  cd /tmp/oaievals && unzip -q evals-*.whl 'evals/registry/*'
  PYTHONPATH=. python benchmarks/interop/check_openai_evals_registry.py /tmp/oaievals/evals/registry
Every registry/evals/*.yaml whose samples file is there is read with read_registry_eval and
converted; it prints refusals and crashes, then counts by class (with or without criteria).
With 3.0.1.post1: 248 Match, 109 Includes, 36 FuzzyMatch and 17 ModelBasedClassify evals
convert with criteria; the custom classes are listed (no criteria), and so are 21
ModelBasedClassify evals whose spec has no choice_scores (fact, possible, rhyming:
openai/evals only counts the choices) or grades several completions (battle); 16 refusals,
custom evals whose samples have no input (make_me_say, steganography...); no crash
(2026-11-28; before, the 21 were refused)."""
import collections
import sys
import traceback
from pathlib import Path

import yaml

from cycle.errors import ConfigError
from cycle.formats.openai_evals import convert, read_items, read_registry_eval

reg = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/oaievals/evals/registry")
outcome = collections.Counter(); multi = 0
for y in sorted((reg / "evals").glob("*.yaml")):
    try:
        data = yaml.safe_load(y.read_text())
    except Exception:  # noqa: BLE001 - a crash of any kind is what this looks for
        outcome["yaml-bad"] += 1; continue
    specs = {k: v for k, v in data.items() if isinstance(v, dict) and "class" in v}
    if len(specs) > 1: multi += 1
    try:
        [spec] = read_registry_eval(y)
    except ConfigError as e:
        outcome["refused-yaml"] += 1; print("REFUSED", y.name, e); continue
    sj = spec["args"].get("samples_jsonl")
    if not sj: outcome["no-samples"] += 1; continue
    path = reg / "data" / sj
    if not path.exists() or path.stat().st_size < 200 and "oid sha256" in path.read_text(errors="ignore"):
        outcome["no-data"] += 1; continue
    try:
        done = convert(read_items(path), [spec], name="x", source=str(path))
        outcome[("ok", spec["class"].rsplit(":", 1)[-1], bool(done.criteria))] += 1
    except ConfigError as e:
        outcome["refused-items"] += 1; print("REFUSED", y.name, str(e)[:150])
    except Exception:  # noqa: BLE001 - a crash of any kind is what this looks for
        outcome["CRASH"] += 1; print("CRASH", y.name); traceback.print_exc(limit=3)
print(outcome, "multi-spec files:", multi)
