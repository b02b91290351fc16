"""aiokafka.errors' names: riverbed.errors (Kafka's exception names, kafka-python's spelling)."""
from riverbed.errors import *  # noqa: F401,F403
from riverbed.errors import KafkaError, KafkaTimeoutError  # noqa: F401
