"""The Spark home Tandem starts Spark from (rowstream/spark_home.py): the installed pyspark's
folders, without the zipped Python that Spark would put first on its Python workers' path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import py4j
import pyspark
import pytest
from pyspark.find_spark_home import _find_spark_home

from rowstream.session import spark_session
from rowstream.spark_home import spark_home
from tests.conftest import ROOT

INSTALLED = Path(pyspark.__file__).parent


@pytest.fixture
def cache(monkeypatch, tmp_path) -> Path:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_the_linked_home_has_every_folder_of_pyspark_but_its_python(cache, monkeypatch):
    home = spark_home()
    assert home.parent == cache / "tandem"
    assert sorted(p.name for p in home.iterdir()) == sorted(
        p.name for p in INSTALLED.iterdir() if p.name != "python")
    assert (INSTALLED / "python" / "lib" / "pyspark.zip").is_file()  # what it leaves out
    assert not (home / "python").exists()
    # pyspark's own test of a Spark home, which its launcher applies to SPARK_HOME
    monkeypatch.setenv("SPARK_HOME", str(home))
    assert _find_spark_home() == str(home)
    monkeypatch.delenv("SPARK_HOME")
    assert spark_home() == home  # made once


def test_a_user_s_spark_home_is_kept(cache, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert spark_home() == Path("/opt/spark")
    assert not (cache / "tandem").exists()


def test_without_a_cache_spark_starts_from_the_installed_pyspark(cache, monkeypatch):
    not_a_folder = cache / "file"
    not_a_folder.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_folder))
    assert spark_home() == INSTALLED


def test_processes_that_make_the_home_at_once_all_get_it(cache):
    """The tests' two workers start Spark at the same time: each makes a home aside, the first
    rename wins, and the others take it."""
    code = "from rowstream.spark_home import spark_home; print(spark_home())"
    processes = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(4)]
    outputs = [p.communicate(timeout=60) for p in processes]
    assert all(p.returncode == 0 for p in processes), [err for _, err in outputs]
    homes = {out.strip() for out, _ in outputs}
    assert len(homes) == 1 and Path(homes.pop()).parent == cache / "tandem"
    assert [p.name for p in (cache / "tandem").iterdir()] == [spark_home().name]  # no staging


@pytest.mark.integration
def test_spark_s_python_workers_import_the_installed_pyspark():
    def modules(_):
        import py4j
        import pyspark
        return pyspark.__file__, py4j.__file__

    worker = spark_session().sparkContext.parallelize([0], 1).map(modules).collect()[0]
    assert worker == (pyspark.__file__, py4j.__file__)
