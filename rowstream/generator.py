"""The smart-plug generator's gateway: the stream of ``rowstream/generator_source.py``'s Python
data source over ``workload/smart_plugs.py``, in event-time order, every row good (its judge
admits them all)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from rowstream.gateway import Gateway
from rowstream.generator_source import GENERATOR, WARMUP_SPAN, SmartPlugSource
from workload.schema import StreamSchema


def generator_stream(spark: SparkSession, schema: StreamSchema, *, rate: float, duration: float,
                     span: float, slide: float, flush: float = 0.0, warmup: float = 0.0,
                     begin: float = 0.0, warmup_span: float = WARMUP_SPAN, steps: str = "",
                     **topology) -> DataFrame:
    spark.dataSource.register(SmartPlugSource)
    reader = (spark.readStream.format(GENERATOR).option("schema", schema.to_json())
              .option("ddl", schema.spark_ddl())
              .option("rate", rate)
              .option("duration", duration).option("span", span).option("slide", slide)
              .option("flush", flush).option("warmup", warmup).option("begin", begin)
              .option("warmup_span", warmup_span).option("steps", steps))
    for key, value in topology.items():
        reader = reader.option(key, value)
    return reader.load()


@dataclass(frozen=True)
class GeneratedStream(Gateway):
    """The generator's stream (``generator_stream``'s arguments)."""

    name = "generator"
    schema: StreamSchema
    rate: float
    duration: float
    span: float
    slide: float
    options: dict = field(default_factory=dict)  # generator_stream's other keywords

    def stream(self, spark: SparkSession) -> DataFrame:
        return generator_stream(spark, self.schema, rate=self.rate, duration=self.duration, span=self.span,
                                slide=self.slide, **self.options)
