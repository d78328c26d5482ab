"""cycle.store: prompt versions, labels, runs and cycles in one SQLite file, or in a
team's PostgreSQL database (``Store.open("postgresql://...")``).

    from cycle.store import Store
    with Store.open(".cycle/cycle.db") as store:
        v = store.save_version(prompt, message="first draft")   # versions and labels
        store.resolve("support-reply@head")
        store.runs.recent(limit=5)                               # the run log
        store.cycles.get_rounds(cycle_id)                        # the cycle log

Everything it hands back is a record of ``cycle.records``. The cycle log
(``cycle.store.cycles``) loads when first used: a run does not.
"""

from cycle.store.runs import CallRecorder, RunLog
from cycle.store.store import Store, default_path

__all__ = ["CallRecorder", "RunLog", "Store", "default_path"]
