"""Framing: round trips, typed errors for malformed input, and a fuzz harness."""
import pytest
import zmq
from hypothesis import given, settings, strategies as st

from riverbed import errors
from riverbed._proto.v1 import fetch_pb2, header_pb2, metadata_pb2, produce_pb2
from riverbed.wire import apis, framing
from riverbed.wire.apis import APIS, ApiKey
from riverbed.wire.framing import (
    CORRUPT_MESSAGE, INVALID_REQUEST, UNSUPPORTED_VERSION, WireError, decode_request,
    decode_response, encode_request, encode_response, error_response,
)

def _apis_with_messages() -> set[str]:
    """Every ApiKey whose `<Name>Request` message exists in some generated proto module."""
    import importlib
    import pkgutil

    import riverbed._proto.v1 as v1
    modules = [importlib.import_module(f"riverbed._proto.v1.{m.name}")
               for m in pkgutil.iter_modules(v1.__path__) if m.name.endswith("_pb2")]
    found = set()
    for name in ApiKey.keys():
        camel = "".join(w.capitalize() for w in name.split("_"))
        if any(hasattr(m, camel + "Request") for m in modules):
            found.add(name)
    return found


def test_api_table_covers_every_api_with_messages():
    expected = _apis_with_messages()
    assert {"PRODUCE", "FETCH", "METADATA", "LEADER_AND_ISR"} <= expected
    assert {s.name for s in APIS.values()} == expected
    for key, spec in APIS.items():
        assert spec.key == key and ApiKey.Name(key) == spec.name
        # every API from v0, versions consecutive (a released one is never dropped)
        assert spec.valid_versions == tuple(range(len(spec.valid_versions)))
        assert spec.request_type.DESCRIPTOR.name.endswith("Request")
        assert spec.response_type.DESCRIPTOR.name.endswith("Response")
        # request and response belong to the same API, e.g. ProduceRequest / ProduceResponse
        assert spec.request_type.DESCRIPTOR.name[:-7] == spec.response_type.DESCRIPTOR.name[:-8]


def test_api_name_of_unknown_number():
    assert apis.api_name(ApiKey.PRODUCE) == "PRODUCE"
    assert apis.api_name(12345) == "API_12345"


def _produce_body():
    return produce_pb2.ProduceRequest(acks=-1, timeout_ms=1500, topics=[
        produce_pb2.ProduceTopic(name="orders", partitions=[produce_pb2.ProducePartition(partition=3)])])


def test_request_round_trip_keeps_header_body_and_payloads():
    payload = bytes(range(256)) * 4
    trace = header_pb2.TraceContext(trace_id=b"t" * 16, span_id=b"s" * 8, trace_flags=1)
    frames = encode_request(ApiKey.PRODUCE, _produce_body(), correlation_id=2**40 + 7,
                            client_id="app-1", timeout_ms=1500, trace=trace,
                            payloads=[payload, memoryview(b"second")])
    assert len(frames) == 4
    assert frames[2] is payload                      # passed through, not copied
    req = decode_request(frames)
    assert req.api == ApiKey.PRODUCE
    assert req.correlation_id == 2**40 + 7
    assert req.header.client_id == "app-1" and req.header.timeout_ms == 1500
    assert req.header.trace == trace
    assert req.body == _produce_body()
    assert req.payloads[0] is payload and bytes(req.payloads[1]) == b"second"


def test_request_decodes_from_zmq_frames_without_copying_payloads():
    frames = [zmq.Frame(f) for f in encode_request(ApiKey.FETCH, fetch_pb2.FetchRequest(),
                                                   correlation_id=1, payloads=[b"p" * 100])]
    req = decode_request(frames)
    assert isinstance(req.body, fetch_pb2.FetchRequest)
    assert req.payloads[0] is frames[2]


def test_timeout_is_clamped_to_uint32():
    req = decode_request(encode_request(ApiKey.METADATA, metadata_pb2.MetadataRequest(),
                                        correlation_id=1, timeout_ms=2**40))
    assert req.header.timeout_ms == 2**32 - 1


@pytest.mark.parametrize("frames, code", [
    ([], INVALID_REQUEST),
    ([b""], INVALID_REQUEST),
    ([b"\xff\xff\xff", b""], CORRUPT_MESSAGE),                       # truncated varint header
])
def test_malformed_frames_are_typed_errors(frames, code):
    with pytest.raises(WireError) as ei:
        decode_request(frames)
    assert ei.value.code == code
    assert ei.value.correlation_id is None


def _header(**kw):
    return header_pb2.RequestHeader(**kw).SerializeToString()


def test_unknown_api_is_invalid_request_with_correlation_id():
    with pytest.raises(WireError) as ei:
        decode_request([_header(api=999, correlation_id=42), b""])
    assert (ei.value.code, ei.value.correlation_id, ei.value.api) == (INVALID_REQUEST, 42, 999)
    with pytest.raises(WireError) as ei:
        decode_request([_header(correlation_id=5), b""])          # api unset
    assert ei.value.code == INVALID_REQUEST


def test_unsupported_version():
    with pytest.raises(WireError) as ei:
        decode_request([_header(api=ApiKey.PRODUCE, api_version=9, correlation_id=8), b""])
    assert ei.value.code == UNSUPPORTED_VERSION and ei.value.correlation_id == 8
    assert isinstance(ei.value.to_kafka_error(), errors.UnsupportedVersionError)


def test_corrupt_body_keeps_correlation_id():
    with pytest.raises(WireError) as ei:
        decode_request([_header(api=ApiKey.PRODUCE, correlation_id=9), b"\x1a\x05ab"])
    assert (ei.value.code, ei.value.correlation_id) == (CORRUPT_MESSAGE, 9)


def test_response_round_trip():
    body = produce_pb2.ProduceResponse(topics=[produce_pb2.ProduceTopicResponse(name="t")])
    resp = decode_response(encode_response(77, ApiKey.PRODUCE, body, [b"abc"]))
    assert resp.correlation_id == 77 and resp.api == ApiKey.PRODUCE and resp.ok
    assert resp.body == body and resp.payloads == [b"abc"]
    resp.raise_for_error()


def test_error_response_has_no_body_and_raises_typed():
    resp = decode_response(error_response(5, ApiKey.FETCH, UNSUPPORTED_VERSION, "v9?"))
    assert resp.body is None and resp.error_code == UNSUPPORTED_VERSION
    assert resp.error_message == "v9?"
    with pytest.raises(errors.UnsupportedVersionError, match="v9"):
        resp.raise_for_error()


def test_response_for_unknown_api_is_corrupt():
    frames = [header_pb2.ResponseHeader(correlation_id=3, api=999).SerializeToString(), b""]
    with pytest.raises(WireError) as ei:
        decode_response(frames)
    assert ei.value.code == CORRUPT_MESSAGE and ei.value.correlation_id == 3


def test_synthetic_timeout_response():
    r = framing.synthetic_response(11, ApiKey.METADATA, framing.REQUEST_TIMED_OUT, "late")
    assert r.correlation_id == 11 and r.body is None
    with pytest.raises(errors.RequestTimedOutError):
        r.raise_for_error()


frames_strategy = st.lists(st.binary(max_size=64), max_size=4)


@settings(max_examples=400, deadline=None)
@given(frames_strategy)
def test_fuzz_decode_request_yields_value_or_wire_error(frames):
    try:
        req = decode_request(frames)
    except WireError as e:
        assert e.code in (INVALID_REQUEST, CORRUPT_MESSAGE, UNSUPPORTED_VERSION)
    else:
        assert req.api in APIS and len(req.payloads) == len(frames) - 2


@settings(max_examples=400, deadline=None)
@given(frames_strategy)
def test_fuzz_decode_response_yields_value_or_wire_error(frames):
    try:
        resp = decode_response(frames)
    except WireError as e:
        assert e.code == CORRUPT_MESSAGE
    else:
        assert resp.body is None or resp.api in APIS


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(APIS)), st.binary(max_size=64), st.integers(0, 2**64 - 1))
def test_fuzz_valid_header_random_body(api, body, corr):
    # the interesting case: a readable header followed by garbage
    try:
        req = decode_request([_header(api=api, correlation_id=corr), body])
    except WireError as e:
        assert e.code == CORRUPT_MESSAGE and e.correlation_id == corr
    else:
        assert req.correlation_id == corr
