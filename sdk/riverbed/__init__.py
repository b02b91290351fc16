"""Riverbed's client SDK: the wire format (record batches, protobuf schemas, framing) and the
Producer, Consumer and Admin clients. Services import the codec and schemas from here, never the
other way round."""

__version__ = "0.1.0"
