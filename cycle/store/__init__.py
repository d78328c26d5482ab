"""cycle.store: prompt versions, labels, runs and cycles in one SQLite file.

    from cycle.store import Store
    with Store.open(".cycle/cycle.db") as store:
        v = store.save_version(prompt, message="first draft")
        store.resolve("support-reply@head")
"""

from cycle.prompts.diff import FieldDiff, VersionDiff, diff_prompts
from cycle.records import HEAD, PRODUCTION, LabelMove, PromptSummary, Version
from cycle.store.store import Store

__all__ = [
    "HEAD",
    "PRODUCTION",
    "FieldDiff",
    "LabelMove",
    "PromptSummary",
    "Store",
    "Version",
    "VersionDiff",
    "diff_prompts",
]
