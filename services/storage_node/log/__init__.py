"""The storage engine: partition logs in Kafka's on-disk format. No network. See README.md."""
from services.storage_node.log.cleaner import CleanResult, Throttler, clean_log
from services.storage_node.log.config import LogConfig
from services.storage_node.log.log_manager import LogManager
from services.storage_node.log.partition_log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AppendInfo,
    PartitionLog,
    ReadResult,
    UnexpectedAppendOffsetError,
)

__all__ = [
    "AppendInfo", "CleanResult", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "LogConfig",
    "LogManager", "PartitionLog", "ReadResult", "Throttler", "UnexpectedAppendOffsetError",
    "clean_log",
]
