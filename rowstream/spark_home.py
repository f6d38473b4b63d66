"""The Spark home Tandem starts Spark from: the installed pyspark's, without its zipped Python.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on the path of every
Python process it starts (``PythonUtils.sparkPythonPath``): a Python stream source's two runners
for each query, the data source's planners, the workers' daemons. Python compiles a module in a
zip from its source at every import and caches nothing, and every task re-reads the zips'
directories (``setup_spark_files`` invalidates the import caches). Importing pyspark's worker
takes 1.9-2.2 s from the zips against 0.7 s from the installed package, which pip compiled. A
home of links to every folder of the installed pyspark but ``python`` makes the workers import
that package: the same release, since the zips ship in the same wheel."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pyspark


def spark_home() -> Path:
    """``SPARK_HOME`` where the user set it; otherwise the linked home in Tandem's cache, made
    once per installed pyspark, or the installed pyspark's own folder where no cache can be
    written (Spark runs the same from it, its Python processes start slower)."""
    configured = os.environ.get("SPARK_HOME")
    if configured:
        return Path(configured)
    installed = Path(pyspark.__file__).parent
    try:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tandem"
        digest = hashlib.sha256(str(installed).encode()).hexdigest()[:12]
        home = cache / f"spark-home-{pyspark.__version__}-{digest}"
        if not home.is_dir():
            _link(installed, home)
    except (OSError, RuntimeError):  # RuntimeError: no home directory to find the cache in
        return installed
    return home


def _link(installed: Path, home: Path) -> None:
    """Made aside and renamed into place: processes that start Spark at the same time (the
    tests' workers) each make one, and the first rename wins."""
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=home.parent, prefix=".staging-"))
    try:
        for entry in installed.iterdir():
            if entry.name != "python":
                (staging / entry.name).symlink_to(entry)
        os.rename(staging, home)
    except OSError:
        if not home.is_dir():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
