"""The transaction coordinator's shell: RpcServer, shard ownership, __transaction_state I/O,
producer ids from the controller, markers to the partition leaders."""
