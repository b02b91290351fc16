"""kafka-python 3.0 admin, topics and partitions: create_topics in its three forms (with
raise_errors=False for a duplicate), TopicAlreadyExistsError, list_topics, describe_topics (an
unknown topic too), describe_cluster, create_partitions (the response printed as is), an
InvalidPartitionsError, delete_topics and deleting an unknown topic.
Usage: python admin_topics.py BOOTSTRAP PREFIX"""
import sys

from kafka import KafkaAdminClient
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import (InvalidPartitionsError, KafkaError, TopicAlreadyExistsError,
                          UnknownTopicOrPartitionError)

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
A, B, C = PREFIX + "-a", PREFIX + "-b", PREFIX + "-c"

with KafkaAdminClient(bootstrap_servers=BOOTSTRAP, client_id="kp3-admin") as admin:
    print(admin.create_topics({A: {"num_partitions": 2, "replication_factor": 1,
                                   "configs": {"retention.ms": "3600000"}}},
                              wait_for_metadata=True))
    print(admin.create_topics([B], wait_for_metadata=True))     # the cluster's defaults
    print(admin.create_topics([NewTopic(C, 1, 1)]))
    admin.wait_for_topics([C])
    print(admin.create_topics({A: {"num_partitions": 2, "replication_factor": 1}},
                              raise_errors=False))
    try:
        admin.create_topics([A])
    except TopicAlreadyExistsError as e:
        print("create again:", type(e).__name__, e.errno, isinstance(e, KafkaError))
    print(sorted(t for t in admin.list_topics() if t.startswith(PREFIX)))
    for t in admin.describe_topics([A, PREFIX + "-nope"]):
        print(t)
    cluster = admin.describe_cluster()
    print(sorted(cluster), len(cluster["brokers"]), cluster["controller_id"] >= 0,
          bool(cluster["cluster_id"]))

    print(admin.create_partitions({A: 3}))
    print(admin.create_partitions({B: NewPartitions(total_count=2)}))
    print(admin.create_partitions({PREFIX + "-nope": 5}, raise_errors=False))
    try:
        admin.create_partitions({A: 1})
    except InvalidPartitionsError as e:
        print("shrink:", type(e).__name__, e.errno)
    print([len(t["partitions"]) for t in admin.describe_topics([A, B, C])])

    print(admin.delete_topics([B, C]))
    try:
        admin.delete_topics([PREFIX + "-nope"])
    except UnknownTopicOrPartitionError as e:
        print("delete unknown:", type(e).__name__, e.retriable)
    print(admin.delete_topics([PREFIX + "-nope"], raise_errors=False))
    print(admin.delete_topics([A]))
print("admin_topics: OK")
