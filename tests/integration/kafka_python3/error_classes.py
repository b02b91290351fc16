"""kafka-python 3.0's error classes as programs catch them: the hierarchy (KafkaError catches
everything, RetriableError / InvalidMetadataError / AuthorizationError / BrokerResponseError,
IncompatibleBrokerVersion is an UnsupportedVersionError), errno and retriable, and real errors caught by class: TopicAlreadyExistsError, InvalidPartitionsError,
UnknownTopicOrPartitionError, KafkaTimeoutError from a constructor without a cluster and from
future.get(), InvalidReplicationFactorError. Usage: python error_classes.py BOOTSTRAP PREFIX"""
import sys

import kafka.errors as Errors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.errors import (BrokerResponseError, CommitFailedError, IllegalStateError,
                          IncompatibleBrokerVersion, InvalidPartitionsError,
                          InvalidReplicationFactorError, KafkaError, KafkaTimeoutError,
                          TopicAlreadyExistsError,
                          UnknownTopicOrPartitionError, UnsupportedVersionError)

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
TOPIC = PREFIX + "-errs"

names = ["TopicAlreadyExistsError", "UnknownTopicOrPartitionError", "NotLeaderForPartitionError",
         "LeaderNotAvailableError", "RequestTimedOutError",
         "CoordinatorLoadInProgressError", "RebalanceInProgressError", "UnknownMemberIdError",
         "IllegalGenerationError", "MessageSizeTooLargeError", "InvalidConfigurationError",
         "TopicAuthorizationFailedError", "GroupAuthorizationFailedError", "NonEmptyGroupError",
         "GroupIdNotFoundError", "OffsetOutOfRangeError", "UnsupportedVersionError",
         "PolicyViolationError", "ProducerFencedError", "UnknownTopicIdError"]
for name in names:
    cls = getattr(Errors, name)
    print(name, cls.errno, cls.retriable, issubclass(cls, Errors.RetriableError),
          issubclass(cls, Errors.InvalidMetadataError), issubclass(cls, Errors.AuthorizationError),
          issubclass(cls, BrokerResponseError))
for cls in (KafkaTimeoutError, CommitFailedError, IllegalStateError,
            BrokerResponseError, Errors.KafkaConnectionError, Errors.NodeNotReadyError):
    print(cls.__name__, issubclass(cls, KafkaError), cls.retriable,
          cls is BrokerResponseError or not issubclass(cls, BrokerResponseError))
print("IncompatibleBrokerVersion", issubclass(IncompatibleBrokerVersion, UnsupportedVersionError),
      IncompatibleBrokerVersion.errno)
print("NoError", Errors.NoError.errno, issubclass(Errors.NoError, BrokerResponseError))

with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    admin.create_topics({TOPIC: {"num_partitions": 2, "replication_factor": 1}},
                        wait_for_metadata=True)
    for call in (lambda: admin.create_topics([TOPIC]),
                 lambda: admin.create_partitions({TOPIC: 1}),
                 lambda: admin.delete_topics([PREFIX + "-nope"]),
                 lambda: admin.create_topics({PREFIX + "-rf": {"num_partitions": 1,
                                                               "replication_factor": 9}})):
        try:
            call()
            print("no error")
        except KafkaError as e:
            print("caught", type(e).__name__, e.errno, e.retriable,
                  isinstance(e, (TopicAlreadyExistsError, InvalidPartitionsError,
                                 UnknownTopicOrPartitionError, InvalidReplicationFactorError)))
    admin.delete_topics([TOPIC])

for make in (KafkaProducer, KafkaConsumer, KafkaAdminClient):
    try:
        make(bootstrap_servers="127.0.0.1:1", bootstrap_timeout_ms=1000)
    except KafkaError as e:
        print(make.__name__, "without a cluster:", isinstance(e, KafkaTimeoutError), e.retriable)
with KafkaProducer(bootstrap_servers=BOOTSTRAP, max_block_ms=1000) as producer:
    try:
        producer.send(PREFIX + "-never-created", b"x").get(timeout=0.001)
    except KafkaTimeoutError as e:
        print("get timed out:", type(e).__name__, isinstance(e, KafkaError))
print("error_classes: OK")
