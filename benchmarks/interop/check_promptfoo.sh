#!/bin/sh
# cycle import promptfoo against promptfoo itself (not part of the test suite: it needs npm).
# Writes the config of tests/formats/test_promptfoo.py::AS_PROMPTFOO_READS_IT, has promptfoo
# validate it and run it with its offline echo provider, prints the tests promptfoo made,
# then imports it with cycle: the cases must be the same tests (promptfoo prints them in
# the order they finished).
#   sh benchmarks/interop/check_promptfoo.sh [PROMPTFOO_DIR]   (default /tmp/pf)
# Checked with promptfoo 0.121.20 (npm install promptfoo), node 20.
set -eu
PF=${1:-/tmp/pf}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python}
[ -x "$PF/node_modules/.bin/promptfoo" ] || (mkdir -p "$PF" && cd "$PF" && npm init -y >/dev/null && npm install promptfoo)
W=$(mktemp -d)
PYTHONPATH="$ROOT" "$PY" - "$W" <<'PYEOF'
import sys
from pathlib import Path
from tests.formats import test_promptfoo as t
w = Path(sys.argv[1])
(w / "promptfooconfig.yaml").write_text(t.AS_PROMPTFOO_READS_IT)
(w / "q2.txt").write_text("What is your return policy?\n")
(w / "data.json").write_text('{"a": 1}\n')
(w / "tests.csv").write_text(t.CSV)
PYEOF
cd "$PF"
export PROMPTFOO_DISABLE_TELEMETRY=1 PROMPTFOO_DISABLE_UPDATE=1
npx promptfoo --version
npx promptfoo validate -c "$W/promptfooconfig.yaml"
npx promptfoo eval -c "$W/promptfooconfig.yaml" -o "$W/out.json" --no-cache --no-write --no-table >/dev/null || true
"$PY" -c "
import json, sys
for r in json.load(open(sys.argv[1]))['results']['results']:
    print('promptfoo:', repr(r['response']['output']), [c['assertion']['type'] for c in r['gradingResult']['componentResults']])
" "$W/out.json"
cd "$ROOT"
PYTHONPATH="$ROOT" "$PY" -m cycle import promptfoo "$W/promptfooconfig.yaml" --out "$W/project" --name pf --model offline:default
PYTHONPATH="$ROOT" "$PY" -c "
import sys, yaml
for c in yaml.safe_load(open(sys.argv[1])): print('cycle:', c['input'], [k['check']['type'] for k in c.get('criteria', [])])
" "$W/project/cases/pf.yaml"
