"""tool-forge eval files (seed 001, the eval runner contract), read and written.

Reading: a golden or labeled file, as an envelope (``{"metadata": ..., "cases": [...]}``) or a
bare array, becomes cycle cases. ``{{seed:path}}`` and ``{{snapshot:path}}`` tokens in the
assertion values are resolved against the seed manifest and the captured snapshot; a value
whose token does not resolve is skipped with a warning, never silently. Each case is judged
by one ``toolforge`` check (``cycle.judge.toolforge``) holding its resolved ``expect`` block;
its ``stubs`` become mocks (stub mode, the tools run as stubs), and without stubs the model's
first turn is the answer and its tool calls are never run (routing-only mode).

Writing: the ``EvalSuiteResult`` JSON of a run, field for field, with the staleness warnings
(description hash, registry size, tool version, against a tool registry file), and the
baseline diff (regressions, new passes) against an earlier result file; and the console
summary. Where the contract is ambiguous, the reading taken here is in docs/interop.md's
"Conformance" section.

The package, by concern: ``reading`` (the file and its checks), ``cases`` (tokens and the
cases they become), ``staleness`` (against a tool registry), ``results`` (the result file,
the baseline diff and the console summary).
"""

from __future__ import annotations

from cycle.formats.toolforge.cases import Loaded, Tokens, load, read_cases, to_cases, tokens_used
from cycle.formats.toolforge.reading import (
    CRITERION_ID,
    DEFAULT_MAX_TURNS,
    DEFAULT_OUTPUT_DIR,
    DEFAULT_SEED_MANIFEST,
    EvalFile,
    load_json_data,
    parse_path,
    read_eval_file,
)
from cycle.formats.toolforge.results import (
    case_result,
    contract_run_id,
    diff_baseline,
    load_baseline,
    render_summary,
    result_path,
    suite_result,
    write_result,
)
from cycle.formats.toolforge.staleness import (
    RegistryTool,
    Staleness,
    description_hash,
    load_registry,
    staleness,
)

__all__ = [
    "CRITERION_ID", "DEFAULT_MAX_TURNS", "DEFAULT_OUTPUT_DIR", "DEFAULT_SEED_MANIFEST",
    "EvalFile", "Loaded", "RegistryTool", "Staleness", "Tokens", "case_result",
    "contract_run_id", "description_hash", "diff_baseline", "load", "load_baseline",
    "load_json_data", "load_registry", "parse_path", "read_cases", "read_eval_file",
    "render_summary", "result_path", "staleness", "suite_result", "to_cases", "tokens_used",
    "write_result",
]
