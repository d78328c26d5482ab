"""Other tools' files: tool-forge eval files (``toolforge``), promptfoo configs, OpenAI Evals
files, OpenTelemetry traces."""


class NotConverted(Exception):
    """A piece of another tool's file an import leaves out, and why (with the fix): listed
    with what was not converted (at cycle.yaml's top and on the console) while the rest is
    imported; never approximated. What cannot be read at all (a missing file) is the
    import's error instead."""
