"""The Kafka wire protocol at the gateway (issue 25): Kafka clients (librdkafka, kcat,
kafka-python, aiokafka, the Java clients...) talk to a gateway as they talk to a Kafka broker.

- `listeners.py` (pure): Kafka's listener configs (`listeners`, `advertised.listeners`,
  `listener.security.protocol.map`) parsed and checked.
- `protocol.py` (pure): framing, request/response headers, the API/version table; the codec is
  kio (Aiven's, generated from Kafka's JSON message schemas).
- `brokers.py` (pure): the gateways as the brokers Kafka clients see (partition "leaders" spread
  over the live gateways, the coordinator and controller they are told about).
- `translate.py` (pure): each Kafka request -> the Riverbed requests the gateway's SDK handlers
  already serve, and their answers -> the Kafka response. Kafka error numbers pass unchanged.
- `listener.py` (shell): the asyncio TCP server inside the gateway process.

Nothing here imports kio at package import time (config.py imports `listeners`).
"""
