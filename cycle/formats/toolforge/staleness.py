"""Staleness of an eval file against a tool registry: description hashes, registry size,
tool versions."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct

from cycle.errors import ConfigError
from cycle.formats.toolforge.reading import EvalFile, load_json_data


class RegistryTool(Struct, frozen=True):
    name: str
    description: str
    version: str | None


def load_registry(path: str | Path) -> dict[str, RegistryTool]:
    """A tool registry: a JSON or YAML list of tools ({name, description, version}), a
    ``{"tools": [...]}`` object, or an object of name -> tool."""
    p = Path(path)
    if p.suffix.lower() in (".ts", ".js", ".mjs", ".cjs", ".tsx"):
        raise ConfigError(
            f"the tool registry '{p}' is a {p.suffix} file; cycle reads JSON or YAML", file=str(p),
            hint="Export it once, e.g. node -e \"import('./" + p.name + "').then(m => console.log("
            "JSON.stringify(Object.values(m))))\" > tools.json, and pass --tool-registry "
            "tools.json.")
    if not p.exists():
        raise ConfigError(f"tool registry '{p}' not found", file=str(p),
                          hint="Fix --tool-registry, or leave it out to skip staleness checks.")
    if p.suffix.lower() in (".yaml", ".yml"):
        from cycle.yamlload import load_yaml

        data = load_yaml(p).data
    else:
        data = load_json_data(p, "tool registry", "--tool-registry")
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if isinstance(data, dict):
        data = [{"name": k, **v} for k, v in data.items() if isinstance(v, dict)]
    if not isinstance(data, list):
        raise ConfigError("expected a list of tools, {\"tools\": [...]}, or an object of name "
                          "-> tool", file=str(p), line=1)
    tools: dict[str, RegistryTool] = {}
    for n, t in enumerate(data):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise ConfigError(f"tool #{n + 1} has no 'name'", file=str(p), field=f"[{n}].name")
        version = t.get("version")
        tools[t["name"]] = RegistryTool(t["name"], str(t.get("description") or ""),
                                        None if version is None else str(version))
    return tools


def description_hash(description: str) -> str:
    """The contract's ``sha256(tool.description).substring(0, 12)``."""
    return hashlib.sha256(description.encode("utf-8")).hexdigest()[:12]


def _major(version: str | None) -> str | None:
    if not version:
        return None
    return version.strip().lstrip("vV").split(".")[0]


class Staleness(Struct, frozen=True):
    warnings: list[str]
    #: the current tool's figures, for the result file's metadata
    current: dict[str, Any]
    #: the eval may not reflect the current routing contract
    stale: bool


def staleness(ef: EvalFile, registry: Mapping[str, RegistryTool] | None) -> Staleness:
    """The contract's three checks, when the file has metadata and a registry is given."""
    name = ef.tool_name
    tool = registry.get(name) if registry is not None else None
    current: dict[str, Any] = {
        "toolVersion": tool.version if tool else None,
        "descriptionHash": description_hash(tool.description) if tool else None,
        "registrySize": len(registry) if registry is not None else None,
        "evalFileHash": ef.file_hash,
    }
    meta = ef.metadata
    if meta is None or registry is None:
        return Staleness([], current, False)
    warnings: list[str] = []
    stale = False
    if tool is None and (meta.get("descriptionHash") or meta.get("toolVersion")):
        warnings.append(f"Tool {name} is not in the tool registry; its description and "
                        "version could not be checked.")
        stale = True
    if tool is not None and meta.get("descriptionHash") \
            and current["descriptionHash"] != meta["descriptionHash"]:
        warnings.append(
            f"Evals for {name} generated against description hash {meta['descriptionHash']}, "
            f"current is {current['descriptionHash']}. Results may not reflect current routing "
            "contract.")
        stale = True
    size = meta.get("registrySize")
    if isinstance(size, int | float) and not isinstance(size, bool) and len(registry) > size * 1.5:
        warnings.append(f"Registry has grown from {size:g} to {len(registry)} tools. Labeled "
                        "evals may have under-specified toolsAcceptable sets.")
    if tool is not None and meta.get("toolVersion") and tool.version \
            and _major(tool.version) != _major(str(meta["toolVersion"])):
        warnings.append(f"Tool {name} is version {tool.version}, evals were generated for "
                        f"{meta['toolVersion']}. Schema may have changed.")
    return Staleness(warnings, current, stale)


# -- the result file ---------------------------------------------------------------------
