"""kafka-python 3.0's KafkaAdminClient over Riverbed's Admin: kept importable under its old
name; it lives in riverbed.admin.kafka_python (the admin package holds both clients, so the
package and its facade import in one direction only)."""
from riverbed.admin.kafka_python import *  # noqa: F401,F403
from riverbed.admin.kafka_python import __all__  # noqa: F401
