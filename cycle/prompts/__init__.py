"""Prompts: the versioned content, its templates, prompt files, version numbers and diffs.

The ``Prompt`` record itself lives in ``cycle.records`` (versions hold it);
everything done with a prompt is here.
"""

from cycle.prompts import semver
from cycle.prompts.diff import FieldDiff, VersionDiff, diff_prompts
from cycle.prompts.files import PromptFile, dump_prompt, load_prompt_file, save_prompt_file
from cycle.prompts.template import (
    check_templates,
    compile_template,
    render,
    render_system,
    render_user,
)
from cycle.records import Prompt

__all__ = [
    "FieldDiff", "Prompt", "PromptFile", "VersionDiff", "check_templates", "compile_template",
    "diff_prompts", "dump_prompt", "load_prompt_file", "render", "render_system", "render_user",
    "save_prompt_file", "semver",
]
