"""``cycle init``: scaffold a project that runs at once.

It writes a cycle.yaml, a prompt, a case file, a ``.env.example`` and a
``.gitignore`` for one provider: ``offline`` (the default: no key, no
network), ``openai``, ``gemini``, or the base URL of an OpenAI-compatible
server. The project is the quickstart's support-reply prompt, small enough
to read in a minute, and on the offline model a whole improvement cycle
really improves it. It never overwrites a file: if any would be replaced it
writes none and says which.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

import click
from msgspec import Struct

from cycle.errors import ConfigError


class Provider(Struct, frozen=True):
    """The models a new project starts with, and what they need."""

    name: str
    agent: str
    judge: str
    improver: str
    key: str | None = None  # the environment variable holding the key
    base_url: str | None = None
    max_cost: float = 1.00

    @property
    def offline(self) -> bool:
        return self.name == "offline"


PROVIDERS = {
    "offline": Provider("offline", "offline:default", "offline:default", "offline:default",
                        max_cost=0.50),
    "openai": Provider("openai", "openai:gpt-4o-mini", "openai:gpt-4.1-mini", "openai:gpt-4.1",
                       key="OPENAI_API_KEY"),
    "gemini": Provider("gemini", "gemini:gemini-2.5-flash-lite", "gemini:gemini-2.5-flash",
                       "gemini:gemini-2.5-flash", key="GEMINI_API_KEY"),
}

#: the model an OpenAI-compatible server is assumed to serve when --model is not given
DEFAULT_SERVER_MODEL = "llama3.1"


#: what a model name is made of (gpt-4o-mini, llama3.1:8b, hf.co/org/model:Q4_K_M): it is
#: written into cycle.yaml as it is, where a space, a newline, a quote or a # broke the file
_MODEL_NAME = re.compile(r"[A-Za-z0-9._:/@+-]+")
#: what no base URL holds, and what would break cycle.yaml or its comment line
_NOT_IN_URL = re.compile(r"[\s\"'\\#<>{}|^`\x00-\x1f\x7f]")


def choose_provider(provider: str, model: str | None) -> Provider:
    """The Provider for --provider (a name or an http(s) URL), with --model for every role."""
    if model is not None and not _MODEL_NAME.fullmatch(model):
        raise click.BadParameter(
            f"{model!r} is not a model name: letters, digits and . _ : / @ + - (e.g. gpt-4o-mini, "
            "llama3.1:8b)", param_hint="--model")
    if provider in PROVIDERS:
        chosen = PROVIDERS[provider]
        if model is None:
            return chosen
        if chosen.offline:
            raise click.UsageError("--model does not apply to the offline provider "
                                   "(every offline model behaves alike)")
        name = model if ":" in model else f"{provider}:{model}"
        return Provider(chosen.name, name, name, name, key=chosen.key)
    url = urlparse(provider)
    if url.scheme not in ("http", "https") or not url.netloc or _NOT_IN_URL.search(provider):
        raise click.BadParameter(
            f"{provider!r} is neither offline, openai, gemini nor an http(s) URL "
            "(an OpenAI-compatible server, e.g. http://localhost:11434/v1)",
            param_hint="--provider")
    from cycle.llm.http import safe_url, url_secrets

    if url_secrets(provider):
        # cycle.yaml is committed with the project: credentials in it would be in git
        raise click.BadParameter(
            f"{safe_url(provider)} is given with credentials (a user and password, or a key "
            "in the query), which cycle init would write into cycle.yaml; give the URL "
            "without them, and put the whole URL in .env (git-ignored) as OPENAI_BASE_URL "
            "in place of cycle.yaml's providers.openai.base_url", param_hint="--provider")
    name = f"openai:{model or DEFAULT_SERVER_MODEL}"
    return Provider("server", name, name, name, key="OPENAI_API_KEY", base_url=provider.rstrip("/"))


def _is_local(base_url: str | None) -> bool:
    """A server on this machine or the local network (a local model: slow, few at a time)."""
    if not base_url:
        return False
    import ipaddress

    host = (urlparse(base_url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_unspecified


def _config(p: Provider) -> str:
    header = {
        "offline": "# Runs on the offline model: deterministic, no key, no network; every\n"
                   "# report says so. For real runs: cycle init --provider openai (or gemini,\n"
                   "# or an OpenAI-compatible URL), or set the three models below.\n",
        "openai": "# Needs OPENAI_API_KEY in the environment or in .env (see .env.example).\n",
        "gemini": "# Needs GEMINI_API_KEY in the environment or in .env (see .env.example).\n",
        "server": f"# Runs on the OpenAI-compatible server at {p.base_url}; the model name is\n"
                  "# what the server calls it. A server other than api.openai.com may need no key.\n",
    }[p.name]
    providers = ""
    local = _is_local(p.base_url)
    run = ("  concurrency: 8\n" if not local else
           "  concurrency: 2             # a local model answers a few calls at a time\n"
           "  timeout: 600               # seconds a case may take: a local model is slow\n")
    if p.base_url:
        model = p.agent.split(":", 1)[1]
        providers = (
            "\nproviders:\n"
            f"  openai: {{base_url: \"{p.base_url}\", timeout: {300 if local else 120}, "
            f"max_connections: {2 if local else 4}}}\n"
            "# a local server costs nothing; for a paid gateway put its prices here\n"
            "pricing:\n"
            f"  \"openai:{model}\": {{input: 0, output: 0}}\n"
        )
    return f"""{header}prompt: prompts/support-reply.yaml
agent: {p.agent}          # the model the prompt runs on
judge: {p.judge}          # scores the criteria written as rubrics
improver: {p.improver}       # proposes edits to the prompt

# How a reply is judged: a check (deterministic, 100 or 0) or a rubric (the
# judge scores 0-100); weights make a case's score, `required` must pass.
criteria:
  - id: cites_order
    description: The reply cites the customer's order number
    check: {{type: contains, values: ["{{{{ order }}}}"]}}
    required: true
  - id: accuracy            # a built-in rubric: correct and complete against `expected`
    weight: 2
  - id: tone
    rubric: Polite and empathetic; greets the customer by name and signs off.
  - id: actionable
    rubric: The reply ends with one concrete next step the customer can take.

pass_threshold: 70          # a case passes at this weighted score (and its required checks)
cases: [cases/*.yaml]

run:
  iterations: 3             # models vary: each case runs three times
{run}
budget: {p.max_cost:.2f}               # USD: a hard cap on one `cycle run`
{providers}
# `cycle improve`: each round the improver reads the low-scoring cases and
# proposes edits; a candidate replaces head only when its gain is significant.
improve:
  acceptance: significant
  stop: {{any: [{{target_score: 90}}, {{max_rounds: 5}}, {{no_improvement: 2}}, {{max_cost: {p.max_cost:.2f}}}]}}
  low_score: 90             # cases below this go to the improver (default: pass_threshold)
"""


PROMPT = """\
# The prompt under test. `cycle improve` keeps every version of it in the
# store (.cycle/cycle.db); this file is only read when it changes.
id: support-reply
system: |
  You are a support agent. Answer the customer's question.
user_template: |
  Customer: {{ customer }}
  Order: {{ order }}
  Question: {{ question }}
params:
  temperature: 0.2
  max_tokens: 400           # also keeps the budget's reservation per call tight
"""

CASES = """\
# Each case fills the prompt's template variables from `input`; `expected` is
# a reference reply the judge compares with. Add cases here or in new files.
- id: late-delivery
  tags: [shipping]
  input:
    customer: Ann
    order: A-1042
    question: My parcel was due on Monday and still has not arrived. Where is it?
  expected: |
    Hi Ann,
    I'm sorry for the trouble with order #A-1042. Your parcel is on its way and
    should arrive within 2 business days.
    Next step: follow it with the tracking link in your shipping email.
    — The Support Team

- id: refund-request
  tags: [billing]
  input:
    customer: Dana
    order: D-4501
    question: I sent the shoes back two weeks ago. When do I get my refund?
  expected: |
    Hi Dana,
    I'm sorry for the trouble with order #D-4501. Your refund has been approved
    and will be back on your original payment method within 5 business days.
    Next step: watch for the confirmation email.
    — The Support Team

- id: cancel-order
  tags: [orders]
  input:
    customer: Chen
    order: C-3377
    question: I ordered the wrong size. Please cancel my order before it ships.
  expected: |
    Hi Chen,
    I'm sorry for the trouble with order #C-3377. Your order has been cancelled
    and you will not be charged.
    Next step: place a new order in the right size whenever you are ready.
    — The Support Team
"""

GITIGNORE = """\
.env
.cycle/
reports/
"""


def _env_example(p: Provider) -> str:
    lines = ["# Copy to .env (git-ignored): cycle reads it; variables already set win.",
             "# Keys are read from the environment only, never stored or reported."]
    if p.offline:
        lines.append("# The offline model needs no key. For OpenAI or Gemini:")
        lines += ["# OPENAI_API_KEY=sk-...", "# GEMINI_API_KEY=..."]
    elif p.base_url:
        lines.append("# Only if the server asks for one:")
        lines.append("# OPENAI_API_KEY=...")
    else:
        lines.append(f"{p.key}=")
    return "\n".join(lines) + "\n"


def project_files(p: Provider) -> dict[str, str]:
    """Relative path -> content of every file ``cycle init`` writes."""
    return {
        "cycle.yaml": _config(p),
        "prompts/support-reply.yaml": PROMPT,
        "cases/examples.yaml": CASES,
        ".env.example": _env_example(p),
        ".gitignore": GITIGNORE,
    }


#: files a project folder often has already: left alone (and said so), never a reason to refuse
OPTIONAL = {".gitignore"}


def _not_a_folder(folder: Path) -> ConfigError | None:
    """Why ``folder`` (one cycle init writes into, or makes) cannot hold the project: a
    symlink to what does not exist (init would make a folder where it points, or fail once
    it has written half the project), or a file."""
    if folder.is_symlink() and not folder.exists():
        return ConfigError(
            f"cycle init cannot write into {folder}: it is a symlink to {os.readlink(folder)}, "
            "which does not exist; nothing was written",
            hint="Create the folder it points to, remove the link, or choose another folder: "
                 "cycle init NEW_FOLDER.")
    if folder.exists() and not folder.is_dir():
        return ConfigError(f"cycle init cannot write into {folder}: it is a file, not a folder; "
                           "nothing was written",
                           hint="Move the file away, or choose another folder: cycle init NEW_FOLDER.")
    return None


def write_project(root: Path, files: dict[str, str]) -> tuple[list[Path], list[Path]]:
    """Write every file, or none if one that matters exists (nothing is ever overwritten).

    Returns the files written and the optional ones left as they were.
    """
    targets = {root / rel: text for rel, text in files.items()}
    # the folders the files go into (DIRECTORY, those it is in, prompts/ and cases/), before
    # anything is written: one linked to nothing failed only once cycle.yaml was written
    for folder in dict.fromkeys(f for path in targets for f in reversed(path.parents)):
        refused = _not_a_folder(folder)
        if refused is not None:
            raise refused
    kept = [root / rel for rel in files if rel in OPTIONAL and (root / rel).exists()]
    # a symlink (even one pointing nowhere) is taken: writing through it would write
    # wherever it points, outside the project
    taken = [path for path in targets if (path.exists() or path.is_symlink())
             and path not in kept]
    inside = root.resolve()
    outside = [path for path in targets
               if not path.parent.resolve().is_relative_to(inside)]
    if outside:
        raise ConfigError(
            f"cycle init would write {outside[0]} outside {root}: "
            f"{outside[0].parent} is a symlink to {outside[0].parent.resolve()}; "
            "nothing was written", hint="Choose a folder without such links: cycle init NEW_FOLDER.")
    if taken:
        names = ", ".join(f"{p} (a symlink to {os.readlink(p)})" if p.is_symlink() else str(p)
                          for p in taken)
        raise ConfigError(f"cycle init would overwrite {names}; nothing was written",
                          hint="Choose an empty folder: cycle init NEW_FOLDER.")
    written = [path for path in targets if path not in kept]
    try:
        for path in written:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(targets[path], encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot write the project in {root}: {e.strerror or e}",
                          hint="Choose a folder you can write to.") from e
    return written, kept


def _ask() -> tuple[str, str | None]:
    provider = click.prompt(
        "Provider (offline needs no key; or an OpenAI-compatible server's URL)",
        type=click.Choice(["offline", "openai", "gemini", "url"]), default="offline")
    model = None
    if provider == "url":
        provider = click.prompt("Server base URL", default="http://localhost:11434/v1")
        model = click.prompt("Model name on the server", default=DEFAULT_SERVER_MODEL)
    return provider, model


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--provider", metavar="offline|openai|gemini|URL",
              help="Models to start with (default offline; asked in a terminal when not given).")
@click.option("--model", help="One model for the agent, judge and improver (default: per provider).")
def init(directory: Path, provider: str | None, model: str | None) -> None:
    """Create a working project in DIRECTORY (default: here): cycle.yaml, a prompt, cases.

    It runs at once: `cycle run`, then `cycle improve`. Offline by default, so
    no key or network is needed to try it; nothing existing is overwritten.
    """
    if provider is None:
        provider, asked_model = _ask() if sys.stdin.isatty() else ("offline", None)
        model = model or asked_model
    chosen = choose_provider(provider, model)
    written, kept = write_project(directory, project_files(chosen))
    # the cd is said once, on a line of its own: the later lines run inside the folder
    here = directory.resolve() == Path.cwd().resolve()
    click.echo(f"Created {len(written)} files in {directory}:")
    for path in written:
        click.echo(f"  {path.relative_to(directory)}")
    for path in kept:
        click.echo(f"Left your {path.name} as it was: add .env, .cycle/ and reports/ to it.")
    click.echo("")
    if chosen.key and not chosen.base_url:
        click.echo(f"Put {chosen.key} in .env (see .env.example) or in the environment, then:")
    else:
        click.echo("Next" + (" (offline model: no key, no network):" if chosen.offline else ":"))
    if not here:
        click.echo(f"  cd {directory}")
    click.echo("  cycle run                      # evaluate the prompt on its cases")
    click.echo("  cycle improve --headless --yes # improve it, approving every edit")
    click.echo("  cycle improve                  # the same, reviewing each edit in the TUI")
