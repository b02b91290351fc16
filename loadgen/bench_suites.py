"""The benchmark suites `riverbed-bench` knows: one per `python -m loadgen.X` benchmark (and
the variants `make` runs), each with its full and its `--quick` arguments.

Every suite prints its own report (figures beside a baseline measured in the same run) and
writes its figures as JSON to the file its `--json` option names; riverbed-bench adds that
option, keeps the report and the figures, and describes the machine (loadgen.bench_results).
Not suites: `riverbed-perf` (Kafka's perf tool, the command most suites run) and
`loadgen.clickstream` (a data generator for the Spark jobs).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Suite", "SUITES", "suite", "ORDER"]


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    module: str
    title: str
    measures: str
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()
    # what it needs besides the venv: "fleet" (starts its own local fleet), "spark" (pyspark)
    needs: tuple[str, ...] = ()
    # rough duration of a full run on the 2-core development machine
    duration: str = ""
    make_target: str = ""

    def command(self, quick: bool = False, extra: tuple[str, ...] = ()) -> list[str]:
        """`python -m <module>` arguments (without the interpreter)."""
        return ["-m", self.module, *(self.quick_args if quick else self.args), *extra]


SUITES: tuple[Suite, ...] = (
    Suite("records", "loadgen.records_bench", "Record-batch codec",
          "records/s of the v2 batch builder, decoder and validation, per compression codec",
          quick_args=("--rounds", "20", "--repeat", "2"), duration="seconds"),
    Suite("log", "loadgen.log_bench", "Storage engine",
          "PartitionLog append and read MB/s beside a plain write/read loop on the same disk",
          quick_args=("--total-bytes", "64MiB", "--rounds", "1"), duration="a minute"),
    Suite("rpc", "loadgen.rpc_bench", "RPC round trips",
          "the SDK's Channel to an RpcServer in another process: latency and pipelined throughput",
          quick_args=("--requests", "1000"), duration="seconds"),
    Suite("curve-ceiling", "loadgen.curve_ceiling", "CurveZMQ alone",
          "one PUSH->PULL stream, NONE vs CURVE: MB/s and the I/O threads' CPU per GB",
          quick_args=("--seconds", "0.5", "--rounds", "1"), duration="seconds"),
    Suite("kafka-codec", "loadgen.kafka_codec", "Kafka protocol codec",
          "kio's decode/encode per Produce, Fetch and Metadata request beside the SDK path's "
          "protobuf for the same content (µs, one core)",
          quick_args=("--seconds", "0.2"), duration="seconds"),
    Suite("kafka", "loadgen.kafka_bench", "Kafka listener beside the SDK",
          "confluent-kafka through the gateway's Kafka listener beside riverbed-perf through the "
          "same gateway: produce acks=1 and acks=all, consume and e2e latency at 1,000 "
          "records/s; records/s, MB/s and the gateway's CPU per record, Kafka ÷ SDK",
          quick_args=("--quick",), needs=("fleet",), duration="several minutes",
          make_target="make bench"),
    Suite("kafka-security", "loadgen.kafka_security", "Kafka listener security",
          "confluent-kafka through the gateway's SASL_SSL (SCRAM-SHA-512) listener beside its "
          "PLAINTEXT one on the same fleet: produce records/s and time to connect",
          quick_args=("--records", "50000", "--connects", "5"), needs=("fleet",),
          duration="a minute"),
    Suite("bench", "loadgen.bench", "Produce matrix",
          "100 B / 1 KiB, acks 1 / all, RF 1 / 3, none / lz4, each beside the same command "
          "over the null sink; then the repl suite's rows",
          quick_args=("--quick",), needs=("fleet",), duration="several minutes",
          make_target="make bench"),
    Suite("security", "loadgen.bench", "CURVE on vs off",
          "a NONE and a CURVE fleet side by side: bulk produce, consume and e2e latency, "
          "CURVE ÷ NONE, where the CPU went and the bound it puts on the ratio",
          args=("--security",),
          quick_args=("--security", "--rounds", "1", "--scale", "0.2", "--ceiling-seconds", "0.5"),
          needs=("fleet",), duration="several minutes", make_target="make bench"),
    Suite("repl", "loadgen.repl_bench", "Replication, large records, latency",
          "acks=all RF 3 ÷ acks=1 RF 1 (and ÷ acks=1 RF 3) with CPU per record, 1 KiB defaults "
          "÷ tuned, e2e latency at 1,000 and 50,000 records/s",
          quick_args=("--scale", "0.2"), needs=("fleet",), duration="a few minutes"),
    Suite("hops", "loadgen.hops", "Latency hop by hop",
          "round trips from a bare TCP and zmq echo up to the SDK's send().get() and e2e, "
          "at a fixed rate, with the CPU each process spends per record",
          quick_args=("--count", "500", "--rounds", "1"), needs=("fleet",),
          duration="a few minutes"),
    Suite("failover", "loadgen.failover_bench", "Leader failover",
          "SIGKILL of a leader under acks=all load to the first acknowledgement on every "
          "partition it led, heartbeats vs ZooKeeper's session alone; leader changes under "
          "sustained load with no fault",
          args=("--skip-throughput", "--modes", "heartbeat,zk", "--client-defaults", "--kills",
                "5", "--sustain-s", "120"),
          quick_args=("--skip-throughput", "--modes", "heartbeat", "--client-defaults",
                      "--kills", "1", "--sustain-s", "0"),
          needs=("fleet",), duration="ten minutes", make_target="make bench-failover"),
    Suite("restart", "loadgen.restart_bench", "Restart and rejoin",
          "a storage node stopped with a controlled shutdown and started again: seconds from "
          "its start until every ISR is full, and until a topic created at that moment takes "
          "acks=all writes on every partition",
          quick_args=("--rounds", "1", "--partitions", "10"), needs=("fleet",),
          duration="a few minutes"),
    Suite("txn", "loadgen.txn_bench", "Transactions",
          "transactional producers (transactions of 100, 1,000 and 10,000 records) against the "
          "idempotent one, read_committed against read_uncommitted consumption, and the LSO "
          "lag a consumer sees",
          quick_args=("--rounds", "1", "--num-records", "20000"), needs=("fleet",),
          duration="a few minutes"),
    Suite("gateway-failover", "loadgen.gateway_failover_bench", "Gateway failover",
          "the stall of a producer and a consumer when their gateway is SIGKILLed, fail-fast "
          "channels vs waiting out the request timeout",
          quick_args=("--kills", "1"), needs=("fleet",), duration="a few minutes"),
    Suite("scale", "loadgen.scale", "How cost grows",
          "throughput with 1 to 1,000 partitions, 1 to 16 producer processes, 1 to 4 gateways; "
          "topic creation, controller and storage-node failover at 1,000 and 10,000 "
          "partitions; memory and open files per replica",
          quick_args=("--quick",), needs=("fleet",), duration="tens of minutes",
          make_target="make bench-scale"),
    Suite("aio", "loadgen.aio_bench", "asyncio producer",
          "riverbed.aio's producer against the sync one, interleaved: records/s and records "
          "per CPU second",
          quick_args=("--rounds", "1", "--num-records", "50000"), needs=("fleet",),
          duration="a few minutes"),
    Suite("rebalance", "loadgen.rebalance_bench", "Rebalance: eager vs cooperative",
          "records/s of the partitions that do not move while a fourth member joins three, "
          "eager sticky against cooperative-sticky",
          quick_args=("--rounds", "1", "--baseline-s", "2"), needs=("fleet",),
          duration="a few minutes"),
    Suite("obs", "loadgen.obs_bench", "What observability costs",
          "produce and consume with the services' metrics on vs off, and with SDK tracing at "
          "0 % and 100 % vs no tracer provider",
          quick_args=("--records", "100000", "--rounds", "1"), needs=("fleet",),
          duration="ten minutes"),
    Suite("obs-sdk", "loadgen.obs_bench", "The SDK's metrics alone",
          "a null-sink producer with the SDK's metrics on vs their recordings made no-ops: CPU "
          "seconds per million records",
          args=("--sdk-ab",), quick_args=("--sdk-ab", "--records", "100000", "--rounds", "2"),
          duration="a minute"),
    Suite("spark", "loadgen.spark_bench", "Spark beside the SDK",
          "Spark count(), a read into Parquet and a df.write in records/s, beside one SDK "
          "consumer and producer",
          quick_args=("--records", "200000", "--repeat", "1"), needs=("fleet", "spark"),
          duration="ten minutes", make_target="make spark-bench"),
)

# `riverbed-bench run --all`: the quick, fleet-less suites first, Spark last
ORDER = tuple(s.name for s in SUITES)


def suite(name: str) -> Suite:
    for s in SUITES:
        if s.name == name:
            return s
    raise KeyError(f"unknown suite {name!r}: one of {', '.join(ORDER)}")
