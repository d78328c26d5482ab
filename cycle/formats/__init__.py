"""Other tools' files: tool-forge eval files (``toolforge``)."""
