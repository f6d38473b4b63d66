"""What a run is, as one value: ``RunSpec``, built once from the CLI's options or a DAG's
parameters and handed to ``runtime.run.run``. Plans that a run migrates to, micro-batch runs and
benchmarks derive theirs from it with ``dataclasses.replace``. It imports no Spark: the CLI and
the operators build it before anything starts Spark."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from columnar.store import DEFAULT_PATH
from optimizer.cost import FILES_PER_BATCH
from optimizer.errors import TandemError

# A run fails when no micro-batch finishes for this long, seconds. The slowest batches measured
# here (pure-Spark Q1's first, expanding 5-minute windows) take under two minutes.
STALL_TIMEOUT = 600.0
GATEWAYS = ("auto", "reference", "native", "python")  # how a landing directory is read (runtime.run)


@dataclass(frozen=True)
class Takeover:
    """Where a plan that a run migrates to takes over from the one before it
    (``runtime/migration.py``): it writes its run's results, numbers its batches from
    ``batch_base``, and evaluates the window_ends after ``floor``. It reads the generated stream
    from ``begin`` (seconds of event time), the open windows' part before ``replay_until`` in one
    micro-batch, whose rows rebuild its state (Zhu's recomputed states)."""

    results: str
    batch_base: int
    floor: datetime | None
    begin: float
    replay_until: float
    previous: str  # the plan before's name: its schema holds the tables taken over
    taken: frozenset[str] = frozenset()  # the stream relations whose tables it takes over
    tables: tuple[str, ...] = ()  # those tables (rows and pane partials)
    # Over a landing directory (Parallel Track only: nothing is read again), the new plan's
    # query begins after this file, at the stream's high-water mark there (µs).
    start_after: str = ""
    high_water: int | None = None


@dataclass(frozen=True)
class RunSpec:
    """A run of ``query``: for ``duration`` seconds of event time at ``rate`` tuples/s from the
    generator, or over the files in the directory ``source``.

    The plan: ``placement`` ("auto": the optimiser's), over ``catalog`` and ``profile`` (the
    settings' by default); ``spark_design`` is how Spark evaluates its windowed operators
    (``rowstream.dsps.SPARK_DESIGNS``; "buckets" applies to pure-Spark plans only).

    The stream: ``batch`` is the event time per micro-batch (default: one slide); ``lateness``
    the allowed lateness L in seconds (default: the catalog's for the stream; docs/design.md,
    Semantics); ``disorder``, ``max_error``, ``confidence`` and ``min_recall`` override the
    result quality the query states and how its K-slack buffer is sized
    (``runtime/quality.py``); ``gateway`` how a landing directory is read (``GATEWAYS``);
    ``available_now`` reads the files that have landed since the checkpoint's last batch and stops (Spark's
    availableNow trigger); by reference, a micro-batch takes up to ``files_per_batch`` of the
    files that have landed, each judged as a batch of its own (``rowstream/by_reference.py``).
    For the generator: ``topology`` its houses, households and plugs,
    ``steps`` its rate steps (``workload.smart_plugs.SmartPlugs``), ``warmup`` seconds of event
    time first in micro-batches of ``warmup_span`` (default a minute; benchmarks fill the
    windows so), and the event time before ``begin`` is skipped (a benchmark that loaded it
    into the store resumes after).

    The state: ``name`` names the run's schema in ``store`` and its checkpoint (default: the
    query's); the checkpoint defaults to ``checkpoints/<store>/<name>`` beside the store;
    ``resume`` continues from the checkpoint of an earlier run, else the run starts afresh.

    The end: exactly ``stop_after`` micro-batches (to interrupt a run on purpose: Spark
    commits none after them), or none finishing for ``stall_timeout`` seconds (an error).
    ``takeover``: this run is a plan that another run's migrated to; ``last_end``: the last
    window_end it evaluates (a plan that Parallel Track replaces)."""

    query: str
    placement: str = "auto"
    catalog: str | None = None
    profile: str | None = None
    spark_design: str = "built-in"
    source: str = "generator"
    gateway: str = "auto"
    batch: float | None = None
    files_per_batch: int = FILES_PER_BATCH
    lateness: float | None = None
    disorder: str | None = None
    max_error: float | None = None
    confidence: float | None = None
    min_recall: float | None = None  # a join's, instead of max_error
    available_now: bool = False
    rate: float = 1000.0
    duration: float = 60.0
    topology: dict | None = None
    steps: tuple[tuple[float, float], ...] = ()
    warmup: float = 0.0
    warmup_span: float | None = None
    begin: float = 0.0
    store: str | Path = DEFAULT_PATH
    checkpoint: str | Path | None = None
    name: str | None = None
    resume: bool = False
    stop_after: int | None = None
    stall_timeout: float = STALL_TIMEOUT
    takeover: Takeover | None = None
    last_end: datetime | None = None
    # More queries over the same stream, in the same run (``runtime.run.run_together``).
    together: tuple[str, ...] = ()

    def __post_init__(self):
        if self.gateway not in GATEWAYS:
            raise TandemError(f"--gateway {self.gateway}: give one of {', '.join(GATEWAYS)}")
        if self.lateness is not None and self.lateness < 0:
            raise TandemError(f"--lateness {self.lateness:g}: give a lateness of 0 seconds or more")
        if self.batch is not None and self.batch <= 0:
            raise TandemError(f"--batch {self.batch:g}: give a positive span of event time")
        if self.files_per_batch < 1:
            raise TandemError(f"--files-per-batch {self.files_per_batch}: give 1 or more")
        if not self.generated and not Path(self.source).is_dir():
            raise TandemError(f"--source {self.source!r}: give 'generator' or a landing directory "
                              "(CSV or Parquet files)")

    @property
    def generated(self) -> bool:
        return self.source == "generator"
