"""Every Python process of a run that a test kills (the CLI, Spark's workers, its stream
source's runner) starts with the crash points installed (tests/crash/points.py)."""

import os

if os.environ.get("TANDEM_CRASH"):
    from tests.crash.points import install

    install()
