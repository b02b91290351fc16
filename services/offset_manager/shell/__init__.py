"""The offset manager's shell: RpcServer, ZooKeeper shard ownership, __consumer_offsets I/O."""
